"""Remove what crashed or killed runs left behind, found by the lab tag alone.

A lab's tag is its name: its namespaces are `<lab>.<node>`, its processes carry `TWIN_LAB=<lab>`
in their environment, and its run directory is `/run/twin/<lab>` (made first at deploy, so even
a deploy killed before FRR started is found). Nothing is matched by a broader pattern.

The run directory holds the record of the deploy that made it (`labs.lifecycle`): from it and
the lab's state file, `lifecycle.status` tells a lab that is provably left over (its deploy
died, or its daemons did) from one that is deploying or running.
"""

from __future__ import annotations

from pathlib import Path

from labs import lifecycle, processes, state
from labs.lifecycle import owner
from labs.netns import frr, netlink
from twin.intent.fabric import is_lab_name


def labs_left() -> list[str]:
    """Labs with a run directory on this machine (entries named by the lab-name rule)."""
    if not lifecycle.RUN_ROOT.exists():
        return []
    return sorted(
        p.name
        for p in lifecycle.RUN_ROOT.iterdir()
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
        if lifecycle.own_state(lab, directory) is not None:
            state.clear(directory)
    return {"processes": len(pids), "namespaces": len(spaces)}
