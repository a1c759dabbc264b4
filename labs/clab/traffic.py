"""Traffic on a clab twin: the wall-clock senders and receivers (`labs.flows`, as on netns),
entered into each server container's network namespace by the pid of its main process.

A server container's namespace is `/proc/<pid>/ns/net`; the host files are the container
flavour's (`clab/<server>/host.json`: routed /31 NICs toward each leaf, the lab address on
`lo`). Every sender and receiver process carries the lab's tag (`TWIN_LAB=<lab>`) and dies
with the thread that forked it; `destroy` ends what is left, found by that tag.
"""

from __future__ import annotations

from labs.clab import faults
from labs.clab.containers import Containers
from labs.flows import Servers


def servers(boxes: Containers) -> Servers:
    """The lab's server containers as traffic reaches them: namespace by pid, host file."""
    names = boxes.lab.nodes("server")
    return Servers(
        boxes.lab.name,
        {s: f"/proc/{boxes.pid(s)}/ns/net" for s in names},
        {s: faults.host(boxes.lab, s) for s in names},
    )
