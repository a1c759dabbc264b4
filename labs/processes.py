"""Processes a lab started, found by the tag in their environment and ended by pid.

Never by name pattern: a process is ours only if its environment says `TWIN_LAB=<lab>`, or
it lives in one of the lab's namespaces (`<lab>.<node>`: a command run there by hand, which
would otherwise keep the namespace alive after it is removed).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path

from traffic.nsproc import TAG


def lab_env(lab: str) -> dict[str, str]:
    """This process's environment with the lab's tag: for every command started for a lab."""
    return {**os.environ, TAG: lab}


def lineage() -> set[int]:
    """This process and its ancestors: never a lab's to end (a CI job that exported
    `TWIN_LAB` runs `twin cleanup` with the lab's tag in its own environment)."""
    pids, pid = set(), os.getpid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            break
        pid = next(
            (int(line.split()[1]) for line in status.splitlines() if line.startswith("PPid:")), 0
        )
    return pids


def tagged(lab: str) -> list[int]:
    """Pids of live processes whose environment carries `TWIN_LAB=<lab>` (but this process and
    its ancestors)."""
    needle = f"{TAG}={lab}".encode()
    found = []
    mine = lineage()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in mine:
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def belongs(pid: int, lab: str) -> bool:
    """Whether pid is alive and carries the lab's tag (guards against reused pids)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"{TAG}={lab}".encode() in environ.split(b"\0")


def start_time(pid: int) -> int | None:
    """When the process started (clock ticks after boot), or None when it is gone: with the
    pid, it names one process for good (a pid alone may be reused)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[19]) if fields[0] != "Z" else None


NetnsId = tuple[int, int]


def netns_ids(paths: Iterable[Path]) -> set[NetnsId]:
    """The (device, inode) of each namespace bound at `paths` (as `/var/run/netns/<name>`)."""
    ids = set()
    for path in paths:
        with contextlib.suppress(OSError):
            st = path.stat()
            ids.add((st.st_dev, st.st_ino))
    return ids


def _in_netns(pid: int, ids: set[NetnsId]) -> bool:
    try:
        st = os.stat(f"/proc/{pid}/ns/net")
    except OSError:
        return False
    return (st.st_dev, st.st_ino) in ids


def inside(ids: set[NetnsId]) -> list[int]:
    """Pids of live processes whose network namespace is one of `ids`."""
    if not ids:
        return []
    return [
        int(entry.name)
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit() and _in_netns(int(entry.name), ids)
    ]


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def alive(pid: int) -> bool:
    """Whether a process runs (a zombie, killed but not yet reaped by its parent, does not)."""
    _reap(pid)
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def end(pids: list[int], lab: str, grace: float = 2.0, netns: set[NetnsId] | None = None) -> None:
    """SIGTERM the lab's processes among `pids` (tagged, or in one of its namespaces `netns`),
    then SIGKILL what is left after `grace` s, and wait (up to `grace` s more) until they
    are gone; never this process or its ancestors."""
    mine = lineage()
    ours = [p for p in pids if p not in mine and (belongs(p, lab) or _in_netns(p, netns or set()))]
    for pid in ours:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(alive(p) for p in ours) and time.monotonic() < deadline:
        time.sleep(0.02)
    for pid in ours:
        if alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + grace  # a SIGKILL takes effect when the process next runs
    while any(alive(p) for p in ours) and time.monotonic() < deadline:
        time.sleep(0.02)
