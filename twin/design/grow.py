"""Growing a lab (`twin generate FABRIC -o NEW --grow-from OLD`): a design that keeps every
assignment OLD's design.json records and places only what is new (docs/design.md, "Growing
a lab").

Every existing server keeps its rack, slot, leaf ports, bundle and address; every switch its
name, AS number, loopback, MAC number, ports and links. New servers take the free server
ports of the existing racks first, in rack order, then new racks of the lab's rack size, then
(when `leaves.count` allows no more racks) ports after the uplinks of the first leaves that
still have one, an address in their subnet and room within `oversubscription.max`. What
cannot be kept is refused in one line, naming the intent's key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

import networkx as nx

from twin.design.addressing import subnet_for
from twin.design.graph import (
    PEER_LINK_NUMBER,
    Design,
    Layout,
    design,
)
from twin.design.sizing import Sizing, rails_of, tiers
from twin.errors import DesignError, InputError
from twin.intent.fabric import Fabric
from twin.units import speed_label

FIXED = {
    "a port's speed or count renames or renumbers ports": (
        "leaves.ports",
        "leaves.speed",
        "leaves.uplink_speed",
        "leaves.peer_link_ports",
        "spines.ports",
        "spines.speed",
        "superspines.ports",
        "superspines.speed",
        "servers.nic_speed",
    ),
    "it recables every server": ("servers.nics", "servers.dual_homed", "servers.rails"),
    "it renames the servers": ("servers.name_prefix", "servers.name_width"),
    "it moves addresses": (
        "addressing.loopbacks",
        "addressing.fabric",
        "addressing.servers",
        "addressing.peer_links",
    ),
    "it moves AS numbers": ("asn.superspine", "asn.spine", "asn.leaf_base"),
}
"""Intent keys a grown lab must keep as its lab has them, and why."""
PINNED = {
    "spines.count": "a spine more or fewer renumbers every leaf's uplinks and /31s",
    "leaves.uplinks_per_spine": "it renumbers every spine's downlinks",
    "servers.per_rack": "it moves the servers of every rack after the first",
    "superspines.count": "it recables every spine",
}
"""Counts the lab's sizing fixes (a grown lab keeps them when the intent leaves them unset)."""
SPEEDS = {k for keys in FIXED.values() for k in keys if k.endswith("speed")}
ROLES = ("superspine", "spine", "leaf", "server")


@dataclass(frozen=True)
class Record:
    """What a lab directory's design.json records: its sizing, graph and switch MAC numbers
    (and the lab's resolved intent)."""

    lab: str
    fabric: Fabric
    sizing: Sizing
    graph: nx.MultiGraph
    numbers: dict[str, int]

    def racks(self) -> list[list[str]]:
        """Each rack's (leaf group's, or scalable unit's) servers, in slot order."""
        rails = rails_of(self.fabric)
        racks: list[list[str]] = [[] for _ in range(self.sizing.leaves // _per_unit(self.fabric))]
        for node, attrs in self.graph.nodes(data=True):
            if attrs["role"] != "server":
                continue
            rack, server = racks[attrs["group"] // rails], attrs.get("server", node)
            if server not in rack:
                rack.append(server)
        return racks


def record(data: Any, fabric: Fabric, lab: str) -> Record:
    """The record of the design.json of the lab directory `lab` (`data`), or one line on
    what in it is not a design."""
    file = f"{lab}/design.json"
    if not isinstance(data, dict):
        raise InputError(file, "", "not a design (a JSON object with sizing and graph)")
    sizing = data.get("sizing")
    names = [f.name for f in fields(Sizing)]
    if not isinstance(sizing, dict) or sorted(sizing) != sorted(names):
        raise InputError(file, "sizing", f"must hold {', '.join(names)}")
    if not all(type(sizing[n]) is int and sizing[n] >= 0 for n in names):
        raise InputError(file, "sizing", "must be whole numbers")
    groups = range(sizing["leaves"] // (2 if fabric.servers.dual_homed else 1))
    try:
        graph: nx.MultiGraph = nx.node_link_graph(data["graph"], edges="links", multigraph=True)
    except (KeyError, TypeError, ValueError, AttributeError, nx.NetworkXError):
        raise InputError(file, "graph", "not a design graph (node-link JSON)") from None
    for node, attrs in graph.nodes(data=True):
        role = attrs.get("role")
        if role not in ROLES or (role == "server" and attrs.get("group") not in groups):
            raise InputError(file, f"graph.nodes.{node}", "not a server of a rack nor a switch")
    grown = data.get("grown", {})
    numbers = grown.get("mac_numbers") if isinstance(grown, dict) else None
    if numbers is None:
        switches = [n for n, r in graph.nodes(data="role") if r != "server"]
        numbers = {s: i for i, s in enumerate(sorted(switches, key=_switch_order(graph)))}
    if not isinstance(numbers, dict) or not all(
        type(v) is int and 0 <= v < 2**24 - 1 for v in numbers.values()
    ):
        raise InputError(file, "grown.mac_numbers", "must map switches to numbers")
    return Record(lab, fabric, Sizing(**sizing), graph, numbers)


def _switch_order(graph: nx.MultiGraph) -> Any:
    """Switches as `Design.switches` lists them: super-spines, spines, leaves, each in order."""
    order = {n: i for i, n in enumerate(graph.nodes)}
    return lambda n: (ROLES.index(graph.nodes[n]["role"]), order[n])


def _per_unit(fabric: Fabric) -> int:
    """Leaves per rack: a leaf group (a pair when dual-homed) per rail."""
    return rails_of(fabric) * (2 if fabric.servers.dual_homed else 1)


def _value(fabric: Fabric, key: str) -> Any:
    part, name = key.split(".")
    return getattr(getattr(fabric, part), name)


def _check_intent(fabric: Fabric, file: str, old: Record) -> None:
    """Refuse an intent key whose change would move what the lab has."""
    was = old.fabric
    for why, keys in FIXED.items():
        for key in keys:
            new, had = _value(fabric, key), _value(was, key)
            if new != had:
                shown = (speed_label(new), speed_label(had)) if key in SPEEDS else (new, had)
                raise DesignError(file, key, f"{shown[0]} here, {shown[1]} in {old.lab}: {why}")
    s = old.sizing
    pinned = (s.spines_per_pod, s.uplinks_per_spine, s.server_ports_per_leaf, s.superspines)
    for (key, why), had in zip(PINNED.items(), pinned, strict=True):
        new = _value(fabric, key)
        if new is not None and new != had:
            raise DesignError(file, key, f"{new} here, {had} in {old.lab}: {why}")
    count, servers = fabric.leaves.count, sum(map(len, old.racks()))
    per_unit = _per_unit(fabric)
    if count is not None and count % per_unit:
        raise DesignError(file, "leaves.count", f"{count}: not whole racks of {per_unit} leaves")
    if count is not None and count < s.leaves:
        raise DesignError(
            file, "leaves.count", f"{count}, fewer than the {s.leaves} leaves of {old.lab}"
        )
    if fabric.servers.count < servers:
        raise DesignError(
            file,
            "servers.count",
            f"{fabric.servers.count}, fewer than the {servers} servers of {old.lab}",
        )


def _most(fabric: Fabric, s: Sizing) -> int:
    """The most servers a rack of the lab takes, past its server ports too: the leaf's free
    ports after its uplinks, its subnet's addresses and `oversubscription.max` allowing."""
    per_group = 2 if fabric.servers.dual_homed else 1
    if s.spines_per_pod >= PEER_LINK_NUMBER - 1:  # uplink bundles follow the server bundles
        return s.server_ports_per_leaf
    ports = fabric.leaves.ports - s.peer_link_ports - s.uplinks
    addresses = (1 << 32 - subnet_for(s.server_ports_per_leaf + per_group)) - 2 - per_group
    up = s.uplinks * fabric.uplink_speed * fabric.oversubscription.max
    within = math.floor(up / fabric.servers.nic_speed + 1e-9)
    return max(s.server_ports_per_leaf, min(ports, addresses, within))


def _placed(fabric: Fabric, file: str, old: Record) -> list[list[str]]:
    """Each rack's servers: the lab's in their slots, new ones appended (module docstring)."""
    racks = [list(r) for r in old.racks()]
    known = {s for r in racks for s in r}
    f = fabric.servers
    pending = [
        name
        for name in (f"{f.name_prefix}{n:0{f.name_width}d}" for n in range(1, f.count + 1))
        if name not in known
    ][::-1]
    size = old.sizing.server_ports_per_leaf
    allowed = None if fabric.leaves.count is None else fabric.leaves.count // _per_unit(fabric)

    def fill(limit: int) -> None:
        for rack in racks:
            while pending and len(rack) < limit:
                rack.append(pending.pop())

    fill(size)
    while pending and (allowed is None or len(racks) < allowed):
        racks.append([pending.pop() for _ in range(min(size, len(pending)))])
    racks += [[] for _ in range(len(racks), allowed or 0)]
    fill(_most(fabric, old.sizing))
    if pending:
        raise DesignError(
            file,
            "servers.count",
            f"{f.count} servers do not fit the {len(racks)} racks of {old.lab} (the ports, "
            "addresses and oversubscription.max of their leaves): give more leaves",
        )
    return racks


def _numbers(d: Design, old: Record) -> dict[str, int]:
    """Each switch's MAC number: the lab's, and after the lab's highest for a new one."""
    numbers = dict(old.numbers)
    after = max(numbers.values(), default=-1) + 1
    for switch in d.switches():
        if switch not in numbers:
            numbers[switch], after = after, after + 1
    return numbers


def _check_kept(d: Design, old: Record) -> None:
    """Refuse the design unless every node and link of the lab is in it as it was."""
    for node, attrs in old.graph.nodes(data=True):
        now = d.graph.nodes[node] if node in d.graph else {}
        moved = sorted(k for k in attrs if now.get(k) != attrs[k])
        if moved:
            key = f"graph.nodes.{node}.{moved[0]}"
            raise DesignError(
                f"{old.lab}/design.json", key, f"{attrs[moved[0]]!r} would be {now.get(moved[0])!r}"
            )
    links = {_link(e) for *_, e in d.graph.edges(data=True)}
    for a, b, e in old.graph.edges(data=True):
        if _link(e) not in links:
            where = f"graph.links.{a}-{b}"
            raise DesignError(
                f"{old.lab}/design.json", where, f"{e.get('a_port')}-{e.get('b_port')} would move"
            )


def _link(e: dict[str, Any]) -> tuple[Any, ...]:
    """A link's allocation: everything but its cable length (`cables` may change)."""
    return tuple(sorted((k, repr(v)) for k, v in e.items() if k != "cable_m"))


def grown(fabric: Fabric, file: str, old: Record) -> Design:
    """The design of `fabric` keeping every assignment of the lab `old` records, or a
    `DesignError` naming what cannot be kept."""
    _check_intent(fabric, file, old)
    racks = _placed(fabric, file, old)
    s = old.sizing
    sizing = tiers(
        fabric,
        file,
        len(racks) * _per_unit(fabric),
        s.spines_per_pod,
        s.uplinks_per_spine,
        s.server_ports_per_leaf,
        s.peer_link_ports,
    )
    if s.pods == 1 and not s.superspines and (sizing.pods > 1 or sizing.superspines):
        raise DesignError(
            file,
            "spines.ports",
            f"{sizing.leaves} leaves need more than the {fabric.spines.ports} ports of "
            f"{old.lab}'s spines: a third tier moves every address",
        )
    d = design(fabric, file, Layout(sizing, racks, {}))
    d.numbers = _numbers(d, old)
    _check_kept(d, old)
    return d
