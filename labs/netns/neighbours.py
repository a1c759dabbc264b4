"""The host's ARP table: one table shared by every namespace, sized for the labs on it.

Linux keeps IPv4 neighbours of all network namespaces in one table whose limits
(`net.ipv4.neigh.default.gc_thresh1..3`) exist only in the host's namespace. The default
hard limit, 1024 entries, is below what a twin of a few hundred links holds: both ends of
every routed link resolve each other, leaves resolve their servers and servers their
gateways. Past the limit the kernel refuses new entries ("neighbour: arp_cache: neighbor
table overflow!", sendmsg ENOBUFS), and BGP sessions whose peers cannot be resolved never
come up. The deploy raises the limits before it creates the links; it never lowers them (other
labs on the machine may need them).
"""

from __future__ import annotations

from pathlib import Path

NEIGH = Path("/proc/sys/net/ipv4/neigh/default")
BASE = 1024
"""Entries left for the host and other labs: the kernel's default hard limit."""
PER_LINK = 4
"""Entries per link: its two ends resolve each other, with room for servers' and probes'."""


def limits(links: int) -> dict[str, int]:
    """The thresholds a lab of `links` links needs: the soft limit holds the lab and the
    base, the hard limit twice that, garbage collection starts at half of it.

    >>> limits(1047)
    {'gc_thresh1': 2606, 'gc_thresh2': 5212, 'gc_thresh3': 10424}
    """
    soft = BASE + PER_LINK * links
    return {"gc_thresh1": soft // 2, "gc_thresh2": soft, "gc_thresh3": 2 * soft}


def make_room(links: int, root: Path = NEIGH) -> dict[str, int]:
    """Raise the host's thresholds to `limits(links)` where they are lower; returns what was
    raised (name -> new value)."""
    raised = {}
    for name, wanted in limits(links).items():
        path = root / name
        if int(path.read_text()) < wanted:
            path.write_text(str(wanted))
            raised[name] = wanted
    return raised
