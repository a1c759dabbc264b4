"""Remove what crashed or killed runs left behind, found by the lab tag alone.

A lab's tag is its name: its namespaces are `<lab>.<node>`, its processes carry `TWIN_LAB=<lab>`
in their environment, and its run directory is `/run/twin/<lab>` (made first at deploy, so even
a deploy killed before FRR started is found). Nothing is matched by a broader pattern.

The run directory holds a record (`.owner`): the lab directory and the process that deployed
it. From it and the lab's state file, `status` tells a lab that is provably left over (its
deploy died, or its daemons did) from one that is deploying or running.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from labs import processes, state
from labs.netns import frr, netlink
from twin.errors import TwinError
from twin.intent.fabric import is_lab_name

OWNER = ".owner"


@dataclass(frozen=True)
class Owner:
    """Who made a lab's run directory: its lab directory and the deploying process."""

    lab_dir: str
    pid: int
    start: int | None


def claim(lab: str, lab_dir: Path) -> None:
    """Make the lab's run directory, with the record of this deploy in it, in one step (so a
    run directory is never seen without its record)."""
    final = frr.lab_run_dir(lab)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{lab}.", dir=final.parent))
    tmp.chmod(0o755)
    owner = Owner(str(lab_dir.resolve()), os.getpid(), processes.start_time(os.getpid()))
    (tmp / OWNER).write_text(json.dumps(asdict(owner)))
    try:
        tmp.rename(final)
    except OSError:
        shutil.rmtree(tmp)
        raise


def owner(lab: str) -> Owner | None:
    """The record of the lab's deploy, or None when there is none (or it is unreadable)."""
    try:
        data = json.loads((frr.lab_run_dir(lab) / OWNER).read_text())
        return Owner(str(data["lab_dir"]), int(data["pid"]), data["start"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _state(lab: str, lab_dir: Path | None) -> state.State | None:
    """The lab's state file in `lab_dir`, if it is this lab's."""
    if lab_dir is None:
        return None
    try:
        st = state.load(lab_dir)
    except (OSError, TwinError):
        return None
    return st if st is not None and st.lab == lab else None


def status(lab: str) -> str:
    """`deploying` (its deploying process lives), `running` (its state says running and its
    daemons live), `unknown` (processes of it live, but no record or state file says what
    they are: its lab directory moved, say) or `left over` (nothing of it lives, or its state
    says its deploy died)."""
    record = owner(lab)
    alive = bool(processes.tagged(lab))
    if record is None:
        return "unknown" if alive else "left over"
    if record.start is not None and processes.start_time(record.pid) == record.start:
        return "deploying"
    st = _state(lab, Path(record.lab_dir))
    if st is None:
        return "unknown" if alive else "left over"
    return "running" if st.status == "running" and alive else "left over"


def labs_left() -> list[str]:
    """Labs with a run directory on this machine (entries named by the lab-name rule)."""
    if not frr.RUN_ROOT.exists():
        return []
    return sorted(
        p.name
        for p in frr.RUN_ROOT.iterdir()
        if is_lab_name(p.name) and p.is_dir() and not p.is_symlink()
    )


def namespaces_of(lab: str) -> list[str]:
    """The lab's namespaces that exist now."""
    return [n for n in netlink.namespaces() if n.split(".", 1)[0] == lab]


def cleanup(lab: str, lab_dir: Path | None = None) -> dict[str, int]:
    """End the lab's processes (tagged, or living in its namespaces), remove its namespaces,
    run directory and state file (in `lab_dir`, or the lab directory its deploy recorded)."""
    frr.lab_run_dir(lab)  # refuses a name that breaks the lab-name rule
    record = owner(lab)
    dirs = {d for d in (lab_dir, Path(record.lab_dir) if record else None) if d is not None}
    spaces = namespaces_of(lab)
    ids = processes.netns_ids(netlink.NETNS_DIR / name for name in spaces)
    pids = sorted(set(processes.tagged(lab)) | set(processes.inside(ids)))
    processes.end(pids, lab, netns=ids)
    frr.remove_tmp(pids)
    for name in spaces:
        netlink.remove(name)
    frr.remove_run_dir(lab)
    for directory in dirs:
        if _state(lab, directory) is not None:
            state.clear(directory)
    return {"processes": len(pids), "namespaces": len(spaces)}
