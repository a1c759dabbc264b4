"""A scenario made into a backend's timeline: ranks, flows, DSCP per host, faults, and the
analytical bounds the report shows beside what was measured.

Pure: reads the lab directory, runs nothing.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from functools import cache, lru_cache
from math import inf
from pathlib import Path

from labs import backend
from labs.backend import FlowSpec, Phase, ProbePair, Timeline
from traffic import collectives, hierarchical, trees
from traffic.collectives import Flow, flow_id, ring_shape
from twin.configs.host import dscp, markings, section
from twin.lab.directory import Lab
from twin.model.wiring import shared
from twin.scenario import choice
from twin.scenario.model import Fault, Scenario, Traffic

SCHEDULES = {
    ("all_reduce", "ring"): collectives.ring_all_reduce,
    ("all_reduce", "halving_doubling"): collectives.halving_doubling_all_reduce,
    ("all_reduce", "tree"): trees.tree_all_reduce,
    ("all_gather", "ring"): collectives.ring_all_gather,
    ("reduce_scatter", "ring"): collectives.ring_reduce_scatter,
    ("all_to_all", "ring"): collectives.all_to_all,
}
PROBED_BY = {"reachability", "mtu"}  # validators that need the end-of-run probes
PROBE_SPORT = 0xC000  # an ECMP probe's first UDP source port (RoCE's range, 0xC000-0xFFFF)
PROPAGATION_S_PER_M = 5e-9  # physics.md 1.3


def ranks(lab: Lab, phase: Traffic) -> list[str]:
    """A collective's ranks in order: as listed, or interleaved across leaf groups so that
    consecutive ranks sit behind different leaves."""
    servers = lab.nodes("server") if phase.servers == "all" else list(phase.servers)
    if phase.order == "natural":
        return servers
    groups: dict[int, list[str]] = {}
    for server in servers:
        groups.setdefault(lab.graph.nodes[server]["group"], []).append(server)
    columns = list(groups.values())
    return [col[i] for i in range(max(map(len, columns))) for col in columns if i < len(col)]


def rails(lab: Lab, names: Sequence[str]) -> list[int]:
    """Each rank's rail on a rail-optimized fabric, where a collective runs once per rail
    (NCCL's rail-local rings, docs/rails.md); none elsewhere."""
    return [lab.graph.nodes[r]["rail"] for r in names] if lab.fabric.servers.rails else []


def groups(lab: Lab, names: Sequence[str]) -> list[int]:
    """Each rank's leaf group (a rack), numbered in order of first rank: a hierarchical
    ring's groups."""
    seen: dict[object, int] = {}
    return [seen.setdefault(lab.graph.nodes[r]["group"], len(seen)) for r in names]


def schedule(
    kind: str,
    algorithm: str,
    names: Sequence[str],
    on: Sequence[int],
    message: int,
    qps: int,
    by: Sequence[int] = (),
) -> collectives.Schedule:
    """A collective's schedule over `names`; with their rails `on`, one per rail; with their
    groups `by`, the hierarchical ring. The last few are kept (a schedule is frozen): a run
    asks for its collective's in its plan, its flows and its analytical bound (0.18 s of CPU
    each for the tree over 1,023 ranks)."""
    return _built(kind, algorithm, tuple(names), tuple(on or ()), message, qps, tuple(by or ()))


@lru_cache(maxsize=4)
def _built(
    kind: str,
    algorithm: str,
    names: tuple[str, ...],
    on: tuple[int, ...],
    message: int,
    qps: int,
    by: tuple[int, ...],
) -> collectives.Schedule:
    """`schedule` made."""
    if by:
        return hierarchical.hierarchical_ring_all_reduce(names, by, message, qps)
    build = SCHEDULES.get((kind, algorithm), SCHEDULES[(kind, "ring")])
    if on:
        return collectives.rail_local(build, names, on, message, qps)
    return build(names, message, qps)


def algorithm(lab: Lab, phase: Traffic) -> str:
    """The algorithm a collective phase runs (`auto`: NCCL's choice, `twin.scenario.choice`)."""
    n = len(ranks(lab, phase))
    return choice.algorithm(phase.algorithm, phase.kind, n, lab.fabric.servers, phase.message)


def _schedule(
    lab: Lab, phase: Traffic, message: int
) -> collectives.Schedule | collectives.RingShape:
    """A phase's collective: a ring's shape where it is one ring (no O(ranks^2) table), else
    its schedule (one per rail on a rail-optimized fabric)."""
    names = ranks(lab, phase)
    on = rails(lab, names)
    played = algorithm(lab, phase)
    by = groups(lab, names) if played == "hierarchical_ring" else []
    build = SCHEDULES.get((phase.kind, played), SCHEDULES[(phase.kind, "ring")])
    shape = None if on or by else ring_shape(build, names, message, phase.qps)
    return shape or schedule(phase.kind, played, names, on, message, phase.qps, by)


def propagation(lab: Lab) -> Callable[[str, str], float]:
    """One-way propagation delay (s) between two servers: the cables of the shortest way
    through the switches (no server transits), at 5 ns/m."""
    servers = set(lab.nodes("server"))
    near: dict[str, dict[str, float]] = {}  # node -> neighbour -> its shortest cable's delay
    for u, v, e in lab.graph.edges(data=True):
        delay = PROPAGATION_S_PER_M * float(e["cable_m"])
        for a, b in ((u, v), (v, u)):
            near.setdefault(a, {})[b] = min(delay, near.get(a, {}).get(b, delay))

    @cache
    def from_switch(switch: str) -> dict[str, float]:
        """Dijkstra from a switch over the switches (servers transit nothing), then each
        server at its nearest switch's distance plus its cable: the same sums, in the same
        order, as a search through the servers, on a graph without them (an eighth of its
        nodes at 4,096 servers)."""
        found: dict[str, float] = {}
        best = {switch: 0.0}  # a switch's shortest way yet: pushed again only when shorter
        todo = [(0.0, switch)]
        while todo:
            d, u = heapq.heappop(todo)
            if u in found:
                continue
            found[u] = d
            for v, w in near.get(u, {}).items():
                if v not in found and v not in servers and d + w < best.get(v, inf):
                    best[v] = d + w
                    heapq.heappush(todo, (d + w, v))
        ends: dict[str, float] = {}
        for u, d in found.items():
            for v, w in near.get(u, {}).items():
                if v in servers and d + w < ends.get(v, inf):
                    ends[v] = d + w
        return found | ends

    def one_way(src: str, dst: str) -> float:
        """Over each of `src`'s cables to `dst` itself or on from a switch (0: none, or
        `src` itself); the switches' ways are kept, not each source's (O(servers^2))."""
        ways = [
            w if first == dst else w + from_switch(first)[dst]
            for first, w in near.get(src, {}).items()
            if first == dst or (first not in servers and dst in from_switch(first))
        ]
        return min(ways) if ways and src != dst else 0.0

    return one_way


def cuts(lab: Lab) -> list[collectives.Cut]:
    """The links servers share as the design built them: per leaf group (a rack) its servers
    and its leaves' uplinks to the spines; per pod (three tiers) the servers below it and its
    spines' links to the super-spines; bandwidth in b/s. Oversubscription (`target` above 1,
    uplinks slower than NICs) and the pods' links up make these slower than the NICs."""
    graph = lab.graph
    racks: dict[object, set[str]] = {}
    for server in lab.nodes("server"):
        racks.setdefault(graph.nodes[server]["group"], set()).add(server)
    pods: dict[object, set[str]] = {}
    found: list[collectives.Cut] = []
    for group, members in sorted(racks.items(), key=lambda kv: str(kv[0])):
        leaves = [n for n in lab.nodes("leaf") if graph.nodes[n]["group"] == group]
        pods.setdefault(graph.nodes[leaves[0]]["pod"], set()).update(members)
        found.append((members, _bandwidth(lab, leaves, "fabric")))
    if len(pods) > 1:
        for pod, members in sorted(pods.items(), key=lambda kv: str(kv[0])):
            spines = [n for n in lab.nodes("spine") if graph.nodes[n]["pod"] == pod]
            found.append((members, _bandwidth(lab, spines, "superfabric")))
    return found


def _bandwidth(lab: Lab, nodes: list[str], kind: str) -> float:
    """The bandwidth (b/s) of the `kind` links of `nodes` in the design."""
    edges = lab.graph.edges(nodes, data=True)
    return 1e6 * sum(float(e["speed"]) for _, _, e in edges if e["kind"] == kind)


def analytical(lab: Lab, phase: Traffic) -> dict[str, float] | None:
    """A collective's completion bound at a server's NIC bandwidth (all its NICs), or at the
    links its ranks share where a step sends more across them (`cuts`), plus, per step, the
    cables' propagation delay between its farthest pair, and nccl-tests' algbw and busbw at
    that bound (Gb/s), for `message` bytes per rank."""
    if phase.kind not in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
        return None
    planned = _schedule(lab, phase, phase.message)
    link_bps = choice.rank_bps(lab.fabric.servers)
    shared = cuts(lab)
    bound = planned.completion_bound_s(link_bps, propagation(lab), shared)
    return {
        "message_bytes": phase.message,
        "link_gbps": link_bps / 1e9,
        "bound_s": round(bound, 6),
        "latency_s": round(bound - planned.completion_bound_s(link_bps, cuts=shared), 6),
        "algbw_gbps": round(8 * planned.algbw(bound) / 1e9, 2),
        "busbw_gbps": round(8 * planned.busbw(bound) / 1e9, 2),
    }


def time_scale(lab: Lab, scenario: Scenario) -> float:
    """The factor the simulator multiplies the scenario's times by: `sim.time_scale` when a
    number. `auto`: 1 (the scenario is in simulated time), unless a fault or another phase
    starts while a collective phase's `duration` says it runs but later than the collective
    can take on a fabric the intent accepts (its `iterations` x its analytical bound x the
    intent's `collectives.max_slowdown`): then the scenario is in live seconds, and the
    factor makes each such collective's `duration` its analytical time, the smallest of
    them, so that what the scenario placed inside the collective falls inside it (the
    bound is a lower bound of what it takes)."""
    given = scenario.sim.time_scale
    if given != "auto":
        return float(given)
    starts = [f.at for f in scenario.faults] + [t.at for t in scenario.traffic]
    slowest = lab.fabric.collectives.max_slowdown
    factors = [1.0]
    for phase in scenario.traffic:
        bound = analytical(lab, phase)
        if bound is None:
            continue
        done = phase.iterations * bound["bound_s"]
        inside = [at for at in starts if phase.at < at <= phase.at + phase.duration]
        if any(at > phase.at + slowest * done for at in inside):
            factors.append(done / phase.duration)
    return min(factors)


def probe_pairs(lab: Lab, phase: Traffic) -> list[ProbePair]:
    """An ECMP probe's pairs: per leaf, `pairs` servers behind it, each sending out of its NIC
    to that leaf, to servers behind other leaf groups (a leaf's MLAG peer uses other servers
    of the group); the leaf's `tuples` source ports are split over its pairs. Each host file
    is read once and each group's remote servers listed once (not per leaf)."""
    servers = lab.nodes("server")
    leaves = lab.nodes("leaf")
    group = {n: lab.graph.nodes[n]["group"] for n in (*leaves, *servers)}
    peers: dict[object, list[str]] = {}
    for leaf in leaves:
        peers.setdefault(group[leaf], []).append(leaf)
    behind_of: dict[str, list[tuple[str, str]]] = {}
    for s in servers:
        for nic in lab.host(s)["interfaces"]:
            if nic.get("peer") is not None:
                behind_of.setdefault(nic["peer"], []).append((s, nic["name"]))
    remote_of: dict[object, list[str]] = {}
    out = []
    for index, leaf in enumerate(leaves):
        behind = behind_of.get(leaf, [])
        if group[leaf] not in remote_of:
            remote_of[group[leaf]] = [s for s in servers if group[s] != group[leaf]]
        remote = remote_of[group[leaf]]
        sport = PROBE_SPORT
        for j in range(phase.pairs if behind and remote else 0):
            src, nic = behind[(peers[group[leaf]].index(leaf) * phase.pairs + j) % len(behind)]
            dst = remote[(index * phase.pairs + j) % len(remote)]
            flows = phase.tuples // phase.pairs + (j < phase.tuples % phase.pairs)
            out.append(
                ProbePair(flow_id(f"{src}.{nic}", dst, sport), leaf, src, nic, dst, sport, flows)
            )
            sport += flows
    return out


def phase_flows(lab: Lab, phase: Traffic) -> list[Flow]:
    """The (src, dst, qp) flows of a phase; a collective's are those of its schedule (an
    ECMP probe has none: its flows are `probe_pairs`)."""
    if phase.kind == "ecmp_probe":
        return []
    if phase.kind in ("backup", "micro_bursts"):
        assert isinstance(phase.src, str) and phase.dst
        return [Flow(phase.src, phase.dst, 0, qp) for qp in range(phase.qps)]
    if phase.kind == "incast":
        assert isinstance(phase.src, list) and phase.dst
        return [Flow(s, phase.dst, 0, qp) for s in phase.src for qp in range(phase.qps)]
    pairs = _schedule(lab, phase, 1 << 20).queue_pairs()
    return [Flow(src, dst, 0, qp) for src, dst, qp in pairs]


def host_dscp(lab: Lab, server: str, phase: Traffic) -> int:
    """The DSCP a server marks a phase's class with: RoCE as its RDMA settings say, other
    classes as its marking rules say, else the fabric policy's; a phase override wins."""
    if phase.dscp is not None:
        return phase.dscp
    host = lab.host(server)
    roce = dscp(section(host, "rdma"), "dscp")
    if phase.traffic_class == "roce" and roce is not None:
        return roce
    for name, value in markings(host):
        if name == phase.traffic_class:
            return value
    return lab.fabric.qos.classes[phase.traffic_class].dscp


def uplinks(lab: Lab) -> dict[str, list[str]]:
    """Per leaf, its ports facing spines by SONiC name (a PortChannel for a bundle)."""
    wiring = shared(lab)
    result: dict[str, set[str]] = {}
    for _, _, e in lab.graph.edges(data=True):
        for side, other in (("a", "b"), ("b", "a")):
            here, there = e[side], e[other]
            roles = (lab.graph.nodes[here]["role"], lab.graph.nodes[there]["role"])
            if roles == ("leaf", "spine"):
                result.setdefault(here, set()).add(wiring.logical(here, e[f"{side}_port"]))
    return {leaf: sorted(ports) for leaf, ports in sorted(result.items())}


def phase(lab: Lab, index: int, traffic: Traffic) -> Phase:
    """One traffic phase as a backend plays it."""
    flows = phase_flows(lab, traffic)
    probe = probe_pairs(lab, traffic) if traffic.kind == "ecmp_probe" else []
    sources = {f.src for f in flows} | {p.src for p in probe}
    collective = traffic.kind in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
    played = algorithm(lab, traffic) if collective else traffic.algorithm
    return Phase(
        index=index,
        label=traffic.label,
        kind=traffic.kind,
        traffic_class=traffic.traffic_class,
        dscp={src: host_dscp(lab, src, traffic) for src in sorted(sources)},
        flows=[FlowSpec(flow_id(f.src, f.dst, f.qp), f.src, f.dst, f.qp) for f in flows],
        at=traffic.at,
        duration=traffic.duration,
        payload=traffic.payload,
        pps=traffic.pps,
        gbps=traffic.gbps,
        message=traffic.message if collective else None,
        algorithm=played,
        burst=traffic.burst if traffic.kind == "micro_bursts" else None,
        period=traffic.period if traffic.kind == "micro_bursts" else None,
        ranks=ranks(lab, traffic) if collective else [],
        rails=rails(lab, ranks(lab, traffic)) if collective else [],
        groups=groups(lab, ranks(lab, traffic)) if played == "hierarchical_ring" else [],
        iterations=traffic.iterations if collective else 1,
        probe=probe,
    )


def fault(f: Fault) -> backend.Fault:
    """A scenario's fault as the backends take it."""
    return backend.Fault(
        kind=f.fault,
        link=f.link,
        node=f.node,
        daemon=f.daemon,
        percent=f.percent,
        mbit=f.mbit,
        period=f.period,
        count=f.count,
        priority=f.priority,
        duration=f.duration,
        delay_ms=f.delay_ms,
    )


def timeline(lab: Lab, scenario: Scenario, files: Path | None = None) -> Timeline:
    """Everything the scenario asks a backend to do; files (captures) go to `files`."""
    return Timeline(
        scenario=scenario.name,
        duration=scenario.duration,
        sample_interval=scenario.sample_interval,
        phases=[phase(lab, i, t) for i, t in enumerate(scenario.traffic)],
        faults=[(f.at, fault(f)) for f in scenario.faults],
        captures=list(scenario.capture),
        probes=bool(PROBED_BY & set(scenario.validate_)),
        failover_probes=(
            backend.FailoverProbes(scenario.failover_probes.pps, scenario.failover_probes.flows)
            if "failover" in scenario.validate_
            else None
        ),
        files=files,
        sim={**scenario.sim.model_dump(), "time_scale": time_scale(lab, scenario)},
    )
