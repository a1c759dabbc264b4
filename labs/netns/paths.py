"""Which way a UDP flow goes through a running netns twin, asked of the kernels on its way.

Each hop is the kernel's own lookup for the flow's 5-tuple (`ip route get ... iif IN ipproto
udp sport S dport D`), so the answer carries the multipath hash every switch applies. A flow
is traced from the server that sends it (its own ECMP over its NICs) to the node that holds
the destination address. `pin` picks source ports whose flows cross a given element: that is
how probe flows are made to go through a link or switch before it is failed.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from labs.netns.faults import End
from labs.netns.plan import Plan
from twin.errors import LabError

MAX_HOPS = 12
LOOKUPS_AT_ONCE = 8  # nodes asked at once (one `ip -batch` process each)


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


def _lookups(netns: str, lines: list[str]) -> list[dict[str, str]]:
    """One `ip route get` per line, in one `ip -batch` process; {} where a lookup found no
    route (then asked one by one: the batch's answers do not say which failed)."""
    done = subprocess.run(
        ["ip", "-n", netns, "-j", "-force", "-batch", "-"],
        input="".join(f"route get {line}\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    answers = [json.loads(out)[0] for out in done.stdout.splitlines() if out.startswith("[")]
    if len(answers) == len(lines):
        return answers
    if not answers:
        raise LabError(f"{netns}: ip route get: {done.stderr.strip() or 'no answer'}")
    return [_lookup(netns, line) for line in lines]  # some have no route: which, one by one


def _lookup(netns: str, line: str) -> dict[str, str]:
    """One `ip route get`; {} when there is no route."""
    done = subprocess.run(
        ["ip", "-n", netns, "-j", "route", "get", *line.split()],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    found: list[dict[str, str]] = json.loads(done.stdout) if done.returncode == 0 else [{}]
    return found[0]


def trace(plan: Plan, flows: Iterable[UdpFlow]) -> dict[UdpFlow, list[End]]:
    """Each flow's way: the egress (node, interface) of every hop, from its server on, up to
    the node that holds the destination (empty where a node drops it)."""
    paths: dict[UdpFlow, list[End]] = {}
    at: dict[UdpFlow, tuple[str, str | None]] = {}  # flow -> (node, ingress interface)
    for flow in flows:
        paths[flow], at[flow] = [], (flow.src, None)
    peers = _peers(plan)
    for _ in range(MAX_HOPS):
        by_node: dict[str, list[UdpFlow]] = {}
        for flow, (node, _) in at.items():
            by_node.setdefault(node, []).append(flow)
        asked = [
            [
                f"{f.dst_ip} from {f.src_ip}"
                + (f" iif {at[f][1]}" if at[f][1] else "")
                + f" ipproto udp sport {f.sport} dport {f.dport}"
                for f in here
            ]
            for here in by_node.values()
        ]
        with ThreadPoolExecutor(LOOKUPS_AT_ONCE) as pool:
            answers = list(pool.map(_lookups, map(plan.netns, by_node), asked))
        moving: dict[UdpFlow, tuple[str, str | None]] = {}
        for (node, here), found in zip(by_node.items(), answers, strict=True):
            for flow, answer in zip(here, found, strict=True):
                dev = answer.get("dev")
                if not dev or dev == "lo" or answer.get("type") in ("local", "blackhole"):
                    continue
                paths[flow].append(End(node, dev))
                if (node, dev) not in peers:
                    raise LabError(f"{node}: {dev} is not a link of the twin")
                moving[flow] = peers[(node, dev)]
        if not moving:
            return paths
        at = moving
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
