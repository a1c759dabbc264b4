"""Design: from a resolved intent to a graph of nodes, ports, links and addresses.

Naming: switches are `superspineN`, `spineN`, `leafN` (numbered across pods), servers
`<prefix>N` (N padded with zeros to `servers.name_width` digits when it is set: `gpu01`). A
leaf's ports are allocated in order: server ports, MLAG peer-link ports, then uplinks (spine
by spine); a spine's: downlinks (leaf by leaf), then super-spine uplinks. SONiC names a port
after its first lane (`Ethernet0`, `Ethernet8`, ... at 8 lanes per 400G port).

The graph is a networkx MultiGraph; every edge is one physical link with its ports, speed,
cable length, the PortChannel each side bundles it into, and its /31 when it is routed.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import yaml

from twin.design.addressing import Pool, subnet_for
from twin.design.sizing import Sizing, capacity, pod_capacity, rails_of, size
from twin.errors import DesignError
from twin.intent.fabric import Fabric
from twin.units import speed_label

PLATFORM = Path(__file__).parent.parent / "platforms" / "sonic.yml"
PEER_LINK_NUMBER = 100
PEER_LINK_BUNDLE = f"PortChannel{PEER_LINK_NUMBER}"
SERVER_BUNDLE_BASE = PEER_LINK_NUMBER + 1
SERVER_VLAN_BASE = 1000
SERVER_VLANS = 3000
"""Server VLAN IDs are 1001..4000 (a VLAN is local to its leaf or pair, so they repeat)."""
MAX_ASN = 4294967294


@functools.cache
def platform() -> dict[str, Any]:
    """SONiC platform facts (lanes per speed, ASIC buffer figures)."""
    data: dict[str, Any] = yaml.load(PLATFORM.read_text(), Loader=yaml.CSafeLoader)
    return data


def port_name(index: int, speed: int) -> str:
    """SONiC name of the `index`-th front-panel port at `speed` Mb/s.

    >>> port_name(0, 400000), port_name(3, 400000), port_name(3, 100000)
    ('Ethernet0', 'Ethernet24', 'Ethernet12')
    """
    return f"Ethernet{index * platform()['lanes_per_speed'][speed]}"


def uplink_bundle(spine: int, server_ports: int) -> str:
    """A leaf's PortChannel to the `spine`-th spine of its pod (0-based).

    Spines 1..99 get PortChannel1..99; PortChannel100 is the MLAG peer-link and the next
    `server_ports` numbers are server bundles, so spines beyond the 99th come after those.

    >>> uplink_bundle(0, 13), uplink_bundle(98, 13), uplink_bundle(99, 13)
    ('PortChannel1', 'PortChannel99', 'PortChannel114')
    """
    number = spine + 1
    if number >= PEER_LINK_NUMBER:
        number += 1 + server_ports
    return f"PortChannel{number}"


@dataclass
class _Ports:
    """Hands out a switch's ports in order."""

    speed: int
    used: int = 0

    def take(self) -> tuple[str, int]:
        index = self.used
        self.used += 1
        return port_name(index, self.speed), index


@dataclass(frozen=True)
class Port:
    """One end of a physical link, seen from its node."""

    name: str
    index: int
    speed: int
    cable_m: int
    kind: str
    peer: str
    peer_port: str
    bundle: str | None
    ip: str | None
    peer_ip: str | None


def ports_of(graph: nx.MultiGraph, node: str) -> list[Port]:
    """The node's connected ports, in port order."""
    ports = []
    for *_, e in graph.edges(node, data=True):
        mine, theirs = ("a", "b") if e["a"] == node else ("b", "a")
        ports.append(
            Port(
                e[f"{mine}_port"],
                e[f"{mine}_index"],
                e["speed"],
                e["cable_m"],
                e["kind"],
                e[theirs],
                e[f"{theirs}_port"],
                e[f"{mine}_bundle"],
                e[f"{mine}_ip"],
                e[f"{theirs}_ip"],
            )
        )
    return sorted(ports, key=lambda p: p.index)


def uplink_width(graph: nx.MultiGraph, leaf: str) -> int:
    """The ECMP width a leaf reaches remote leaves with: one routed bundle per switch above it.

    >>> g = nx.MultiGraph()
    >>> g.add_nodes_from([("leaf1", {"role": "leaf"}), ("s1", {"role": "spine"}),
    ...                   ("s2", {"role": "spine"}), ("l2", {"role": "leaf"})])
    >>> _ = g.add_edges_from([("leaf1", "s1"), ("leaf1", "s1"), ("leaf1", "s2"), ("leaf1", "l2")])
    >>> uplink_width(g, "leaf1")
    2
    """
    return len({p for p in graph.neighbors(leaf) if graph.nodes[p]["role"] == "spine"})


def remote_subnets(graph: nx.MultiGraph, leaf: str) -> list[str]:
    """The server subnets of every other leaf (not the leaf's own, shared with its MLAG peer)."""
    mine = graph.nodes[leaf]["subnet"]
    leaves = [n for n, role in graph.nodes(data="role") if role == "leaf"]
    return sorted({graph.nodes[n]["subnet"] for n in leaves} - {mine})


def short_paths(graph: nx.MultiGraph, leaf: str, widths: Mapping[str, int]) -> list[str]:
    """Each remote server subnet `leaf` does not reach over its full uplink width, given the
    paths it holds per prefix (`widths`): what a converged fabric has, by its design.

    >>> g = nx.MultiGraph()
    >>> g.add_nodes_from([("l1", {"role": "leaf", "subnet": "10.2.0.0/27"}),
    ...                   ("l2", {"role": "leaf", "subnet": "10.2.0.32/27"}),
    ...                   ("s1", {"role": "spine"}), ("s2", {"role": "spine"})])
    >>> _ = g.add_edges_from([("l1", "s1"), ("l1", "s2"), ("l2", "s1"), ("l2", "s2")])
    >>> short_paths(g, "l1", {"10.2.0.32/27": 1})
    ['l1: 10.2.0.32/27 has 1/2 paths']
    """
    width = uplink_width(graph, leaf)
    return [
        f"{leaf}: {subnet} has {widths.get(subnet, 0)}/{width} paths"
        for subnet in remote_subnets(graph, leaf)
        if widths.get(subnet, 0) != width
    ]


def l3_interfaces(ports: list[Port]) -> dict[str, tuple[str, list[Port]]]:
    """Routed interfaces (port or PortChannel) -> (address, member ports)."""
    l3: dict[str, tuple[str, list[Port]]] = {}
    for port in ports:
        if port.ip is None or port.kind == "peerlink":
            continue
        name = port.bundle or port.name
        l3.setdefault(name, (port.ip, []))[1].append(port)
    return l3


@dataclass(frozen=True)
class Layout:
    """What a design keeps from an earlier lab's (`twin.design.grow`): its sizing, each
    rack's servers in slot order (a slot past the rack's server ports takes a port after the
    leaf's uplinks), and each switch's system MAC number."""

    sizing: Sizing
    racks: list[list[str]]
    numbers: dict[str, int]


@dataclass
class Design:
    """A designed fabric: the intent, its sizing and the graph (and the MAC numbers kept
    from the lab it grew from, if any)."""

    fabric: Fabric
    sizing: Sizing
    graph: nx.MultiGraph
    numbers: dict[str, int] = field(default_factory=dict)

    def nodes(self, role: str) -> list[str]:
        """Names of the nodes with this role, in order."""
        return [n for n, d in self.graph.nodes(data=True) if d["role"] == role]

    def switches(self) -> list[str]:
        """Every switch, super-spines first."""
        return self.nodes("superspine") + self.nodes("spine") + self.nodes("leaf")

    def number(self, switch: str) -> int:
        """The switch's system MAC number: kept from the lab this design grew from, else its
        place in `switches()`."""
        if switch in self.numbers:
            return self.numbers[switch]
        return self._places[switch]

    @functools.cached_property
    def _places(self) -> dict[str, int]:
        """Each switch's place in `switches()`, found once (a design's graph is not changed
        once it is made: `design`)."""
        return {s: i for i, s in enumerate(self.switches())}


class _Builder:
    def __init__(
        self, fabric: Fabric, sizing: Sizing, file: str, racks: list[list[str]] | None
    ) -> None:
        self.f, self.s, self.racks = fabric, sizing, racks
        self.later: list[tuple[str, str, str, int, int]] = []
        self.g: nx.MultiGraph = nx.MultiGraph(name=fabric.name)
        self.ports: dict[str, _Ports] = {}
        addr = fabric.addressing
        self.loopbacks = Pool(addr.loopbacks, "loopbacks", file)
        self.fabric_links = Pool(addr.fabric, "fabric", file)
        self.servers = Pool(addr.servers, "servers", file)
        self.peer_links = Pool(addr.peer_links, "peer_links", file)
        self.max_leaves, self.max_pods = capacity(fabric, sizing)

    def switch(self, name: str, role: str, pod: int, asn: int, speed: int, position: int) -> None:
        """A switch whose loopback is the `position`-th of the loopback pool."""
        loopback = self.loopbacks.host(position)
        self.g.add_node(
            name, role=role, pod=pod, asn=asn, loopback=f"{loopback}/32", router_id=str(loopback)
        )
        self.ports[name] = _Ports(speed)

    def link(
        self, kind: str, a: str, b: str, count: int, speed: int, cable: int, **extra: Any
    ) -> None:
        """`count` parallel links a-b, bundled when more than one, routed with one /31 (the
        `pair`-th of the fabric pool, or of the peer-link pool for a peer-link)."""
        pool = self.peer_links if kind == "peerlink" else self.fabric_links
        low, high, prefix = pool.pair(extra.pop("pair"))
        bundles = extra.pop("bundles", (None, None))
        for _ in range(count):
            (a_port, a_index), (b_port, b_index) = self.ports[a].take(), self.ports[b].take()
            self.g.add_edge(
                a,
                b,
                kind=kind,
                a=a,
                a_port=a_port,
                a_index=a_index,
                b=b,
                b_port=b_port,
                b_index=b_index,
                speed=speed,
                cable_m=cable,
                a_bundle=bundles[0] if count > 1 else None,
                b_bundle=bundles[1] if count > 1 else None,
                a_ip=low,
                b_ip=high,
                prefix=prefix,
            )

    def build(self) -> nx.MultiGraph:
        """Switches with loopbacks in blocks per role (super-spines, then the spines of as many
        pods as the super-spines take, then leaves), servers, then the fabric's links."""
        f, s = self.f, self.s
        for i in range(s.superspines):
            self.switch(
                f"superspine{i + 1}", "superspine", 0, f.asn.superspine, f.superspines.speed, i
            )
        for p in range(s.pods):
            for j in range(s.spines_per_pod):
                asn = f.asn.spine + p if s.pods > 1 else f.asn.spine
                n = p * s.spines_per_pod + j
                self.switch(f"spine{n + 1}", "spine", p, asn, f.spines.speed, s.superspines + n)
        first_leaf = s.superspines + self.max_pods * s.spines_per_pod
        for i in range(s.leaves):
            self.switch(
                f"leaf{i + 1}",
                "leaf",
                i // s.leaves_per_pod,
                f.asn.leaf_base + i + 1,
                f.leaves.speed,
                first_leaf + i,
            )
        self.attach_servers()
        self.wire_fabric()
        for args in self.later:  # servers past a rack's server ports, after the uplinks
            self.server_link(*args)
        return self.g

    def units(self, count: int) -> list[list[str]]:
        """Each rack's servers: the layout's, or by number filling racks of
        `servers.per_rack` in order (the last racks may hold fewer, or none), or without it
        spread evenly over the racks (the first ones one more)."""
        if self.racks is not None:
            return self.racks
        f, per_rack = self.f, self.s.server_ports_per_leaf
        width, prefix, total = f.servers.name_width, f.servers.name_prefix, f.servers.count
        even = f.servers.per_rack is None
        sizes = [total // count + (u < total % count) for u in range(count)] if even else []
        out: list[list[str]] = []
        first = 1
        for unit in range(count):
            size = sizes[unit] if even else max(0, min(per_rack, total - unit * per_rack))
            out.append([f"{prefix}{n:0{width}d}" for n in range(first, first + size)])
            first += size
        return out

    def members(self, groups: int) -> list[list[tuple[str, dict[str, Any]]]]:
        """Each leaf group's server endpoints (name, attributes), in group order, from the
        racks' servers (`units`); on rails, group u x rails + k holds NIC k of each server of
        scalable unit u, an endpoint named `<server>r<k>`."""
        f, rails = self.f, rails_of(self.f)
        out: list[list[tuple[str, dict[str, Any]]]] = []
        for servers in self.units(groups // rails):
            if not f.servers.rails:
                out.append([(s, {}) for s in servers])
                continue
            out += [[(f"{s}r{k}", {"server": s, "rail": k}) for s in servers] for k in range(rails)]
        return out

    def subnets(self, groups: int, prefixlen: int) -> list[ipaddress.IPv4Network]:
        """Each leaf group's server subnet, by its position; on rails rail by rail, so that
        each rail's subnets follow one another in a block sized for the most units the
        fabric can grow to (rail k's block comes before rail k + 1's)."""
        rails = rails_of(self.f)
        per_unit = rails * (2 if self.f.servers.dual_homed else 1)
        block = max(groups // rails, self.max_leaves // per_unit)
        return [
            self.servers.subnet(g % rails * block + g // rails, prefixlen) for g in range(groups)
        ]

    @staticmethod
    def nic_names(rail: int | None, ports: int) -> list[str]:
        """A server endpoint's ports: `nic0`, `nic1`; on rail k, NIC k's port `nick` (its
        two ports `nickp0`, `nickp1` to a leaf pair).

        >>> _Builder.nic_names(None, 2), _Builder.nic_names(3, 1), _Builder.nic_names(3, 2)
        (['nic0', 'nic1'], ['nic3'], ['nic3p0', 'nic3p1'])
        """
        if rail is None:
            return [f"nic{i}" for i in range(ports)]
        return [f"nic{rail}"] if ports == 1 else [f"nic{rail}p{i}" for i in range(ports)]

    def attach_servers(self) -> None:
        f, s = self.f, self.s
        per_group = 2 if f.servers.dual_homed else 1
        groups = s.leaves // per_group
        members, rails = self.members(groups), rails_of(f)
        prefixlen = subnet_for(s.server_ports_per_leaf + per_group)
        subnets = self.subnets(groups, prefixlen)
        for group in range(groups):
            leaves = [f"leaf{group * per_group + k + 1}" for k in range(per_group)]
            subnet = subnets[group]
            hosts = iter(subnet.hosts())
            rail = {"rail": group % rails, "unit": group // rails} if f.servers.rails else {}
            for k, leaf in enumerate(leaves):
                self.g.nodes[leaf].update(
                    group=group,
                    vlan=SERVER_VLAN_BASE + group % SERVER_VLANS + 1,
                    subnet=str(subnet),
                    svi=f"{next(hosts)}/{prefixlen}",
                    mlag_peer=leaves[1 - k] if per_group == 2 else None,
                    **rail,
                )
            for slot, (server, extra) in enumerate(members[group]):
                self.g.add_node(
                    server,
                    role="server",
                    group=group,
                    address=f"{next(hosts)}/{prefixlen}",
                    leaves=leaves,
                    **extra,
                )
                nics = self.nic_names(extra.get("rail"), per_group)
                for nic, leaf in enumerate(leaves):
                    link = (leaf, server, nics[nic], nic, slot)
                    if slot < s.server_ports_per_leaf:
                        self.server_link(*link)
                    else:
                        self.later.append(link)
        # Ports left free for servers the leaf could still take stay unallocated.
        for leaf in self.nodes("leaf"):
            self.ports[leaf].used = s.server_ports_per_leaf
        if per_group == 2:
            for group in range(groups):
                a, b = f"leaf{2 * group + 1}", f"leaf{2 * group + 2}"
                self.link(
                    "peerlink",
                    a,
                    b,
                    s.peer_link_ports,
                    f.leaves.speed,
                    f.cables.peer_link,
                    pair=group,
                    bundles=(PEER_LINK_BUNDLE, PEER_LINK_BUNDLE),
                )

    def server_link(self, leaf: str, server: str, nic_port: str, nic: int, slot: int) -> None:
        """The link from the leaf's next port to a server's NIC, in the slot's bundle when
        dual-homed."""
        f = self.f
        port, index = self.ports[leaf].take()
        dual = f.servers.dual_homed
        self.g.add_edge(
            leaf,
            server,
            kind="server",
            a=leaf,
            a_port=port,
            a_index=index,
            b=server,
            b_port=nic_port,
            b_index=nic,
            speed=f.servers.nic_speed,
            cable_m=f.cables.server,
            a_bundle=f"PortChannel{SERVER_BUNDLE_BASE + slot}" if dual else None,
            b_bundle="bond0" if dual else None,
            a_ip=None,
            b_ip=None,
            prefix=None,
        )

    def nodes(self, role: str) -> list[str]:
        return [n for n, d in self.g.nodes(data=True) if d["role"] == role]

    def wire_fabric(self) -> None:
        """Leaf-spine links and /31s by the leaf's number (a spine's downlinks in the order of
        its pod's leaves), spine-super-spine /31s from the fabric pool's end, and a spine's
        uplinks after the downlink ports of a full pod: growth only appends."""
        f, s = self.f, self.s
        spines = self.nodes("spine")
        for number, leaf in enumerate(self.nodes("leaf")):
            pod = self.g.nodes[leaf]["pod"]
            position = number - pod * s.leaves_per_pod
            for j in range(s.spines_per_pod):
                spine = spines[pod * s.spines_per_pod + j]
                self.link(
                    "fabric",
                    leaf,
                    spine,
                    s.uplinks_per_spine,
                    f.uplink_speed,
                    f.cables.leaf_spine,
                    pair=number * s.spines_per_pod + j,
                    bundles=(
                        uplink_bundle(j, s.server_ports_per_leaf),
                        f"PortChannel{position + 1}",
                    ),
                )
        supers = self.nodes("superspine")
        for n, spine in enumerate(spines):
            self.ports[spine].used = pod_capacity(f, s.uplinks_per_spine) * s.uplinks_per_spine
            for t, sup in enumerate(supers):
                self.link(
                    "superfabric",
                    spine,
                    sup,
                    1,
                    f.superspines.speed,
                    f.cables.spine_superspine,
                    pair=-1 - n * len(supers) - t,
                )


def _check_speeds(fabric: Fabric, file: str) -> None:
    """Every speed must be one the platform has ports (lanes, pause quanta) for."""
    known = platform()["lanes_per_speed"]
    speeds = {
        "leaves.speed": fabric.leaves.speed,
        "leaves.uplink_speed": fabric.uplink_speed,
        "spines.speed": fabric.spines.speed,
        "superspines.speed": fabric.superspines.speed,
        "servers.nic_speed": fabric.servers.nic_speed,
    }
    for key, speed in speeds.items():
        if speed not in known:
            choices = ", ".join(speed_label(s) for s in sorted(known))
            raise DesignError(file, key, f"{speed} Mb/s is not a port speed ({choices})")


def _span(numbers: range) -> str:
    return f"{numbers[0]}..{numbers[-1]}" if len(numbers) > 1 else str(numbers[0])


def _check_asns(fabric: Fabric, sizing: Sizing, file: str) -> None:
    """Leaf, spine and super-spine AS numbers must fit in 32 bits and never be shared."""
    asn = fabric.asn
    spines = range(asn.spine, asn.spine + (sizing.pods if sizing.pods > 1 else 1))
    leaves = range(asn.leaf_base + 1, asn.leaf_base + sizing.leaves + 1)
    if leaves[-1] > MAX_ASN:
        raise DesignError(
            file,
            "asn.leaf_base",
            f"{sizing.leaves} leaves need AS numbers up to {leaves[-1]}, above {MAX_ASN}",
        )
    if spines[-1] > MAX_ASN:
        raise DesignError(
            file, "asn.spine", f"{sizing.pods} pods need AS numbers up to {spines[-1]}"
        )
    if spines.start < leaves.stop and leaves.start < spines.stop:
        raise DesignError(
            file,
            "asn.leaf_base",
            f"leaf AS numbers {_span(leaves)} overlap the spines' {_span(spines)}",
        )
    if sizing.superspines and (asn.superspine in leaves or asn.superspine in spines):
        raise DesignError(
            file, "asn.superspine", f"{asn.superspine} is also a leaf or spine AS number"
        )


def design(fabric: Fabric, file: str = "fabric.yaml", layout: Layout | None = None) -> Design:
    """Size the fabric (or take the `layout`'s sizing and racks), allocate ports and
    addresses, and build the graph."""
    _check_speeds(fabric, file)
    sizing = size(fabric, file) if layout is None else layout.sizing
    _check_asns(fabric, sizing, file)
    racks = None if layout is None else layout.racks
    graph = _Builder(fabric, sizing, file, racks).build()
    return Design(fabric, sizing, graph, {} if layout is None else layout.numbers)


def figures(d: Design) -> dict[str, Any]:
    """The design's headline figures (what `twin show` prints first)."""
    g, s, f = d.graph, d.sizing, d.fabric
    up_bw = s.uplinks * f.uplink_speed
    ratios, usable = [], []
    for leaf in d.nodes("leaf"):
        down_bw = sum(e["speed"] for *_, e in g.edges(leaf, data=True) if e["kind"] == "server")
        ratios.append(down_bw / up_bw)
        usable.append(min(down_bw, up_bw))
    bisection = sum(usable) / 2
    if s.pods > 1:
        pod_up = s.spines_per_pod * s.superspines * f.superspines.speed
        per_pod = [
            sum(usable[p * s.leaves_per_pod : (p + 1) * s.leaves_per_pod]) for p in range(s.pods)
        ]
        bisection = sum(min(u, pod_up) for u in per_pod) / 2
    per_unit = rails_of(f) * (2 if f.servers.dual_homed else 1)
    rails = (
        {"rails": rails_of(f), "scalable_units": s.leaves // per_unit} if f.servers.rails else {}
    )
    return {
        "servers": f.servers.count,
        "gpus": f.servers.count * f.servers.gpus,
        "server_ports": f.servers.count * f.servers.nics,
        "leaves": s.leaves,
        "spines": s.spines,
        "pods": s.pods,
        "superspines": s.superspines,
        "tiers": 3 if s.pods > 1 or s.superspines else 2,
        "uplinks_per_leaf": s.uplinks,
        "links_per_spine": s.uplinks_per_spine,
        "oversubscription_max": round(max(ratios), 3),
        "bisection_gbps": round(bisection / 1000, 1),
        "ecmp_width": s.spines_per_pod,
        **rails,
    }
