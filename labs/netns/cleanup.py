"""Remove what crashed or killed runs left behind, found by the lab tag alone.

A lab's tag is its name: its namespaces are `<lab>.<node>`, its processes carry `TWIN_LAB=<lab>`
in their environment, and its run directory is `/run/twin/<lab>` (made first at deploy, so even
a deploy killed before FRR started is found). Nothing is matched by a broader pattern.

Which labs are left over, and whose they are, is for `labs.lifecycle` to say (the record of
the deploy in the run directory, and the lab's state file); it also forgets the twin (state
file) afterwards.
"""

from __future__ import annotations

from pathlib import Path

from labs import lifecycle, processes
from labs.netns import frr, netlink
from traffic.nsproc import NETNS_DIR


def namespaces_of(lab: str) -> list[str]:
    """The lab's namespaces that exist now."""
    return [n for n in netlink.namespaces() if n.split(".", 1)[0] == lab]


def recorded(lab: str) -> list[int]:
    """The daemons the state file of the lab's deploy records (found through the record in
    its run directory): a destroy killed once it had ended them left their crash-log
    directories, which `frr.remove_tmp` removes once they are gone."""
    record = lifecycle.owner(lab)
    st = lifecycle.own_state(lab, Path(record.lab_dir)) if record else None
    return [pid for daemons in (st.pids.values() if st else []) for pid in daemons.values()]


def cleanup(lab: str) -> dict[str, int]:
    """End the lab's processes (tagged, or living in its namespaces), remove its namespaces,
    the crash-log directories of its daemons and its run directory."""
    frr.lab_run_dir(lab)  # refuses a name that breaks the lab-name rule
    spaces = namespaces_of(lab)
    ids = processes.netns_ids(NETNS_DIR / name for name in spaces)
    pids = sorted(set(processes.tagged(lab)) | set(processes.inside(ids)))
    processes.end(pids, lab, netns=ids)
    frr.remove_tmp(pids + recorded(lab))
    for name in spaces:
        netlink.remove(name)
    frr.remove_run_dir(lab)
    return {"namespaces": len(spaces), "processes": len(pids)}
