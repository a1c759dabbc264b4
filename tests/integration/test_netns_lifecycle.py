"""Deploy and destroy: edited configs run, state across processes, nothing left behind,
crashes, labs side by side, and the refusals (not root, FRR missing).

The edited lab runs next to the shared twin under a name that extends the shared twin's
(`<shared>-b`), so a tag matched by prefix instead of exactly would show here.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from labs import registry
from labs.netns import frr
from labs.netns import lifecycle as netns
from tests.conftest import (
    TWIN,
    cli,
    lab_name,
    leftovers,
    namespaces,
    ping,
    plan,
    root_and_frr,
    running_twin,
    snapshot,
    tagged,
    twin_cli,
    write_lab,
)
from twin.cli import main as twin_main
from twin.errors import LabError
from twin.lab.directory import Lab
from twin.pytest_plugin import Twin

SERVER_PORT_MTU = 1500


def edit(path: Path, node: str, change: Any) -> None:
    """Edit a switch's config_db.json in place."""
    file = path / "configs" / node / "config_db.json"
    db = json.loads(file.read_text())
    change(db)
    file.write_text(json.dumps(db, indent=2))


def _edits(db: dict[str, Any]) -> None:
    # leaf1: the port of server2's first NIC at MTU 1500, the port of server1's first NIC
    # administratively down.
    db["PORT"]["Ethernet8"]["mtu"] = str(SERVER_PORT_MTU)
    db["PORT"]["Ethernet0"]["admin_status"] = "down"


@pytest.fixture(scope="module")
def edited(small_twin: Twin, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Twin]:
    """A second twin, deployed (from a new process) from edited configs, while the shared one
    runs; destroyed by its test, or at the end of the module whatever happens."""
    path = write_lab(tmp_path_factory.mktemp("edited") / "lab", f"{small_twin.name}-b")
    assert [p["description"] for p in _ports(path, "leaf1", "Ethernet0", "Ethernet8")] == [
        "server1:nic0",
        "server2:nic0",
    ]
    edit(path, "leaf1", _edits)
    with running_twin(path) as twin:
        yield twin


def _ports(path: Path, node: str, *ports: str) -> list[dict[str, str]]:
    db = json.loads((path / "configs" / node / "config_db.json").read_text())
    return [db["PORT"][p] for p in ports]


def link(twin: Twin, node: str, dev: str) -> dict[str, Any]:
    """`ip -j link show dev` in a node."""
    done = twin.exec(node, "ip", "-j", "link", "show", "dev", dev)
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)[0]
    return found


def test_an_edited_port_mtu_is_what_runs(edited: Twin, small_twin: Twin) -> None:
    assert link(edited, "leaf1", "Ethernet8")["mtu"] == SERVER_PORT_MTU
    assert link(edited, "leaf2", "Ethernet8")["mtu"] == 9100  # the other leaf is unedited
    assert link(small_twin, "leaf1", "Ethernet8")["mtu"] == 9100  # so is the other lab
    # A 9000-byte packet with DF does not fit out of that port any more; 1500 still does.
    server2 = edited.servers()["server2"]
    big = edited.exec("leaf1", "ping", "-n", "-M", "do", "-s", "8972", "-c1", "-W1", server2)
    assert big.returncode != 0
    assert f"mtu={SERVER_PORT_MTU}" in big.stdout + big.stderr
    small = ping(edited, "leaf1", server2, "-M", "do", "-s", str(SERVER_PORT_MTU - 28), "-c1")
    assert small.returncode == 0, small.stdout


def test_an_edited_admin_down_port_is_down(edited: Twin) -> None:
    port = link(edited, "leaf1", "Ethernet0")
    assert "UP" not in port["flags"]
    nic = link(edited, "server1", "nic0")
    assert "LOWER_UP" not in nic["flags"]  # no carrier: the other end is down
    assert link(edited, "leaf1", "Ethernet16")["operstate"] == "UP"  # the rest is up
    # server1 is still reachable over its other NIC, from its pair and the other pair.
    server1 = edited.servers()["server1"]
    # (server2's own port on leaf1 has the edited MTU: its pings fit that.)
    for src, size in (("server2", SERVER_PORT_MTU - 28), ("server3", 8972)):
        done = ping(edited, src, server1, "-M", "do", "-s", str(size), "-c1", "-W2")
        assert done.returncode == 0, f"{src}: {done.stdout}"


def test_two_labs_run_side_by_side_without_touching_each_other(
    edited: Twin, small_twin: Twin
) -> None:
    assert edited.name.startswith(small_twin.name)  # a prefix, yet a different lab
    mine, theirs = namespaces(edited.name), namespaces(small_twin.name)
    assert len(mine) == len(plan(edited).nodes) and len(theirs) == len(plan(small_twin).nodes)
    assert not set(mine) & set(theirs)
    assert not set(tagged(edited.name)) & set(tagged(small_twin.name))
    assert small_twin.converged() and edited.converged()


def test_bfdd_runs_real_time_and_the_other_daemons_at_their_niceness(small_twin: Twin) -> None:
    # A daemon leads its own session, so its niceness ranks it only within that session: bfdd
    # is real-time, or it waits for a CPU longer than BFD's detection time on a loaded machine.
    state = json.loads((small_twin.path / "state.json").read_text())
    daemons = [(d, pid) for switch in state["pids"].values() for d, pid in switch.items()]
    assert {d for d, _ in daemons} == {"zebra", "staticd", "bfdd", "bgpd"}
    assert frr.realtime()  # this machine allows it (root, the root cgroup)
    for daemon, pid in daemons:
        tasks = [int(t.name) for t in Path(f"/proc/{pid}/task").iterdir()]
        policies = {os.sched_getscheduler(t) for t in tasks}
        if daemon == "bfdd":
            assert policies == {os.SCHED_RR}, daemon
            assert os.sched_getparam(pid).sched_priority == 1
        else:
            assert policies == {os.SCHED_OTHER}, daemon
            assert {os.getpriority(os.PRIO_PROCESS, t) for t in tasks} == {frr.PRIORITY}, daemon


def test_destroy_from_a_new_process_leaves_nothing(edited: Twin, small_twin: Twin) -> None:
    before = snapshot(small_twin)
    state = json.loads((edited.path / "state.json").read_text())
    assert state["status"] == "running" and len(state["namespaces"]) == len(plan(edited).nodes)
    pids = [pid for daemons in state["pids"].values() for pid in daemons.values()]
    done = cli(edited, "destroy")  # a new process, knowing only what the state file says
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        f"{edited.name}: removed {len(plan(edited).nodes)} namespaces, {len(pids)} processes"
    )
    assert leftovers(edited.name, pids) == []
    assert not (edited.path / "state.json").exists()
    assert json.loads((edited.path / "events.jsonl").read_text().splitlines()[-1])["event"] == (
        "destroyed"
    )
    assert sorted(p.name for p in (edited.path / "logs").iterdir()) == sorted(edited.lab.switches())
    # The other lab did not notice: same processes, same interfaces, still converged.
    assert snapshot(small_twin) == before
    assert small_twin.established() and small_twin.converged()


def test_a_deploy_killed_part_way_is_cleaned_up_by_name(tmp_path: Path) -> None:
    reason = root_and_frr()
    if reason:
        pytest.skip(reason)
    name = lab_name()
    path = write_lab(tmp_path / "lab", name)
    argv = [str(TWIN)] if TWIN.exists() else [sys.executable, "-m", "twin.cli.main"]
    deploy = subprocess.Popen(
        [*argv, "deploy", str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        while not namespaces(name) and time.monotonic() < deadline and deploy.poll() is None:
            time.sleep(0.02)
        time.sleep(0.5)  # part-way: namespaces made, FRR starting
        assert deploy.poll() is None, "deploy finished before it could be killed"
        deploy.send_signal(signal.SIGKILL)
        deploy.wait()
        left = leftovers(name)
        assert any(x.startswith("namespace") for x in left)
        pids = [int(x.split()[1]) for x in left if x.startswith("process")]
        done = twin_cli("cleanup", name)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"{name}: removed ")
        assert leftovers(name, pids) == []
    finally:
        if deploy.poll() is None:
            deploy.kill()
        if leftovers(name):
            twin_cli("cleanup", name)
    # Cleanup removed the state file the killed deploy left: the lab is not running.
    assert not (path / "state.json").exists() and netns.is_running(Lab.open(path)) is False


def run_as_nobody(argv: list[str]) -> tuple[int, str]:
    """`twin ARGV` as user nobody, in a child process; returns the exit code and stderr.

    The child is forked from this interpreter and drops to nobody with setuid: runuser
    would exec the venv's Python, which nobody may not be able to reach (here it lives under
    /root).
    """
    twin_main.parser()  # import every verb while still root
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 99
        try:
            os.close(read)
            sys.stderr = os.fdopen(write, "w")
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            code = twin_main.main(argv)
        except BaseException as exc:  # pragma: no cover - reported through the exit code
            print(f"child: {exc!r}", file=sys.stderr)
        finally:
            sys.stderr.flush()
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as err:
        stderr = err.read()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), stderr


@pytest.fixture
def readable_lab() -> Iterator[Path]:
    """A lab directory that user nobody can read (pytest's tmp_path is root's only)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to become nobody")
    top = Path(tempfile.mkdtemp(prefix="twin-it-"))
    try:
        path = write_lab(top / "lab", lab_name())
        for directory in [top, *(p for p in top.rglob("*") if p.is_dir())]:
            directory.chmod(0o755)
        yield path
    finally:
        shutil.rmtree(top)


@pytest.mark.parametrize("verb", ["deploy", "destroy"])
def test_not_root_is_one_line_and_exit_2(readable_lab: Path, verb: str) -> None:
    code, stderr = run_as_nobody([verb, str(readable_lab)])
    assert (code, stderr) == (2, "twin: the netns backend needs root (namespaces, veths, FRR)\n")
    name = Lab.open(readable_lab).name
    assert leftovers(name) == [] and not (readable_lab / "state.json").exists()


def test_cleanup_not_root_is_one_line_and_exit_2(readable_lab: Path) -> None:
    code, stderr = run_as_nobody(["cleanup", Lab.open(readable_lab).name])
    assert (code, stderr.count("\n")) == (2, 1) and "needs root" in stderr


def test_frr_missing_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (the root check comes first)")
    path = write_lab(tmp_path / "lab", lab_name())
    monkeypatch.setattr(frr, "FRR_BIN", tmp_path / "no-frr")
    with pytest.raises(LabError, match=r"^FRR is not installed \(apt-get install frr\): zebra"):
        registry.get("netns").deploy(Lab.open(path))
    assert twin_main.main(["deploy", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("twin: FRR is not installed")
    assert leftovers(Lab.open(path).name) == [] and not (path / "state.json").exists()
