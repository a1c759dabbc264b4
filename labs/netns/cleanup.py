"""Remove what crashed or killed runs left behind, found by the lab tag alone.

A lab's tag is its name: its namespaces are `<lab>.<node>`, its processes carry `TWIN_LAB=<lab>`
in their environment, and its run directory is `/run/twin/<lab>` (made first at deploy, so even
a deploy killed before FRR started is found). Nothing is matched by a broader pattern.

Which labs are left over, and whose they are, is for `labs.lifecycle` to say (the record of
the deploy in the run directory, and the lab's state file); it also forgets the twin (state
file) afterwards.
"""

from __future__ import annotations

from labs import processes
from labs.netns import frr, netlink


def namespaces_of(lab: str) -> list[str]:
    """The lab's namespaces that exist now."""
    return [n for n in netlink.namespaces() if n.split(".", 1)[0] == lab]


def cleanup(lab: str) -> dict[str, int]:
    """End the lab's processes (tagged, or living in its namespaces), remove its namespaces
    and its run directory."""
    frr.lab_run_dir(lab)  # refuses a name that breaks the lab-name rule
    spaces = namespaces_of(lab)
    ids = processes.netns_ids(netlink.NETNS_DIR / name for name in spaces)
    pids = sorted(set(processes.tagged(lab)) | set(processes.inside(ids)))
    processes.end(pids, lab, netns=ids)
    frr.remove_tmp(pids)
    for name in spaces:
        netlink.remove(name)
    frr.remove_run_dir(lab)
    return {"namespaces": len(spaces), "processes": len(pids)}
