"""Which way a UDP flow goes through a running netns twin, asked of the kernels on its way.

Each hop is the kernel's own lookup for the flow's 5-tuple (what `ip route get ... iif IN
ipproto udp sport S dport D` asks, sent over netlink by `labs.netns.rtnl`), so the answer
carries the multipath hash every switch applies. A flow is traced from the server that sends
it (its own ECMP over its NICs) to the node that holds the destination address. `pin` picks
source ports whose flows cross a given element: that is how probe flows are made to go
through a link or switch before it is failed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from labs.netns.faults import End
from labs.netns.plan import Plan
from labs.netns.rtnl import Query, Rtnl
from twin.errors import LabError

MAX_HOPS = 12


@dataclass(frozen=True)
class UdpFlow:
    """A UDP flow from a server's address to another address."""

    src: str  # the sending server
    dst: str  # the node holding dst_ip
    src_ip: str
    dst_ip: str
    sport: int
    dport: int


def _peers(plan: Plan) -> dict[tuple[str, str], tuple[str, str | None]]:
    """Each link end's far end, as (node, interface)."""
    out: dict[tuple[str, str], tuple[str, str | None]] = {}
    for v in plan.veths:
        out[(v.a, v.a_if)] = (v.b, v.b_if)
        out[(v.b, v.b_if)] = (v.a, v.a_if)
    return out


def trace(plan: Plan, flows: Iterable[UdpFlow]) -> dict[UdpFlow, list[End]]:
    """Each flow's way: the egress (node, interface) of every hop, from its server on, up to
    the node that holds the destination (empty where a node drops it)."""
    paths: dict[UdpFlow, list[End]] = {}
    at: dict[UdpFlow, tuple[str, str | None]] = {}  # flow -> (node, ingress interface)
    for flow in flows:
        paths[flow], at[flow] = [], (flow.src, None)
    peers = _peers(plan)
    lookups = Rtnl()
    try:
        for _ in range(MAX_HOPS):
            by_node: dict[str, list[UdpFlow]] = {}
            for flow, (node, _) in at.items():
                by_node.setdefault(node, []).append(flow)
            moving: dict[UdpFlow, tuple[str, str | None]] = {}
            for node, here in by_node.items():
                asked = [Query(f.dst_ip, f.src_ip, at[f][1], f.sport, f.dport) for f in here]
                for flow, dev in zip(here, lookups.lookup(plan.netns(node), asked), strict=True):
                    if dev is None or dev == "lo":
                        continue
                    if (node, dev) not in peers:
                        raise LabError(f"{node}: {dev} is not a link of the twin")
                    paths[flow].append(End(node, dev))
                    moving[flow] = peers[(node, dev)]
            if not moving:
                return paths
            at = moving
    finally:
        lookups.close()
    raise LabError(f"flows still on their way after {MAX_HOPS} hops (a loop?)")


def crosses(path: list[End], element: tuple[End, End] | str) -> bool:
    """Whether a traced way crosses a switch (by name: it forwards the flow) or a link (the
    flow leaves by either end)."""
    if isinstance(element, str):
        return any(hop.node == element for hop in path)
    return any(hop in element for hop in path)


def pin(
    plan: Plan,
    template: UdpFlow,
    element: tuple[End, End] | str,
    count: int,
    ports: range = range(33000, 34024),
) -> list[UdpFlow]:
    """`count` flows like `template`, differing in source port, that cross `element`."""
    candidates = [replace(template, sport=p) for p in ports]
    paths = trace(plan, candidates)
    chosen = [f for f in candidates if crosses(paths[f], element)][:count]
    if len(chosen) < count:
        raise LabError(
            f"{template.src} -> {template.dst_ip}: only {len(chosen)} of {len(candidates)} "
            f"source ports cross {element}"
        )
    return chosen
