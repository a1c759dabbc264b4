"""The state file of a running twin: what was created, so destroy works from a new process.

It is written before anything is created and updated as things are, so a deploy killed
part-way leaves a record; `twin cleanup` also finds leftovers by tag without it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from twin.labdir import STATE_FILE


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
        """Write atomically."""
        tmp = lab_dir / f".{STATE_FILE}.tmp"
        tmp.write_text(json.dumps(asdict(self), indent=1))
        os.replace(tmp, lab_dir / STATE_FILE)


def load(lab_dir: Path) -> State | None:
    """The state of the lab's twin, or None when none was recorded."""
    path = lab_dir / STATE_FILE
    if not path.exists():
        return None
    return State(**json.loads(path.read_text()))


def running(lab_dir: Path, backend: str) -> bool:
    """Whether the lab's state records a running twin on `backend` (for backends whose twin
    is only that record: fake, sim)."""
    st = load(lab_dir)
    return st is not None and st.backend == backend and st.status == "running"


def clear(lab_dir: Path) -> None:
    """Forget the twin."""
    (lab_dir / STATE_FILE).unlink(missing_ok=True)
