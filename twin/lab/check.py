"""Check every file of a lab directory before anything reads it for real.

`twin validate` and every deploy run `check` first: each file must parse (frr.conf as the
routing model reads it, `twin.model.frr`: a statement that could change routing and that the
model does not apply is refused), have the shape its readers expect, and agree with the
others (the ports a config names are in its PORT or PORTCHANNEL table or wired in
`ifmap.json`, as SONiC's YANG leafrefs want; a server's NICs are its own, next hops leave
through a NIC it has), the numbers the validators and the simulator read must be what
SONiC's YANG types them (a QoS map's queue or PG one a port has, buffer and WRED sizes whole
bytes, drop probabilities 0-100, PFC priority lists of 0-7), and the addresses must not
collide (no two servers with one address, no overlapping interface subnets on a switch, no
address on two nodes). The first problem is
raised as one `InputError` line naming the file, the key and what is wrong; nothing is
created before. A port or PortChannel that a config holds but that is not cabled (a
PortChannel without members, a member port taken out of its PortChannel) is one those models
accept: it is deployed and judged (`mlag_consistency`, the routing), not refused. Likewise a
host file that names its server (its address and NICs) is judged whatever its other keys
hold (`twin.configs.host`), unless a deploy is about to apply them to a kernel.
"""

from __future__ import annotations

import bisect
import functools
import ipaddress
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import networkx as nx
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from twin.errors import InputError, LabError
from twin.intent.inputs import CONFIG_BYTES, parse_model, read_json, read_text
from twin.lab.directory import Lab
from twin.model.frr import parse_frr
from twin.render.config_db import QOS_MAPS

NODE_NAME = re.compile(r"[a-z][a-z0-9]{0,31}")
"""A node of the design: it names namespaces (`<lab>.<node>`) and run directories."""
LINUX_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$"
"""A Linux interface name: at most 15 characters, never `/` or white space."""
ROLES = ("superspine", "spine", "leaf", "server")
LINK_KINDS = ("server", "peerlink", "fabric", "superfabric")
ADDRESS_TABLES = ("INTERFACE", "PORTCHANNEL_INTERFACE", "LOOPBACK_INTERFACE", "VLAN_INTERFACE")
PORT_QUEUES = 8
"""Queues and priority groups of a switch port, 0-7: the QUEUE and BUFFER_PG tables the
generator writes and the simulator's switches (labs/sim/model.py NPRIO). sonic-tc-queue-map.yang
lets a TC_TO_QUEUE_MAP value be 8 or 9 too (pattern [0-9]); no port of the twin has those
queues, so such a value is refused as one naming no queue, not judged."""
PORT_INDICES = {
    "TC_TO_QUEUE_MAP": "queue",
    "MAP_PFC_PRIORITY_TO_QUEUE": "queue",
    "TC_TO_PRIORITY_GROUP_MAP": "priority group",
    "PFC_PRIORITY_TO_PRIORITY_GROUP_MAP": "priority group",
}
"""The QoS maps whose values index a port's queues or priority groups."""
WHOLE = {
    "BUFFER_PROFILE": ("size", "xon", "xoff", "xon_offset", "static_th"),
    "WRED_PROFILE": tuple(
        f"{colour}_{end}_threshold"
        for colour in ("green", "yellow", "red")
        for end in ("min", "max")
    ),
}
"""Fields SONiC's YANG types as uint64 (sonic-buffer-profile.yang, sonic-wred-profile.yang)."""
PERCENT = {
    "WRED_PROFILE": ("green_drop_probability", "yellow_drop_probability", "red_drop_probability")
}
"""Fields SONiC's YANG types as 0..100 (sonic-wred-profile.yang)."""
PRIORITY_LISTS = re.compile(r"([0-7](,[0-7])*)?")
"""PORT_QOS_MAP `pfc_enable` and `pfcwd_sw_enable` (sonic-port-qos-map.yang's pattern)."""


def _ipv4(value: str) -> str:
    ipaddress.IPv4Address(value)
    return value


def _cidr(value: str) -> str:
    if "/" not in value:
        raise ValueError(f"{value!r} has no prefix length (ADDRESS/LENGTH)")
    ipaddress.IPv4Interface(value)
    return value


def _network(value: str) -> str:
    ipaddress.IPv4Network(value)
    return value


Ipv4 = Annotated[str, AfterValidator(_ipv4)]
Cidr = Annotated[str, AfterValidator(_cidr)]
Network = Annotated[str, AfterValidator(_network)]
LinuxName = Annotated[str, Field(pattern=LINUX_NAME)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Nic(_Model):
    """One NIC of a server and the leaf port it is cabled to."""

    name: LinuxName
    peer: str
    peer_port: str
    speed: int = Field(gt=0)
    gateway: Ipv4


class NextHop(_Model):
    """A gateway and the NIC towards it."""

    gateway: Ipv4
    dev: str


class HostRoute(_Model):
    """A route of a server."""

    dst: Network
    nexthops: list[NextHop] = Field(min_length=1)


class Marking(_Model):
    """DSCP marking of a traffic class by destination port."""

    traffic_class: str | None = Field(default=None, alias="class")
    """A label: the rule marks by its ports and DSCP alone."""
    dscp: int = Field(ge=0, le=63)
    ports: list[Annotated[int, Field(ge=1, le=65535)]]


class RdmaDevice(_Model):
    """A soft-RoCE device over a NIC."""

    name: LinuxName
    netdev: str


class Rdma(_Model):
    """RDMA settings of a server. A setting left out or that its key cannot hold is one the
    NIC never takes (its default is in force): judged (`host_rdma`, `pfc_consistency` hosts),
    not refused. The devices are what a deploy creates."""

    mode: Any = None
    traffic_class: Any = None
    dscp: Any = None
    pfc_priority: Any = None
    cnp_dscp: Any = None
    ecn: Any = None
    dcqcn: Any = None
    devices: list[RdmaDevice] = Field(default_factory=list)


class Bond(_Model):
    """How the NICs are bundled towards the leaf pair."""

    name: LinuxName
    mode: str
    members: list[str]


class Host(_Model):
    """`configs/<server>/host.json`."""

    hostname: str | None = None
    """Cosmetic: the node's name in the design is what names it."""
    mtu: int = Field(ge=68, le=65535)
    address: Cidr
    bond: Bond | None = None
    interfaces: list[Nic] = Field(min_length=1)
    routes: list[HostRoute]
    dscp_marking: list[Marking] = Field(default_factory=list)
    rdma: Rdma | None = None


class NicName(BaseModel):
    """A NIC as it names the server's port in the wiring; its other keys are judged."""

    model_config = ConfigDict(extra="allow", strict=True)
    name: LinuxName


class Identity(BaseModel):
    """What a host file must hold to describe its server: its address and its NICs by name.
    Everything else (MTU, routes, marking rules, RDMA settings, a NIC's peer and gateway) is
    judged against the intent when the file is not applied to a kernel (`check`)."""

    model_config = ConfigDict(extra="allow", strict=True)
    address: Cidr
    interfaces: list[NicName] = Field(min_length=1)


def _mapping(value: Any, file: str, key: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError(file, key, f"must be an object, not {type(value).__name__}")
    return value


def check(lab: Lab, live: bool = False, applied: bool | None = None) -> None:
    """Refuse the lab directory with one line at its first problem; `live` (a twin is about
    to run it) also refuses MTUs the kernel would not set, which the static validators
    would otherwise report as findings. `applied` (default: `live`; a deploy that sets the
    servers' kernels up, not the simulator's): a host file must hold every setting the deploy
    applies as `Host` says, else only what names its server (`Identity`). A lab that passed
    (as strictly, or more) keeps its pass while its files are unchanged (`Lab.stamp`): a
    command checks its lab once, and the verbs it hands the lab to do not read it all again."""
    hosts = live if applied is None else applied
    stamp = lab.stamp()
    if stamp is not None and any(
        was == stamp and was_live >= live and was_hosts >= hosts
        for (was_live, was_hosts), was in lab.checked.items()
    ):
        return
    graph = _design(lab)
    ifmap = _ifmap(lab, graph)
    addresses: dict[str, tuple[str, str]] = {}  # ip -> (file, key) of its first holder
    for node, data in graph.nodes(data=True):
        if data["role"] == "server":
            _host(lab, node, graph, ifmap, addresses, hosts)
        else:
            _frr_conf(lab, node)
            _config_db(lab, node, ifmap[node], addresses, live)
    if stamp is not None:
        lab.checked[live, hosts] = stamp


def _design(lab: Lab) -> nx.MultiGraph:
    path = lab.path / "design.json"
    file = str(path)
    data = _mapping(read_json(path), file, "")
    try:
        graph: nx.MultiGraph = nx.node_link_graph(data["graph"], edges="links", multigraph=True)
    except (KeyError, TypeError, ValueError, AttributeError, nx.NetworkXError):
        raise InputError(file, "graph", "not a design graph (node-link JSON)") from None
    for node, attrs in graph.nodes(data=True):
        if not isinstance(node, str) or NODE_NAME.fullmatch(node) is None:
            raise InputError(file, "graph.nodes", f"{node!r} is not a node name")
        if attrs.get("role") not in ROLES:
            raise InputError(file, f"graph.nodes.{node}.role", f"must be one of {ROLES}")
    for a, b, attrs in graph.edges(data=True):
        where = f"graph.links.{a}-{b}"
        for end in ("a", "b"):
            if attrs.get(end) not in (a, b) or not isinstance(attrs.get(f"{end}_port"), str):
                raise InputError(file, where, f"needs {end} and {end}_port")
        if attrs.get("kind") not in LINK_KINDS:
            raise InputError(file, f"{where}.kind", f"must be one of {LINK_KINDS}")
        for number in ("speed", "cable_m"):
            value = attrs.get(number)
            if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
                raise InputError(file, f"{where}.{number}", "must be a positive number")
    return graph


def _ifmap(lab: Lab, graph: nx.MultiGraph) -> dict[str, dict[str, str]]:
    """Node -> port -> Linux name, checked against the design."""
    path = lab.path / "ifmap.json"
    file = str(path)
    data = _mapping(read_json(path), file, "")
    linux: dict[str, dict[str, str]] = {}
    for node in graph.nodes:
        if node not in data:
            raise InputError(file, node, "missing (the design has this node)")
        ports = _mapping(data[node], file, node)
        linux[node] = {}
        for port, names in ports.items():
            names = _mapping(names, file, f"{node}.{port}")
            name = names.get("netns")
            if not isinstance(name, str) or re.match(LINUX_NAME, name) is None:
                raise InputError(
                    file, f"{node}.{port}.netns", f"{name!r} is not a Linux interface name"
                )
            linux[node][port] = name
    for extra in set(data) - set(graph.nodes):
        raise InputError(file, str(extra), "not a node of the design")
    for _, _, attrs in graph.edges(data=True):
        for end in ("a", "b"):
            node, port = attrs[end], attrs[f"{end}_port"]
            if port not in linux[node]:
                raise InputError(file, f"{node}.{port}", "missing (it is wired)")
    return linux


@functools.cache
def leaf_lists() -> frozenset[str]:
    """The fields a config_db.json may hold as a list of strings: the leaf-lists of SONiC's
    YANG models (twin/yang/models); every other field is a string."""
    names: set[str] = set()
    for model in (Path(__file__).parents[1] / "yang" / "models").glob("*.yang"):
        names.update(re.findall(r"\bleaf-list\s+([\w-]+)", model.read_text()))
    return frozenset(names)


def _frr_conf(lab: Lab, node: str) -> None:
    path = lab.path / "configs" / node / "frr.conf"
    text = read_text(path, CONFIG_BYTES)
    if "\0" in text:
        line = text[: text.index("\0")].count("\n") + 1
        raise InputError(str(path), f"line {line}", "a NUL byte")
    parse_frr(text, str(path))


def _claim(addresses: dict[str, tuple[str, str]], ip: str, file: str, key: str, node: str) -> None:
    """Refuse an address another node already holds."""
    first = addresses.get(ip)
    if first is not None and first[0] != file:
        raise InputError(file, key, f"{ip} is also in {first[0]} ({first[1]})")
    addresses.setdefault(ip, (file, key))


def _host(
    lab: Lab,
    node: str,
    graph: nx.MultiGraph,
    ifmap: dict[str, dict[str, str]],
    addresses: dict[str, tuple[str, str]],
    applied: bool,
) -> None:
    path = lab.path / "configs" / node / "host.json"
    file = str(path)
    data = _shared(lab.host, node, path)
    named = parse_model(Identity, data, file)
    own = set(ifmap[node].values())
    for i, nic in enumerate(named.interfaces):
        if nic.name not in own:
            raise InputError(
                file, f"interfaces.{i}.name", f"{nic.name!r} is not a NIC of {node} in ifmap.json"
            )
    _claim(addresses, named.address.split("/")[0], file, "address", node)
    if applied:
        _applied(file, parse_model(Host, data, file), graph, ifmap)


def _applied(file: str, host: Host, graph: nx.MultiGraph, ifmap: dict[str, dict[str, str]]) -> None:
    """What a deploy applies of a host file leads through the server's own NICs to ports
    that are wired."""
    nics = [nic.name for nic in host.interfaces]
    for i, nic in enumerate(host.interfaces):
        if nic.peer not in graph.nodes or nic.peer_port not in ifmap[nic.peer]:
            raise InputError(
                file, f"interfaces.{i}.peer_port", f"{nic.peer}:{nic.peer_port} is not wired"
            )
    for i, route in enumerate(host.routes):
        for j, hop in enumerate(route.nexthops):
            if hop.dev not in nics:
                raise InputError(file, f"routes.{i}.nexthops.{j}.dev", f"no NIC {hop.dev!r}")
    for i, device in enumerate(host.rdma.devices if host.rdma else []):
        if device.netdev not in nics:
            raise InputError(file, f"rdma.devices.{i}.netdev", f"no NIC {device.netdev!r}")


def _config_db(
    lab: Lab,
    node: str,
    ports: dict[str, str],
    addresses: dict[str, tuple[str, str]],
    live: bool,
) -> None:
    path = lab.path / "configs" / node / "config_db.json"
    file = str(path)
    db = _mapping(_shared(lab.config_db, node, path), file, "")
    maps = set(QOS_MAPS.values())
    for table, entries in db.items():
        numbers = table in maps  # `_maps` checks them
        for key, fields in _mapping(entries, file, table).items():
            if not isinstance(fields, dict):
                _mapping(fields, file, f"{table}.{key}")  # refuses it, in one line
            if numbers:
                continue
            for field, value in fields.items():
                if type(value) is str:
                    continue  # the most (465,000 fields at 1,024 servers)
                if isinstance(value, list) and field in leaf_lists():
                    value = "" if all(isinstance(v, str) for v in value) else None
                if not isinstance(value, str):
                    raise InputError(file, f"{table}.{key}.{field}", "must be a string")
    _maps(file, db)
    _qos_numbers(file, db)
    channels = db.get("PORTCHANNEL", {})
    _fields(file, "PORT", db.get("PORT", {}), live)
    _fields(file, "PORTCHANNEL", channels, live)
    known = set(ports) | set(db.get("PORT", {}))
    for key in db.get("PORTCHANNEL_MEMBER", {}):
        channel, port = _pair(file, "PORTCHANNEL_MEMBER", key)
        if channel not in channels:
            raise InputError(file, f"PORTCHANNEL_MEMBER.{key}", f"no PORTCHANNEL {channel}")
        if port not in known:
            raise InputError(file, f"PORTCHANNEL_MEMBER.{key}", f"no PORT {port}")
    for key in db.get("VLAN_MEMBER", {}):
        _, member = _pair(file, "VLAN_MEMBER", key)
        if member not in known and member not in channels:
            raise InputError(file, f"VLAN_MEMBER.{key}", f"no PORT or PORTCHANNEL {member}")
    held = _Held()
    for table in ADDRESS_TABLES:
        for key in db.get(table, {}):
            if "|" not in key:
                continue
            name, cidr = _pair(file, table, key)
            if table == "INTERFACE" and name not in known:
                raise InputError(file, f"{table}.{key}", f"no PORT {name}")
            if table == "PORTCHANNEL_INTERFACE" and name not in channels:
                raise InputError(file, f"{table}.{key}", f"no PORTCHANNEL {name}")
            try:
                address = ipaddress.IPv4Interface(_cidr(cidr))
            except ValueError as exc:
                raise InputError(file, f"{table}.{key}", str(exc)) from None
            for other_key, other_name, _ in held.overlapping(address.network):
                if other_name != name:
                    raise InputError(file, f"{table}.{key}", f"overlaps {other_key}")
            held.add(f"{table}.{key}", name, address)
            _claim(addresses, str(address.ip), file, f"{table}.{key}", node)


def _shared(read: Callable[[str], Any], node: str, path: Path) -> Any:
    """A node's config file as the lab's readers share it (`Lab.config_db`, `Lab.host`:
    parsed once for the check and for them, never changed here); a file that is not there
    or not a regular file refused as `read_json` says it."""
    try:
        return read(node)
    except LabError:
        return read_json(path, CONFIG_BYTES)


class _Held:
    """A switch's interface addresses so far, indexed so that the ones a new address's
    network overlaps are found without comparing it with each (a super-spine holds hundreds):
    CIDR blocks overlap only by nesting, so those are its supernets held (one lookup per prefix
    length held) and the networks held that start inside it (by bisection)."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, str, ipaddress.IPv4Interface]] = []
        self.nets: dict[tuple[int, int], list[int]] = {}  # (start, prefix length) -> entries
        self.lengths: set[int] = set()
        self.starts: list[tuple[int, int]] = []  # (start, entry), sorted

    def add(self, key: str, name: str, address: ipaddress.IPv4Interface) -> None:
        """Hold an address (`key` names it in a problem)."""
        net = address.network
        index, start = len(self.entries), int(net.network_address)
        self.entries.append((key, name, address))
        self.nets.setdefault((start, net.prefixlen), []).append(index)
        self.lengths.add(net.prefixlen)
        bisect.insort(self.starts, (start, index))

    def overlapping(
        self, net: ipaddress.IPv4Network
    ) -> list[tuple[str, str, ipaddress.IPv4Interface]]:
        """The addresses held whose networks overlap `net`, in the order they were held."""
        start, end = int(net.network_address), int(net.broadcast_address)
        found = {
            i
            for length in self.lengths
            if length <= net.prefixlen
            for i in self.nets.get((start >> (32 - length) << (32 - length), length), [])
        }
        at = bisect.bisect_left(self.starts, (start, -1))
        while at < len(self.starts) and self.starts[at][0] <= end:
            found.add(self.starts[at][1])
            at += 1
        return [self.entries[i] for i in sorted(found)]


def _maps(file: str, db: dict[str, Any]) -> None:
    """Every QoS map (DSCP_TO_TC_MAP, TC_TO_QUEUE_MAP, ...) maps whole numbers to whole numbers,
    and a map to queues or priority groups names one a port has (`PORT_INDICES`)."""
    for table in QOS_MAPS.values():
        for name, entries in db.get(table, {}).items():
            for key, value in entries.items():
                where = f"{table}.{name}.{key}"
                if not key.isdigit():
                    raise InputError(file, where, "the key must be a number")
                if not (isinstance(value, str) and value.isdigit()):
                    raise InputError(file, where, f"must be a number, not {value!r}")
                if table in PORT_INDICES and int(value) >= PORT_QUEUES:
                    what = PORT_INDICES[table]
                    raise InputError(file, where, f"must be a {what} 0-7, not {value!r}")


def _qos_numbers(file: str, db: dict[str, Any]) -> None:
    """The buffer and WRED sizes and probabilities, and the PFC priority lists, that the
    validators and the simulator read as numbers, as SONiC's YANG types them."""
    for table, fields, high in (
        *((t, f, None) for t, f in WHOLE.items()),
        *((t, f, 100) for t, f in PERCENT.items()),
    ):
        for key, entry in db.get(table, {}).items():
            for field in fields:
                value = entry.get(field)
                if value is None or (value.isdigit() and (high is None or int(value) <= high)):
                    continue
                what = "of bytes" if high is None else f"0-{high}"
                where = f"{table}.{key}.{field}"
                raise InputError(file, where, f"must be a whole number {what}, not {value!r}")
    for key, entry in db.get("PORT_QOS_MAP", {}).items():
        for field in ("pfc_enable", "pfcwd_sw_enable"):
            value = entry.get(field)
            if value is not None and not PRIORITY_LISTS.fullmatch(value):
                what = f"must be priorities 0-7 separated by commas, not {value!r}"
                raise InputError(file, f"PORT_QOS_MAP.{key}.{field}", what)


def _pair(file: str, table: str, key: str) -> tuple[str, str]:
    parts = key.split("|")
    if len(parts) != 2 or not all(parts):
        raise InputError(file, f"{table}.{key}", "the key must be NAME|VALUE")
    return parts[0], parts[1]


def _fields(file: str, table: str, entries: dict[str, Any], live: bool) -> None:
    """`mtu`, `min_links` and `admin_status` of PORT and PORTCHANNEL entries: whole numbers
    (within what a veth takes when `live`), up or down."""
    mtu = (68, 65535) if live else (0, 10**9)
    for key, fields in entries.items():
        for field, low, high in (("mtu", *mtu), ("min_links", 0, 1024)):
            value = fields.get(field)
            if value is not None and not (value.isdigit() and low <= int(value) <= high):
                raise InputError(
                    file, f"{table}.{key}.{field}", f"must be a number {low}..{high}, not {value!r}"
                )
        if fields.get("admin_status", "up") not in ("up", "down"):
            raise InputError(file, f"{table}.{key}.admin_status", "must be up or down")
