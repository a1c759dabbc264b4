"""The state file of a running twin: what was created, so destroy works from a new process.

It is written before anything is created and updated as things are, so a deploy killed
part-way leaves a record; `twin cleanup` also finds leftovers by tag without it. Reading it
refuses, in one line, anything twin did not write: a link, a file that is not JSON or has
other keys or types (its lists of namespaces and pids are what destroy acts on).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from twin import safeio
from twin.errors import LabError
from twin.lab.directory import STATE_FILE, Stat, version

MAX_BYTES = 1 << 20
"""A state file is a few kilobytes; one larger than this was not written by twin."""


@dataclass
class State:
    """What a twin has created."""

    lab: str
    backend: str
    status: str = "deploying"
    namespaces: list[str] = field(default_factory=list)
    pids: dict[str, dict[str, int]] = field(default_factory=dict)
    started: float = field(default_factory=time.time)

    def save(self, lab_dir: Path) -> None:
        """Write atomically (never through a link: `twin.safeio`)."""
        safeio.write(lab_dir / STATE_FILE, json.dumps(asdict(self), indent=1))


@dataclass
class Record:
    """The state of a twin being deployed (`labs.lifecycle` makes it and marks it running): a
    backend adds what it creates, and each addition is saved at once."""

    lab_dir: Path
    state: State

    def save(self) -> None:
        """Write the state file."""
        self.state.save(self.lab_dir)

    def created(
        self, namespaces: list[str] | None = None, pids: dict[str, dict[str, int]] | None = None
    ) -> None:
        """Record namespaces and daemons (per node, name -> pid) the deploy created."""
        self.state.namespaces += namespaces or []
        self.state.pids |= pids or {}
        self.save()


def load(lab_dir: Path) -> State | None:
    """The state of the lab's twin, or None when none was recorded; a state file twin did not
    write (a link, not a regular file, not JSON, other keys or types) is refused in one line."""
    path = lab_dir / STATE_FILE
    refused = LabError(
        f"{path}: not a state file written by twin (if no twin of it runs, remove it)"
    )
    try:
        raw = safeio.read(path, MAX_BYTES)
    except LabError:
        raise refused from None
    if raw is None:
        return None
    try:
        return _parse(json.loads(raw))
    except (ValueError, TypeError, RecursionError):
        raise refused from None


class Watched:
    """The state of one lab directory's twin for a watch that asks again and again: read
    again only when the file changed (`twin.lab.directory.version`)."""

    def __init__(self, lab_dir: Path) -> None:
        self.lab_dir = lab_dir
        self._kept: tuple[Stat, State | None] | None = None

    def __call__(self) -> State | None:
        """The state now (`load`)."""
        try:
            stamp = version(self.lab_dir / STATE_FILE, time.time_ns())
        except OSError:
            stamp = None
        if stamp is not None and self._kept is not None and self._kept[0] == stamp:
            return self._kept[1]
        st = load(self.lab_dir)
        self._kept = (stamp, st) if stamp is not None else None
        return st


def _parse(data: object) -> State:
    """A state from its JSON, every field of its type (ValueError or TypeError otherwise)."""
    if not isinstance(data, dict):
        raise TypeError("not an object")
    st = State(**data)
    names = [st.lab, st.backend, st.status, *st.namespaces]
    if not isinstance(st.namespaces, list) or not all(isinstance(n, str) for n in names):
        raise TypeError("a name that is not a string")
    if not isinstance(st.pids, dict) or not all(isinstance(d, dict) for d in st.pids.values()):
        raise TypeError("pids is not an object of objects")
    pids = [pid for daemons in st.pids.values() for pid in daemons.values()]
    if not all(type(pid) is int and pid > 0 for pid in pids):
        raise ValueError("a pid that is not a positive integer")
    if type(st.started) not in (int, float):
        raise TypeError("started is not a number")
    return st


def running(lab_dir: Path, backend: str) -> bool:
    """Whether the lab's state records a running twin on `backend` (for backends whose twin
    is only that record: fake, sim)."""
    st = load(lab_dir)
    return st is not None and st.backend == backend and st.status == "running"


def clear(lab_dir: Path) -> None:
    """Forget the twin."""
    safeio.remove(lab_dir / STATE_FILE)
