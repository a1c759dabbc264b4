"""Parametric experiments built in Python: an N:1 dumbbell, a 2-tier leaf-spine with dual-homed
servers (the article's reference design), a 3-tier Clos, and ring All-Reduce flows.

>>> exp = leaf_spine(servers=4, leaves=2, spines=2, uplinks=1)
>>> len(exp.hosts), len(exp.switches), len(exp.links)
(8, 4, 12)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from labs.sim.flows import FlowTable
from labs.sim.model import Experiment, Flow, Host, Link, QosProfile, Switch


def dumbbell(
    senders: int,
    speed: float = 40e9,
    delay: float = 1e-6,
    buffer_bytes: int = 12_000_000,
    qos: QosProfile | None = None,
) -> Experiment:
    """`senders` hosts on switch a, one receiver on switch b, all links at `speed`; one
    open-ended DCQCN flow per sender to the receiver."""
    profile = qos or QosProfile()
    switches = [Switch(name, buffer_bytes, profile) for name in ("a", "b")]
    hosts = [Host(f"s{i}", qos=profile) for i in range(senders)] + [Host("r", qos=profile)]
    links = [Link(f"s{i}:eth0", f"a:Ethernet{4 * i}", speed, delay=delay) for i in range(senders)]
    links += [
        Link(f"a:Ethernet{4 * senders}", "b:Ethernet0", speed, delay=delay),
        Link("r:eth0", "b:Ethernet4", speed, delay=delay),
    ]
    flows = [Flow(f"f{i}", f"s{i}", "r") for i in range(senders)]
    return Experiment(switches, hosts, links, flows, name=f"dumbbell-{senders}to1")


def leaf_spine(
    servers: int = 50,
    leaves: int = 8,
    spines: int = 4,
    uplinks: int = 4,
    speed: float = 400e9,
    cable_m: float = 10.0,
    buffer_bytes: int = 64_000_000,
    qos: QosProfile | None = None,
) -> Experiment:
    """Servers with two NICs (hosts ``srvK-nic0``/``-nic1``) on the two leaves of an MLAG pair,
    servers spread over the pairs in turn; every leaf has `uplinks` links to every spine."""
    profile = qos or QosProfile()
    switches = [Switch(f"leaf{i}", buffer_bytes, profile) for i in range(leaves)]
    switches += [Switch(f"spine{i}", buffer_bytes, profile) for i in range(spines)]
    next_port = {s.name: 0 for s in switches}

    def port(switch: str) -> str:
        next_port[switch] += 1
        return f"{switch}:Ethernet{4 * (next_port[switch] - 1)}"

    hosts, links = [], []
    for k in range(servers):
        pair = k % (leaves // 2)
        for nic in range(2):
            name = f"srv{k}-nic{nic}"
            hosts.append(Host(name, qos=profile))
            links.append(Link(f"{name}:eth0", port(f"leaf{2 * pair + nic}"), speed, cable_m))
    for leaf in range(leaves):
        for spine in range(spines):
            for _ in range(uplinks):
                links.append(Link(port(f"leaf{leaf}"), port(f"spine{spine}"), speed, cable_m))
    return Experiment(switches, hosts, links, name=f"leaf-spine-{servers}x2")


def clos3(
    pods: int = 5,
    tors_per_pod: int = 4,
    servers_per_tor: int = 10,
    aggs_per_pod: int = 2,
    cores: int = 4,
    uplinks: int = 3,
    speed: float = 400e9,
    cable_m: float = 10.0,
    buffer_bytes: int = 64_000_000,
    qos: QosProfile | None = None,
) -> Experiment:
    """A 3-tier Clos: ToRs with single-homed servers, aggregation switches per pod, cores;
    `uplinks` parallel links on every ToR-agg and agg-core pair."""
    profile = qos or QosProfile()
    names = [f"core{c}" for c in range(cores)]
    for p in range(pods):
        names += [f"tor{p}-{t}" for t in range(tors_per_pod)] + [
            f"agg{p}-{a}" for a in range(aggs_per_pod)
        ]
    switches = [Switch(name, buffer_bytes, profile) for name in names]
    next_port = dict.fromkeys(names, 0)

    def port(switch: str) -> str:
        next_port[switch] += 1
        return f"{switch}:Ethernet{4 * (next_port[switch] - 1)}"

    hosts, links = [], []
    for p in range(pods):
        for t in range(tors_per_pod):
            tor = f"tor{p}-{t}"
            for s in range(servers_per_tor):
                name = f"srv{p}-{t}-{s}"
                hosts.append(Host(name, qos=profile))
                links.append(Link(f"{name}:eth0", port(tor), speed, cable_m))
            for a in range(aggs_per_pod):
                links += [
                    Link(port(tor), port(f"agg{p}-{a}"), speed, cable_m) for _ in range(uplinks)
                ]
        for a in range(aggs_per_pod):
            for c in range(cores):
                links += [
                    Link(port(f"agg{p}-{a}"), port(f"core{c}"), speed, cable_m)
                    for _ in range(uplinks)
                ]
    return Experiment(switches, hosts, links, name=f"clos3-{len(hosts)}")


def ring_allreduce(
    ranks: Sequence[str],
    bytes_per_rank: int,
    prefix: str = "ar",
    start: float = 0.0,
    dscp: int = 26,
) -> list[Flow]:
    """Ring All-Reduce as 2(n-1) steps of S/n bytes from each rank to the next. Step k of rank
    i starts when rank i has sent step k-1 and received step k-1 from rank i-1."""
    n = len(ranks)
    chunk = bytes_per_rank // n
    flows = []
    for k in range(2 * (n - 1)):
        for i in range(n):
            after = () if k == 0 else (f"{prefix}{k - 1}-{i}", f"{prefix}{k - 1}-{(i - 1) % n}")
            flows.append(
                Flow(
                    f"{prefix}{k}-{i}",
                    ranks[i],
                    ranks[(i + 1) % n],
                    size=chunk,
                    start=start,
                    dscp=dscp,
                    after=after,
                )
            )
    return flows


def ring_allreduce_table(
    exp: Experiment,
    ranks: Sequence[str],
    bytes_per_rank: int,
    prefix: str = "ar",
    start: float = 0.0,
    dscp: int = 26,
) -> FlowTable:
    """`ring_allreduce`'s flows as table rows of `exp`'s hosts: the same names, so the same
    ECMP paths and results, at a fraction of the memory and time for thousands of ranks."""
    host = {h.name: i for i, h in enumerate(exp.hosts)}
    n = len(ranks)
    index = np.array([host[r] for r in ranks], np.int32)
    k = np.repeat(np.arange(2 * (n - 1)), n)
    i = np.tile(np.arange(n), 2 * (n - 1))
    waits = np.where(k > 0, 2, 0)
    after = np.column_stack([(k - 1) * n + i, (k - 1) * n + (i - 1) % n])[k > 0]
    return FlowTable.of(
        [f"{prefix}{step}-{rank}".encode() for step in range(2 * (n - 1)) for rank in range(n)],
        index[i],
        index[(i + 1) % n],
        size=bytes_per_rank // n,
        start=start,
        dscp=dscp,
        after_start=np.concatenate([[0], np.cumsum(waits)]),
        after=after.ravel(),
    )


def with_flows(exp: Experiment, flows: Sequence[Flow], **changes: object) -> Experiment:
    """`exp` with `flows` added (and other fields replaced)."""
    return dataclasses.replace(exp, flows=[*exp.flows, *flows], **changes)  # type: ignore[arg-type]
