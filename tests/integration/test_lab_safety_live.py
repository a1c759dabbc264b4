"""Issue 21 on live netns twins: a same-named lab directory cannot touch a running twin, a
second local user cannot steer one, SIGTERM mid-run leaves nothing, a SIGKILLed run's probe
senders stop, a daemon killed mid-run fails the verdict.

The second local user is created here (a name of our own, `twt` and 5 hex digits) and
removed afterwards.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from labs import lifecycle
from labs.netns import frr
from tests.conftest import (
    TWIN,
    lab_name,
    leftovers,
    recorded_pids,
    root_and_frr,
    running_twin,
    tagged,
    twin_cli,
    wait_for,
    write_lab,
)
from twin.pytest_plugin import Twin

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(root_and_frr() is not None, reason=str(root_and_frr())),
]


@pytest.fixture(scope="module")
def twin_a(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Twin]:
    """A running twin deployed from directory `a`."""
    path = write_lab(tmp_path_factory.mktemp("owner") / "a", lab_name("own"))
    with running_twin(path) as twin:
        yield twin


def _state_of(twin: Twin) -> tuple[list[int], list[str]]:
    """What a refused command must leave: the twin's processes and namespaces."""
    spaces = sorted(p.name for p in Path("/var/run/netns").iterdir())
    return sorted(tagged(twin.name)), [n for n in spaces if n.startswith(f"{twin.name}.")]


@pytest.mark.parametrize("verb", ["destroy", "deploy", "exec", "fault", "run", "cleanup"])
def test_a_same_named_directory_never_touches_the_running_twin(
    verb: str, twin_a: Twin, tmp_path: Path
) -> None:
    b = write_lab(tmp_path / "b", twin_a.name)  # a copy never deployed
    before = _state_of(twin_a)
    extra = {
        "exec": ["leaf1", "--", "true"],
        "fault": ["link-down", "leaf1:spine1"],
        "run": [str(tmp_path / "none.yaml")],
    }
    if verb == "run":
        (tmp_path / "none.yaml").write_text(yaml.safe_dump({**LONG, "faults": []}))
    done = twin_cli(verb, str(b), *extra.get(verb, []))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert str(twin_a.path.resolve()) in done.stderr, done.stderr
    assert str(b.resolve()) in done.stderr
    assert "leftovers" not in done.stderr
    assert _state_of(twin_a) == before
    status = twin_a.backend.status(twin_a.lab)
    assert status.running and set(status.nodes.values()) == {"up"}
    assert twin_a.established()


def test_cleanup_by_name_of_a_running_twin_is_refused(twin_a: Twin) -> None:
    before = _state_of(twin_a)
    done = twin_cli("cleanup", twin_a.name)
    assert done.returncode == 2 and "--force-owner" in done.stderr, done.stderr
    assert _state_of(twin_a) == before


CONNECT = """
import socket, sys
kind = socket.SOCK_STREAM if sys.argv[2] == "stream" else socket.SOCK_SEQPACKET
s = socket.socket(socket.AF_UNIX, kind)
try:
    s.connect(sys.argv[1])
except OSError as exc:
    print(type(exc).__name__)
else:
    print("connected")
"""


def _connect(path: Path, user: str | None = None) -> str:
    """Try to connect to a unix socket (as `user`); what happened."""
    kinds = ("stream", "seqpacket")
    results = []
    for kind in kinds:
        argv = ["python3", "-c", CONNECT, str(path), kind]
        if user is not None:
            argv = ["runuser", "-u", user, "--", *argv]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        results.append(done.stdout.strip() or done.stderr.strip())
    return "connected" if "connected" in results else results[0]


def test_a_second_local_user_cannot_reach_a_switchs_control_sockets(
    twin_a: Twin, other_user: str
) -> None:
    rundir = frr.run_dir(twin_a.name, "leaf1")
    sockets = sorted(p for p in rundir.iterdir() if p.is_socket())
    names = {p.name for p in sockets}
    assert {"bfdd.sock", "zserv.api", "zebra.vty", "bgpd.vty"} <= names, names
    assert _connect(rundir / "bfdd.sock") == "connected"  # the daemons' own user can
    for sock in sockets:
        mode = sock.stat().st_mode & 0o777
        assert mode & 0o007 == 0, f"{sock}: mode {mode:o}"
        assert _connect(sock, other_user) == "PermissionError", sock
    assert rundir.stat().st_mode & 0o007 == 0
    assert lifecycle.RUN_ROOT.stat().st_mode & 0o022 == 0


LONG: dict[str, Any] = {
    "name": "long",
    "settle": 0,
    "traffic": [
        {"at": 0, "duration": 60, "kind": "backup", "src": "server1", "dst": "server3", "pps": 200}
    ],
    "faults": [{"at": 25, "fault": "link-down", "link": "leaf1:spine1"}],
    "failover_probes": {"pps": 1000, "flows": 4},
    "validate": {"daemons": {}, "bgp_health": {}},
}


def _start_run(tmp_path: Path, scenario: dict[str, Any]) -> tuple[Path, subprocess.Popen[str]]:
    """`twin run` of a new lab (it deploys it), returned once the scenario plays."""
    path = write_lab(tmp_path / "lab", lab_name("sig"))
    (tmp_path / "scenario.yaml").write_text(yaml.safe_dump(scenario))
    proc = subprocess.Popen(
        [str(TWIN), "run", str(path), str(tmp_path / "scenario.yaml")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(lambda: any(path.glob("runs/*/scenario.yaml")) or proc.poll() is not None, "play", 180)
    assert proc.poll() is None, proc.communicate()
    return path, proc


@contextlib.contextmanager
def _removed(path: Path) -> Iterator[None]:
    """Remove by name what a failed test left of the lab in `path`."""
    try:
        yield
    finally:
        if (path / "fabric.yaml").exists():
            name = yaml.safe_load((path / "fabric.yaml").read_text())["name"]
            if leftovers(name):
                twin_cli("cleanup", name, "--force-owner")


def test_sigterm_mid_run_destroys_the_twin_and_exits_143(tmp_path: Path) -> None:
    path = tmp_path / "lab"
    with _removed(path):
        path, proc = _start_run(tmp_path, LONG)
        name = yaml.safe_load((path / "fabric.yaml").read_text())["name"]
        pids = recorded_pids(path)
        time.sleep(4)  # the probe senders are spawned, traffic flows
        assert len(tagged(name)) > len(pids)  # more than FRR: senders, receivers, probes
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 143, err
        assert err.strip().splitlines()[-1].startswith("twin: stopped by SIGTERM"), err
        assert "Traceback" not in err
        assert leftovers(name, pids) == []
        (run,) = (path / "runs").iterdir()
        assert (run / "interrupted").read_text() == "interrupted: SIGTERM\n"
        assert not (path / "state.json").exists()


def test_a_sigkilled_run_leaves_no_probe_sender(tmp_path: Path) -> None:
    path = tmp_path / "lab"
    with _removed(path):
        path, proc = _start_run(tmp_path, LONG)
        name = yaml.safe_load((path / "fabric.yaml").read_text())["name"]
        daemons = set(recorded_pids(path))
        time.sleep(4)
        proc.kill()
        proc.communicate(timeout=60)
        wait_for(lambda: set(tagged(name)) <= daemons, "the run's own processes end", 10)
        done = twin_cli("cleanup", str(path))  # from its directory: the twin is its own
        assert done.returncode == 0, done.stderr
        assert leftovers(name, list(daemons)) == []


def test_zebra_killed_mid_run_fails_the_verdict_naming_it(tmp_path: Path) -> None:
    """Whatever the scenario validates: `daemons` is an invariant, judged on every run."""
    scenario = {**LONG, "traffic": [{**LONG["traffic"][0], "duration": 12}], "faults": []}
    scenario["validate"] = {"bgp_health": {}}  # not `daemons`
    scenario["failover_probes"] = None
    scenario = {k: v for k, v in scenario.items() if v is not None}
    path = tmp_path / "lab"
    with _removed(path):
        path, proc = _start_run(tmp_path, scenario)
        time.sleep(3)
        zebra = json.loads((path / "state.json").read_text())["pids"]["leaf1"]["zebra"]
        os.kill(zebra, signal.SIGKILL)
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 1, out + err
        (row,) = [line for line in out.splitlines() if line.split()[:1] == ["daemons"]]
        assert "fail" in row and "leaf1" in row and "zebra" in row, out
