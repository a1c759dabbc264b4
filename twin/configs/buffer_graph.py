"""The buffer dependency graph of lossless traffic, from a FIB (physics.md section 4.2).

A vertex is a lossless ingress queue `(switch, port, priority)`; an edge u -> v says packets
buffered at u can only drain when v has room: some flow enters u's switch at u's port and
leaves for v's switch, arriving at v's port, lossless at both (the DSCP maps to a TC that the
port enables PFC on). Any cycle is a cyclic buffer dependency, the necessary condition of a
PFC deadlock. Flows go from every server to every other server, with every DSCP servers mark.

The graph is kept compact: destinations are grouped into classes (servers that every node
forwards alike) and a link carries a bit mask of classes; `carries[node]` holds the classes
whose flows reach a node. A port is a PortChannel or a port (the logical port). Only the part
of the graph that can hold a cycle is built as a networkx graph: vertices that lead nowhere
are pruned first, one by one.
"""

from __future__ import annotations

import bisect
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from ipaddress import IPv4Network

import networkx as nx

from twin.configs.qos import map_name, pfc_enabled, qos_map
from twin.model.fib import Fib, FibDelta, Hops, Lookup, Lpm, NextHop
from twin.model.wiring import Wiring

Port = tuple[str, str]
"""A receiving end: (switch, logical port)."""
Queue = tuple[str, str, int]
"""A lossless ingress queue: (switch, port, priority)."""
Action = tuple[tuple[NextHop, ...], bool]
"""What a node does with a destination: its next hops toward switches, and whether it also
delivers to a server."""


@dataclass(frozen=True)
class Traffic:
    """Where classes go: `carries[node]`, the classes reaching a node; `hops[node][end]`, the
    classes the node forwards to a receiving end."""

    carries: Mapping[str, int]
    hops: Mapping[str, Mapping[Port, int]]


@dataclass(frozen=True)
class Cycle:
    """A cyclic buffer dependency: its queues in order and a few flows closing it."""

    queues: list[Queue]
    flows: list[tuple[str, str]]
    component: list[Queue]
    """Every queue of the strongly connected component the cycle belongs to."""

    def __str__(self) -> str:
        ring = " -> ".join(f"{s}:{p}:{q}" for s, p, q in [*self.queues, self.queues[0]])
        text = f"{ring} (flows {', '.join(f'{a}->{b}' for a, b in self.flows)})"
        if len(self.component) > len(self.queues):
            switches = ", ".join(sorted({q[0] for q in self.component}))
            text += f"; {len(self.component)} queues on {switches} depend on each other"
        return text


_KNOWN: weakref.WeakKeyDictionary[
    Wiring,
    tuple[
        dict[tuple[int, ...], dict[Port, dict[int, frozenset[int]]]],
        dict[tuple[str, str | None], dict[int, int]],
    ],
] = weakref.WeakKeyDictionary()
"""What a Wiring's configs say whatever the FIB, for every graph on it: per set of DSCPs, the
lossless priorities of each receiving end (`BufferGraph.lossless`); the DSCP -> TC maps."""


def _action(hops: Hops | None, servers: Mapping[str, object]) -> Action:
    if not hops:
        return (), False
    to_switches = tuple(h for h in hops if h.node not in servers)
    return to_switches, len(to_switches) < len(hops)


class BufferGraph:
    """The buffer dependency graph a FIB implies, for the DSCPs in `dscps`."""

    def __init__(self, wiring: Wiring, fib: Fib, dscps: set[int]) -> None:
        self.w, self.fib, self.dscps = wiring, fib, sorted(dscps)
        self._find = Lookup(fib)
        servers = wiring.hosts
        self.addresses = sorted((int(h.address.ip), name) for name, h in servers.items())
        nodes = sorted(fib)
        ids: dict[Action, int] = {}
        known: dict[int, int] = {}

        def action_id(hops: Hops | None) -> int:
            """Actions as small ints (next hop tuples are shared, so by identity first)."""
            if id(hops) not in known:
                known[id(hops)] = ids.setdefault(_action(hops, servers), len(ids))
            return known[id(hops)]

        ints = [address for address, _ in self.addresses]
        columns = [_column(fib[n], ints, action_id) for n in nodes]
        groups: dict[tuple[int, ...], list[str]] = {}
        keys = zip(*columns, strict=True) if columns else [()] * len(ints)
        for key, (_, server) in zip(keys, self.addresses, strict=True):
            groups.setdefault(key, []).append(server)
        table = list(ids)
        self.classes = list(groups.values())
        self.class_of = {s: c for c, members in enumerate(self.classes) for s in members}
        self.actions = {n: [table[key[i]] for key in groups] for i, n in enumerate(nodes)}
        """Per node, what it does with each class."""
        hops = {n: self._hops(n, self.actions[n]) for n in nodes}
        everyone = (1 << len(self.classes)) - 1
        carries = {
            s: everyone & ~(1 << c if len(self.classes[c]) == 1 else 0)
            for s, c in self.class_of.items()
        }
        _spread(carries, hops, list(servers))
        self.traffic = Traffic(carries, hops)
        self.arriving = {end: self.send(end) for h in hops.values() for end in h}
        """Classes arriving at each receiving end."""
        lossless, maps = _KNOWN.setdefault(wiring, ({}, {}))
        self._lossless = lossless.setdefault(tuple(self.dscps), {})
        self._maps = maps

    def _hops(self, n: str, actions: list[Action]) -> dict[Port, int]:
        """Per receiving end, the classes n forwards there."""
        by_action: dict[Action, int] = {}
        for c, action in enumerate(actions):
            by_action[action] = by_action.get(action, 0) | 1 << c
        hops: dict[Port, int] = {}
        for (to_switches, _), mask in by_action.items():
            for hop in to_switches:
                end = self.w.far(n, hop.port)
                if end is not None:
                    hops[end] = hops.get(end, 0) | mask
        return hops

    def send(self, end: Port, t: Traffic | None = None) -> int:
        """Classes arriving at a receiving end."""
        t = t or self.traffic
        upstream = self.w.far(*end)
        if upstream is None:
            return 0
        return t.carries.get(upstream[0], 0) & t.hops.get(upstream[0], {}).get(end, 0)

    def lossless(self, end: Port) -> dict[int, frozenset[int]]:
        """DSCP -> lossless priorities on ingress at a receiving end (any member's), for the
        DSCPs lossless there."""
        if end not in self._lossless:
            switch, port = end
            db = self.w.configs.get(switch, {})
            found: dict[int, set[int]] = {}
            for member in self.w.physical(switch, port):
                name = map_name(db, member, "dscp_to_tc_map")
                if (switch, name) not in self._maps:
                    self._maps[(switch, name)] = qos_map(db, member, "dscp_to_tc_map") or {}
                to_tc, enabled = self._maps[(switch, name)], pfc_enabled(db, member)
                for dscp in self.dscps:
                    if to_tc.get(dscp, 0) in enabled:
                        found.setdefault(dscp, set()).add(to_tc.get(dscp, 0))
            self._lossless[end] = {d: frozenset(tcs) for d, tcs in found.items()}
        return self._lossless[end]

    def queues(self, end: Port) -> set[Queue]:
        """The lossless queues of a receiving end."""
        return {(end[0], end[1], p) for ps in self.lossless(end).values() for p in ps}

    def successors(self, q: Queue, t: Traffic | None = None) -> Iterator[tuple[Queue, int]]:
        """Queues q depends on, with the classes of each dependency."""
        t = t or self.traffic
        switch, port, prio = q
        arriving = self.send((switch, port), t)
        if not arriving:
            return
        dscps = [d for d, ps in self.lossless((switch, port)).items() if prio in ps]
        for end, mask in t.hops.get(switch, {}).items():
            if arriving & mask:
                nexts = self.lossless(end)  # a DSCP lossy there drops: no dependency
                for p2 in {p for d in dscps for p in nexts.get(d, ())}:
                    yield (end[0], end[1], p2), arriving & mask

    @cached_property
    def vertices(self) -> set[Queue]:
        """Every lossless queue some flow reaches."""
        return {q for end, classes in self.arriving.items() if classes for q in self.queues(end)}

    def core(self) -> set[Queue]:
        """The vertices that lead to a cycle (others are pruned, sinks first).

        A queue holds classes of traffic (those arriving at its port) that its switch sends on
        per DSCP; it stays while some of them go to a port with a queue still kept, lossless
        for that DSCP. Queues are taken out one by one until every one left stays: the
        largest such set (taking one out never lets another stay)."""
        alive = set(self.vertices)
        # per (switch, DSCP): [classes sent to a port, how many of its queues are alive]
        sends: dict[tuple[str, int], list[list[int]]] = {}
        feeds: dict[Queue, list[tuple[tuple[str, int], list[int]]]] = {}  # what a queue opens
        for switch, hops in self.traffic.hops.items():
            for end, mask in hops.items():
                for d, ps in self.lossless(end).items():
                    queues = [(*end, p) for p in ps]
                    send = [mask, sum(q in alive for q in queues)]
                    sends.setdefault((switch, d), []).append(send)
                    for q in queues:
                        feeds.setdefault(q, []).append(((switch, d), send))
        out = {key: _union(s) for key, s in sends.items()}
        # per queue: the classes arriving there and the (switch, DSCP) of the traffic it holds
        holds = {
            q: (
                self.arriving[q[:2]],
                [(q[0], d) for d, ps in self.lossless(q[:2]).items() if q[2] in ps],
            )
            for q in alive
        }
        waiting: dict[tuple[str, int], list[Queue]] = {}
        for q, (_, held) in holds.items():
            for key in held:
                waiting.setdefault(key, []).append(q)

        def stays(q: Queue) -> bool:
            arriving, held = holds[q]
            return any(arriving & out.get(key, 0) for key in held)

        doomed = [q for q in alive if not stays(q)]
        alive -= set(doomed)
        while doomed:
            for key, send in feeds.get(doomed.pop(), []):
                send[1] -= 1
                if send[1] or (now := _union(sends[key])) == out[key]:
                    continue
                out[key] = now
                for q in waiting.get(key, []):
                    if q in alive and not stays(q):
                        alive.discard(q)
                        doomed.append(q)
        return alive

    def cycles(self, limit: int = 10) -> list[Cycle]:
        """Per strongly connected component of the core (at most `limit`), a shortest cycle
        through its first queue."""
        members = self.core()
        core = sorted(members)
        g = nx.DiGraph()
        for q in core:
            for nxt, mask in sorted(self.successors(q)):
                if nxt in members:
                    g.add_edge(q, nxt, classes=mask)
        found = []
        components = sorted(sorted(c) for c in nx.strongly_connected_components(g))
        for component in components:
            start = component[0]
            if len(component) == 1 and not g.has_edge(start, start):
                continue
            sub = g.subgraph(component)
            ring = min(
                (
                    [start, *nx.shortest_path(sub, nxt, start)[:-1]]
                    for nxt in sorted(sub.successors(start))
                ),
                key=len,
            )
            edges = zip(ring, [*ring[1:], ring[0]], strict=True)
            flows = {f for u, v in edges for f in self._flows(u, g.edges[u, v]["classes"])}
            found.append(Cycle(ring, sorted(flows)[:4], component))
            if len(found) == limit:
                break
        return found

    def _flows(self, q: Queue, classes: int) -> list[tuple[str, str]]:
        """A few (source, destination) flows of `classes` through q's port."""
        c = (classes & -classes).bit_length() - 1
        destination = self.classes[c][0]
        end, seen = q[:2], set()
        frontier = [end]
        while frontier:
            here = frontier.pop()
            upstream = self.w.far(*here)
            if upstream is None or upstream[0] in seen:
                continue
            x = upstream[0]
            seen.add(x)
            if x in self.w.hosts:
                if x != destination:
                    return [(x, destination)]
                continue
            frontier += [e for e in self._ends_of(x) if self.send(e) & (1 << c)]
        return []

    @cached_property
    def _into(self) -> dict[str, list[Port]]:
        into: dict[str, list[Port]] = {}
        for hops in self.traffic.hops.values():
            for end in hops:
                into.setdefault(end[0], []).append(end)
        return into

    def _ends_of(self, switch: str) -> list[Port]:
        """Receiving ends at a switch."""
        return self._into.get(switch, [])

    def gains(self, delta: FibDelta) -> dict[str, dict[Port, int]]:
        """Per node, the receiving ends and classes a FIB change sends somewhere new (a change
        that only drops next hops sends nothing anywhere new)."""
        extra: dict[str, dict[Port, int]] = {}
        servers = self.w.hosts
        sets: dict[int, frozenset[NextHop]] = {}

        def hop_set(hops: Hops) -> frozenset[NextHop]:
            if id(hops) not in sets:
                sets[id(hops)] = frozenset(hops)
            return sets[id(hops)]

        for n, changes in delta.items():
            table: Lpm | None = None  # n's table once changed: built once per change
            for prefix, new in changes.items():
                old = self.fib[n].get(prefix)
                if new is not None and old is not None and hop_set(new) <= hop_set(old):
                    continue
                servers_hit = self._servers_in(prefix)
                if not servers_hit:
                    continue
                if table is None:
                    table = self._find.lpm(n).patched(changes)
                for server in servers_hit:
                    c = self.class_of[server]
                    before = set(self.actions[n][c][0])
                    address = int(servers[server].address.ip)
                    for hop in _action(table(address), servers)[0]:
                        end = self.w.far(n, hop.port)
                        if hop not in before and end is not None:
                            ends = extra.setdefault(n, {})
                            ends[end] = ends.get(end, 0) | 1 << c
        return extra

    def _servers_in(self, prefix: IPv4Network) -> list[str]:
        low = bisect.bisect_left(self.addresses, (int(prefix.network_address), ""))
        high = bisect.bisect_right(self.addresses, (int(prefix.broadcast_address), "~"))
        return [name for _, name in self.addresses[low:high]]

    def may_close_cycle(self, extra: Mapping[str, Mapping[Port, int]]) -> bool:
        """Whether traffic sent somewhere new (`extra`) may close a cycle: one through a queue
        whose traffic grew, in the graph of old and new dependencies together (a superset of
        the graph after the change, so False is a proof)."""
        base = self.traffic
        hops = {**base.hops}
        for n, ends in extra.items():
            merged = dict(hops.get(n, {}))
            for end, mask in ends.items():
                merged[end] = merged.get(end, 0) | mask
            hops[n] = merged
        carries = dict(base.carries)
        grown = _spread(carries, hops, list(extra)) | {e for ends in extra.values() for e in ends}
        t = Traffic(carries, hops)
        starts = [q for end in grown for q in self.queues(end)]
        return _reaches_cycle(starts, lambda q: (nxt for nxt, _ in self.successors(q, t)))


def _union(sends: list[list[int]]) -> int:
    """The classes of the sends (`[classes, alive queues]`) that still reach a queue."""
    classes = 0
    for mask, alive in sends:
        if alive:
            classes |= mask
    return classes


def _column(
    routes: Mapping[IPv4Network, Hops],
    addresses: list[int],
    action_id: Callable[[Hops | None], int],
) -> list[int]:
    """`action_id` of the longest-prefix match of each of the sorted `addresses` (of None
    where no route covers it): every route, the least specific first, claims the addresses
    inside it."""
    column = [action_id(None)] * len(addresses)
    for prefix in sorted(routes, key=lambda p: p.prefixlen):
        low = int(prefix.network_address)
        first = bisect.bisect_left(addresses, low)
        last = bisect.bisect_left(addresses, low + (1 << 32 - prefix.prefixlen), first)
        if first < last:
            column[first:last] = [action_id(routes[prefix])] * (last - first)
    return column


def _spread(
    carries: dict[str, int], hops: Mapping[str, Mapping[Port, int]], start: list[str]
) -> set[Port]:
    """Propagate `carries` along `hops` from the `start` nodes; the receiving ends whose
    traffic grew."""
    grown: set[Port] = set()
    queue = list(start)
    while queue:
        n = queue.pop()
        for end, mask in hops.get(n, {}).items():
            new = carries.get(n, 0) & mask & ~carries.get(end[0], 0)
            if new:
                carries[end[0]] = carries.get(end[0], 0) | new
                grown.add(end)
                queue.append(end[0])
    return grown


def _reaches_cycle(starts: Iterable[Queue], successors: Callable[[Queue], Iterable[Queue]]) -> bool:
    """Whether a cycle is reachable from `starts` (iterative depth-first search)."""
    done: set[Queue] = set()
    for start in starts:
        if start in done:
            continue
        path, on_path = [(start, iter(successors(start)))], {start}
        while path:
            q, following = path[-1]
            nxt = next(following, None)
            if nxt is None:
                path.pop()
                on_path.discard(q)
                done.add(q)
            elif nxt in on_path:
                return True
            elif nxt not in done:
                path.append((nxt, iter(successors(nxt))))
                on_path.add(nxt)
    return False
