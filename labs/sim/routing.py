"""Forwarding tables: each switch's egress ports towards each host.

A switch's own `routes` win (by host name, then longest IPv4 prefix of the host's address);
other destinations take every next hop on a shortest path (hosts never transit).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, ip_address, ip_network
from itertools import repeat

import numpy as np
import numpy.typing as npt

from labs.sim.model import Host, Link, Switch


class RoutingError(ValueError):
    """A route that names an unknown port or an unreadable prefix."""


def split_port(name: str) -> tuple[str, str]:
    """``node:port`` -> (node, port)."""
    node, sep, port = name.partition(":")
    if not sep or not node or not port:
        raise RoutingError(f"{name!r}: a port is named node:port")
    return node, port


def _neighbours(links: Sequence[Link]) -> dict[str, list[tuple[str, str]]]:
    """node -> [(own port name node:port, peer node)] in link order."""
    out: dict[str, list[tuple[str, str]]] = {}
    for link in links:
        a, b = split_port(link.a)[0], split_port(link.b)[0]
        out.setdefault(a, []).append((link.a, b))
        out.setdefault(b, []).append((link.b, a))
    return out


def _distances(
    host: str, neighbours: Mapping[str, list[tuple[str, str]]], hosts: set[str]
) -> dict[str, int]:
    dist = {host: 0}
    todo = deque([host])
    while todo:
        node = todo.popleft()
        if node in hosts and node != host:
            continue
        for _, peer in neighbours.get(node, []):
            if peer not in dist:
                dist[peer] = dist[node] + 1
                todo.append(peer)
    return dist


def _explicit(switch: Switch, host: Host) -> Sequence[str] | None:
    if not switch.routes:
        return None
    if host.name in switch.routes:
        return switch.routes[host.name]
    if host.address is None:
        return None
    address = ip_address(host.address)
    best: tuple[int, Sequence[str]] | None = None
    for key, ports in switch.routes.items():
        if "/" not in key:
            continue
        try:
            net = ip_network(key, strict=False)
        except ValueError:
            raise RoutingError(f"{switch.name}: route {key!r} is not a prefix") from None
        inside = (
            isinstance(net, IPv4Network) and isinstance(address, IPv4Address) and address in net
        )
        if inside and (best is None or net.prefixlen > best[0]):
            best = (net.prefixlen, ports)
    return None if best is None else best[1]


def forwarding(
    switches: Sequence[Switch], hosts: Sequence[Host], links: Sequence[Link]
) -> dict[str, dict[str, list[str]]]:
    """switch -> host -> egress ports (``node:port``), in a deterministic order."""
    neighbours = _neighbours(links)
    named = _by_name(switches, [h.name for h in hosts], neighbours)
    if named is not None:
        return named
    host_names = {h.name for h in hosts}
    table: dict[str, dict[str, list[str]]] = {s.name: {} for s in switches}
    own = {s.name: {p for p, _ in neighbours.get(s.name, [])} for s in switches}
    given_as: dict[tuple[str, int], list[str]] = {}  # a route's ports as node:port
    for host in hosts:
        dist: dict[str, int] | None = None  # found when a switch has no route of its own
        for switch in switches:
            given = _explicit(switch, host)
            if given is not None:
                ports = given_as.get((switch.name, id(given)))
                if ports is None:
                    ports = [p if ":" in p else f"{switch.name}:{p}" for p in given]
                    for port in ports:
                        if port not in own[switch.name]:
                            raise RoutingError(
                                f"{switch.name}: route to {host.name} via unknown port {port!r}"
                            )
                    given_as[(switch.name, id(given))] = ports
                table[switch.name][host.name] = ports
                continue
            if dist is None:
                dist = _distances(host.name, neighbours, host_names)
            here = dist.get(switch.name)
            table[switch.name][host.name] = (
                []
                if here is None
                else [
                    port
                    for port, peer in neighbours.get(switch.name, [])
                    if dist.get(peer) == here - 1 and (peer not in host_names or peer == host.name)
                ]
            )
    return table


def _by_name(
    switches: Sequence[Switch], hosts: list[str], neighbours: Mapping[str, list[tuple[str, str]]]
) -> dict[str, dict[str, list[str]]] | None:
    """`forwarding` when every switch has a route to every host by its name (a lab's tables,
    `labs.sim.lab.routes`), a switch at a time; None otherwise, or when a route names a port
    the switch lacks (`forwarding` then says which, host by host)."""
    wanted = set(hosts)
    if not all(s.routes and s.routes.keys() >= wanted for s in switches):
        return None
    table: dict[str, dict[str, list[str]]] = {}
    for s in switches:
        own = {p for p, _ in neighbours.get(s.name, [])}
        lists = list(map(s.routes.__getitem__, hosts))
        as_ports = {
            k: [p if ":" in p else f"{s.name}:{p}" for p in given]
            for k, given in dict(zip(map(id, lists), lists, strict=True)).items()
        }
        if any(p not in own for ports in as_ports.values() for p in ports):
            return None
        table[s.name] = dict(zip(hosts, map(as_ports.__getitem__, map(id, lists)), strict=True))
    return table


ROUTE_COUNT_BITS = 10
"""A route cell holds its next hops' offset into `RouteRows.hops` above this many bits, their
count below."""


OWN_MAX = 8
"""A host keeps at most this many routes of its own (`RouteRows.own`); past that, its row."""


@dataclass(frozen=True, eq=False)
class RouteRows:
    """A forwarding table as the core takes it (sim_set_route_rows): hosts every node routes
    alike share a row, so the table grows with nodes x leaves, not nodes x hosts; and each
    distinct list of next hops is held once. A route that only one host has at a node (a
    leaf's port to its server) is the host's own: its row's cell there is -1 and the (node,
    cell) pair is among `own[2 * own_start[h]: 2 * own_start[h + 1]]`, so that a leaf's
    servers still share their row. Node i's next hops toward host h are `cell(i, h)`: its
    count (the low `ROUTE_COUNT_BITS` bits) port indices from `hops[cell >> ROUTE_COUNT_BITS]`."""

    n_dest: int
    dest: npt.NDArray[np.int32]
    cells: npt.NDArray[np.int32]
    hops: npt.NDArray[np.int32]
    own_start: npt.NDArray[np.int32]
    own: npt.NDArray[np.int32]

    def cell(self, node: int, host: int) -> int:
        """Node `node`'s route cell toward host `host` (as the core reads it)."""
        cell = int(self.cells[node * self.n_dest + self.dest[host]])
        pairs = self.own[2 * self.own_start[host] : 2 * self.own_start[host + 1]].reshape(-1, 2)
        return cell if cell >= 0 else int(pairs[pairs[:, 0] == node, 1][0])


def unique_rows(a: npt.NDArray[np.int32]) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.intp]]:
    """`np.unique(a, axis=0, return_inverse=True)`: the distinct rows in lexicographic order
    and each row's index among them, each row hashed once (`np.unique` sorted every row,
    0.4 s of a 1,024-server run's routes, where a few hundred of 10,000 are distinct).

    >>> rows, inverse = unique_rows(np.array([[2, 1], [0, 5], [2, 1], [-1, 9]], np.int32))
    >>> rows.tolist(), inverse.tolist()
    ([[-1, 9], [0, 5], [2, 1]], [2, 1, 2, 0])
    """
    a = np.ascontiguousarray(a)
    if not a.size:
        columns, inverse = np.unique(a, axis=0, return_inverse=True)
        return columns, inverse.reshape(-1)
    index: dict[bytes, int] = {}
    firsts: list[int] = []
    ids = np.empty(len(a), np.intp)
    for i, row in enumerate(a):
        k = index.setdefault(row.tobytes(), len(firsts))
        if k == len(firsts):
            firsts.append(i)
        ids[i] = k
    rows = a[firsts]
    order = np.lexsort(rows.T[::-1])  # the first column the primary key
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return rows[order], rank[ids]


def route_rows(
    table: Mapping[str, Mapping[str, Sequence[str]]],
    nodes: Sequence[str],
    hosts: Sequence[str],
    port_index: Mapping[str, int],
) -> RouteRows:
    """`table` (node -> host -> egress ports `node:port`) as rows shared by alike hosts, each
    distinct list of ports once (what a hop reads stays small: a spine's uplinks toward every
    remote host are one list, not one per host)."""
    routed = [i for i, node in enumerate(nodes) if table.get(node)]
    if len(hosts) < 2:  # a lone host's route is its own at every node, a row without one too
        routed = list(range(len(nodes)))
    ids = np.zeros((len(routed), len(hosts)), np.int32)  # the routed nodes' rows: others hold ()
    known: dict[tuple[str, ...], int] = {(): 0}
    empty: Sequence[str] = ()
    for r, i in enumerate(routed):
        row = table.get(nodes[i], {})
        lists = list(map(row.get, hosts, repeat(empty)))  # held: their ids stay theirs
        firsts = dict(zip(map(id, lists), lists, strict=True))  # alike hosts share one list
        index = {k: known.setdefault(tuple(ports), len(known)) for k, ports in firsts.items()}
        ids[r] = list(map(index.__getitem__, map(id, lists)))
    lengths = np.array([len(key) for key in known], np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    if lengths.max() >> ROUTE_COUNT_BITS or offsets[-1] >> (31 - ROUTE_COUNT_BITS):
        raise RoutingError(
            f"{lengths.max()} next hops in a route, {offsets[-1]} in all: the core's route"
            f" cells hold up to {(1 << ROUTE_COUNT_BITS) - 1} and {1 << (31 - ROUTE_COUNT_BITS)}"
        )
    cell_of = (offsets << ROUTE_COUNT_BITS | lengths).astype(np.int32)
    own = _own(ids)
    shared = np.where(own, -1, ids)
    columns, dest = unique_rows(shared.T)
    # node-major: node i's cell for each destination class, -1 where it is each host's own
    cells = np.zeros((len(nodes), len(columns)), np.int32)  # cell 0: no next hop
    cells[routed] = np.where(columns.T == -1, -1, cell_of[columns.T])
    host_of, row_of = np.nonzero(own.T)  # by host, then node
    node_of = np.array(routed, np.int64)[row_of]
    pairs = np.stack([node_of, cell_of[ids[row_of, host_of]]], axis=1)
    own_start = np.concatenate([[0], np.cumsum(own.sum(axis=0))])
    hops = [port_index[p] for key in known for p in key]
    return RouteRows(
        len(columns),
        dest.reshape(-1).astype(np.int32),
        cells.reshape(-1),
        np.array(hops, np.int32),
        own_start.astype(np.int32),
        pairs.reshape(-1).astype(np.int32),
    )


def _own(ids: npt.NDArray[np.int32]) -> npt.NDArray[np.bool_]:
    """Per (node, host): the route is the host's own, the only one of its node's row with that
    list of next hops (for hosts with at most `OWN_MAX` of them)."""
    order = np.argsort(ids, axis=1, kind="stable")
    ranked = np.take_along_axis(ids, order, axis=1)
    alone = np.ones(ranked.shape, bool)
    same = ranked[:, 1:] == ranked[:, :-1]
    alone[:, 1:] &= ~same
    alone[:, :-1] &= ~same
    own = np.zeros(ids.shape, bool)
    np.put_along_axis(own, order, alone, axis=1)
    own[:, own.sum(axis=0) > OWN_MAX] = False
    return own
