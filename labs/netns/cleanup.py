"""Remove what crashed or killed runs left behind, found by the lab tag alone.

A lab's tag is its name: its namespaces are `<lab>.<node>`, its processes carry `TWIN_LAB=<lab>`
in their environment, and its run directory is `/run/twin/<lab>` (made first at deploy, so even
a deploy killed before FRR started is found). Nothing is matched by a broader pattern.
"""

from __future__ import annotations

from labs.netns import frr, netlink, processes
from twin.intent.fabric import is_lab_name


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


def cleanup(lab: str) -> dict[str, int]:
    """End the lab's processes, remove its namespaces and run directory."""
    frr.lab_run_dir(lab)  # refuses a name that breaks the lab-name rule
    pids = processes.tagged(lab)
    processes.end(pids, lab)
    frr.remove_tmp(pids)
    spaces = namespaces_of(lab)
    for name in spaces:
        netlink.remove(name)
    frr.remove_run_dir(lab)
    return {"processes": len(pids), "namespaces": len(spaces)}
