"""SIGKILL at any point of `twin deploy` or `twin run`, then `twin cleanup LAB`: nothing is left.

The command is started in its own session (as `setsid twin run ... &` would) and killed with
SIGKILL, so none of its own clean-up runs, right after it reports reaching a point: namespaces
being created, FRR starting, waiting for convergence, and (for `run`) in the middle of the
scenario, with traffic workers and a fault in flight. Then `twin cleanup LAB` (by name) must
leave none of: live processes the command started (zombies do not count), live processes in
any of the lab's network namespaces (a process left there keeps a removed namespace alive in
the kernel), namespaces, the run directory, FRR crash-log directories of what it started,
`state.json`.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from labs import processes
from labs.netns import frr
from tests.conftest import (
    TWIN,
    alive,
    lab_name,
    leftovers,
    namespaces,
    root_and_frr,
    tagged,
    twin_cli,
    write_lab,
)

SCENARIO = {
    "name": "killed",
    "settle": 1,
    "traffic": [
        {"at": 0, "duration": 10, "kind": "all_reduce", "servers": "all", "qps": 2, "pps": 50},
        {"at": 1, "duration": 8, "kind": "backup", "src": "server1", "dst": "server3", "pps": 200},
    ],
    "faults": [
        {"at": 2, "fault": "link-down", "link": "leaf1:spine1"},
        {"at": 6, "fault": "link-up", "link": "leaf1:spine1"},
    ],
    "validate": {"bgp_health": {}},
}

POINTS = [
    ("deploy", "creating", 0.3),
    ("deploy", "starting FRR", 0.5),
    ("deploy", "waiting for BGP", 0.5),
    ("run", "waiting for BGP", 0.5),
    ("run", "playing", 3.0),  # mid-scenario: senders, receivers and the fault running
]


def descendants(root: int) -> set[int]:
    """Every live process below `root`."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def netns_ids(name: str) -> set[int]:
    """Inodes of the lab's network namespaces that exist now."""
    found = set()
    for space in namespaces(name):
        with contextlib.suppress(OSError):
            found.add(Path("/var/run/netns", space).stat().st_ino)
    return found


def inside(ids: set[int]) -> list[int]:
    """Live processes whose network namespace is one of `ids` (bound or not)."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and (entry / "ns" / "net").stat().st_ino in ids:
                found.append(int(entry.name))
    return [pid for pid in found if alive(pid)]


def _wait_for_line(proc: subprocess.Popen[str], marker: str, timeout: float = 120) -> str:
    """Read the command's stderr until a line containing `marker`; fail if it ends first."""
    assert proc.stderr is not None
    deadline = time.monotonic() + timeout
    seen: list[str] = []
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stderr], [], [], 0.5)
        if not ready:
            continue
        line = proc.stderr.readline()
        if not line:
            pytest.fail(f"finished before {marker!r}: {''.join(seen)[-500:]}")
        seen.append(line)
        if marker in line:
            return line
    pytest.fail(f"{marker!r} not reached in {timeout:.0f} s")


@pytest.mark.parametrize(
    ("verb", "marker", "after"), POINTS, ids=[f"{v}-{m}" for v, m, _ in POINTS]
)
def test_cleanup_after_sigkill_leaves_nothing(
    tmp_path: Path, verb: str, marker: str, after: float
) -> None:
    reason = root_and_frr()
    if reason:
        pytest.skip(reason)
    name = lab_name()
    path = write_lab(tmp_path / "lab", name)
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump(SCENARIO))
    argv = [str(TWIN)] if TWIN.exists() else [sys.executable, "-m", "twin.cli.main"]
    args = [verb, str(path)] + ([str(scenario)] if verb == "run" else [])
    proc = subprocess.Popen(
        [*argv, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    started: set[int] = set()
    daemons: list[int] = []
    spaces: set[int] = set()
    try:
        _wait_for_line(proc, marker)
        deadline = time.monotonic() + after
        while time.monotonic() < deadline:  # note what it starts until the kill
            started |= descendants(proc.pid)
            daemons = sorted(set(daemons) | set(tagged(name)))
            spaces |= netns_ids(name)
            time.sleep(0.05)
        assert proc.poll() is None, "the command ended before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        done = twin_cli("cleanup", name)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"{name}: removed "), done.stdout
        survivors = sorted(p for p in started | set(daemons) if alive(p))
        assert survivors == [], [Path(f"/proc/{p}/cmdline").read_bytes() for p in survivors]
        stuck = inside(spaces)
        assert stuck == [], [Path(f"/proc/{p}/cmdline").read_bytes() for p in stuck]
        assert leftovers(name, sorted(started | set(daemons))) == []
        assert not (path / "state.json").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in started:  # should any be left: ours if its command names this lab
            with contextlib.suppress(OSError):
                command = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
                if alive(pid) and (str(path) in command or f"/{name}/" in command):
                    os.kill(pid, signal.SIGKILL)
        if leftovers(name):
            twin_cli("cleanup", name)


def test_cleanup_by_name_after_a_destroy_killed_once_the_daemons_ended(tmp_path: Path) -> None:
    """A destroy SIGKILLed after its first step (every daemon of the twin ended:
    `labs.netns.lifecycle.destroy`, done here as it does it) leaves the state file saying
    running, the run directory, the namespaces and the daemons' crash-log directories, and no
    process: `twin cleanup LAB` by name removes them all, as nothing of the twin lives."""
    reason = root_and_frr()
    if reason:
        pytest.skip(reason)
    name = lab_name()
    path = write_lab(tmp_path / "lab", name)
    try:
        assert twin_cli("deploy", str(path)).returncode == 0
        daemons = tagged(name)
        assert daemons
        processes.end(daemons, name)  # what the killed destroy did
        assert not any(alive(p) for p in daemons)
        assert any(frr.FRR_TMP.glob(f"*.{p}") for p in daemons)
        assert namespaces(name) and '"status": "running"' in (path / "state.json").read_text()
        done = twin_cli("cleanup", name)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"{name}: removed "), done.stdout
        assert leftovers(name, daemons) == [] and not (path / "state.json").exists()
    finally:
        if leftovers(name):
            twin_cli("destroy", str(path))
            twin_cli("cleanup", name)
