"""What a netns twin of a lab directory consists of, read from its configs (pure, no root).

Wiring (which port meets which) comes from the design graph and `ifmap.json`; everything a
device is configured with comes from its configs: addresses, MTUs and admin state from each
`config_db.json`, routing from each `frr.conf`, server settings from each `host.json`. An
edited config is therefore what runs.

MLAG emulation (the kernel has no bonding): a server holds its address as a /32 on each NIC
and routes over both with ECMP. A leaf routes each server's /32 onto the port the server hangs
on, holds its SVI address on those ports, and holds the SVI subnet on the peer-link with proxy
ARP, so that when a server link fails, traffic that reaches that leaf crosses the peer-link to
the other leaf of the pair, as MLAG forwards over its peer-link. Both leaves advertise the
subnet while their SVI is up, as SONiC's is: while any member of its VLAN (a server port or
the peer-link) has carrier, which a fallback route for the subnet (blackhole, kept only while
a member has carrier) stands for when the peer-link is gone. Not emulated: LACP, the MCLAG
control plane (iccpd), MAC sync, split-brain handling.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

from labs.kernel import ECMP_HASH
from twin.lab.directory import Lab
from twin.render.config_db import ConfigDb

SWITCH_SYSCTLS = {
    "net.ipv4.ip_forward": "1",
    **ECMP_HASH,
    "net.ipv4.conf.all.ignore_routes_with_linkdown": "1",
    "net.ipv4.conf.default.ignore_routes_with_linkdown": "1",
    "net.ipv4.conf.all.rp_filter": "0",
    "net.ipv4.conf.default.rp_filter": "0",
}
SERVER_SYSCTLS = {
    "net.ipv4.fib_multipath_hash_policy": "1",
    "net.ipv4.conf.all.ignore_routes_with_linkdown": "1",
    "net.ipv4.conf.default.ignore_routes_with_linkdown": "1",
    "net.ipv4.conf.all.rp_filter": "0",
    "net.ipv4.conf.default.rp_filter": "0",
}
# Metric of an SVI's fallback route: above the kernel's connected route on the peer-link (0).
SVI_FALLBACK_METRIC = 4000


@dataclass(frozen=True)
class Route:
    """A kernel route: onto a device, via gateways (ECMP when several), or a blackhole.

    A route with `carriers` is held only while one of those devices is up with carrier (the
    fallback route of an SVI: up while a member of its VLAN is).
    """

    dst: str
    dev: str | None = None
    gateways: tuple[tuple[str, str], ...] = ()  # (gateway, device)
    blackhole: bool = False
    metric: int = 0
    carriers: tuple[str, ...] = ()


@dataclass
class Node:
    """One namespace: a switch or a server."""

    name: str
    role: str
    netns: str
    sysctls: dict[str, str]
    addresses: list[tuple[str, str]] = field(default_factory=list)  # (ifname, cidr)
    mtu: dict[str, int] = field(default_factory=dict)
    down: set[str] = field(default_factory=set)
    routes: list[Route] = field(default_factory=list)
    proxy_arp: list[str] = field(default_factory=list)
    iptables: list[str] = field(default_factory=list)  # iptables-restore lines, mangle table
    rdma: list[tuple[str, str]] = field(default_factory=list)  # (rxe device, netdev)


@dataclass(frozen=True)
class Veth:
    """One veth pair: the Linux end of a port (or bundle) on each side."""

    a: str
    a_if: str
    b: str
    b_if: str
    kind: str


@dataclass
class Plan:
    """Everything a netns twin creates for a lab."""

    lab: str
    nodes: dict[str, Node]
    veths: list[Veth]

    def netns(self, node: str) -> str:
        """The namespace of a node."""
        return self.nodes[node].netns


def netns_name(lab: str, node: str) -> str:
    """Namespace of a node: `<lab>.<node>` (neither may contain a dot, so the tag is exact)."""
    return f"{lab}.{node}"


def port_names(lab: Lab, node: str) -> dict[str, str]:
    """Linux interface -> SONiC name of a node's ports: a bundle's veth is its PortChannel,
    which already bears the SONiC name (`PortChannel101`), a single port's veth its port's."""
    members: dict[str, list[str]] = {}
    for port, names in lab.ifmap.get(node, {}).items():
        members.setdefault(names["netns"], []).append(port)
    return {
        linux: ports[0] if len(ports) == 1 and not linux.startswith("PortChannel") else linux
        for linux, ports in members.items()
    }


def _veths(lab: Lab) -> list[Veth]:
    seen: dict[tuple[str, str, str, str], Veth] = {}
    for _, _, e in lab.graph.edges(data=True):
        a_if = lab.ifmap[e["a"]][e["a_port"]]["netns"]
        b_if = lab.ifmap[e["b"]][e["b_port"]]["netns"]
        key = (e["a"], a_if, e["b"], b_if)
        seen.setdefault(key, Veth(e["a"], a_if, e["b"], b_if, e["kind"]))
    return list(seen.values())


def _linux(lab: Lab, node: str, db: ConfigDb, name: str) -> str | None:
    """Linux name of a SONiC port or PortChannel on a switch (`db`: its config); None when it
    is not cabled (a port the design does not wire, a PortChannel without wired members:
    SONiC takes such a config, and the twin runs it without that port)."""
    if name.startswith("PortChannel"):
        members = [
            k.split("|")[1] for k in db.get("PORTCHANNEL_MEMBER", {}) if k.split("|")[0] == name
        ]
        names = {lab.ifmap[node][m]["netns"] for m in members if m in lab.ifmap[node]}
        return names.pop() if len(names) == 1 else None
    return lab.ifmap[node][name]["netns"] if name in lab.ifmap[node] else None


def _switch(lab: Lab, name: str, veths: list[Veth], servers: dict[str, str]) -> Node:
    db = lab.config_db(name)
    node = Node(
        name, lab.graph.nodes[name]["role"], netns_name(lab.name, name), dict(SWITCH_SYSCTLS)
    )
    wired = {v.a_if for v in veths if v.a == name} | {v.b_if for v in veths if v.b == name}
    _links(lab, name, db, node, wired)
    for table in ("INTERFACE", "PORTCHANNEL_INTERFACE"):
        for key in db.get(table, {}):
            if "|" in key:
                ifname, cidr = key.split("|")
                linux = _linux(lab, name, db, ifname)
                if linux is not None:
                    node.addresses.append((linux, cidr))
    for key in db.get("LOOPBACK_INTERFACE", {}):
        if "|" in key:
            node.addresses.append(("lo", key.split("|")[1]))
    _vlans(lab, name, db, node, servers)
    return node


def _links(
    lab: Lab,
    name: str,
    db: dict[str, dict[str, dict[str, str]]],
    node: Node,
    wired: set[str],
) -> None:
    """MTU and admin state of each veth from the PORT and PORTCHANNEL tables.

    A veth carries one port, or a bundle of ports (a PortChannel, or the local member of an
    MLAG bundle split across a leaf pair). Its MTU is the smallest configured on the way: its
    PORTs' and their PortChannel's (SONiC's default 9100 where unset). It is down when its
    PortChannel is admin down, or fewer of its PORTs are admin up than the PortChannel's
    `min_links` (at least one). SONiC defaults: a PORT without admin_status is down, a
    PORTCHANNEL without it is up. A port in no PortChannel whose far end is bundled (LACP
    there) counts as down: LACP keeps it out of the far end's bundle.
    """
    ports = db.get("PORT", {})
    channels = db.get("PORTCHANNEL", {})
    bundle = {
        key.split("|")[1]: key.split("|")[0]
        for key in db.get("PORTCHANNEL_MEMBER", {})
        if "|" in key
    }
    lacp = _lacp_partners(lab, name)
    carried: dict[str, list[str]] = {}
    for port in ports:
        linux = lab.ifmap[name].get(port, {}).get("netns")
        if linux in wired:
            carried.setdefault(linux, []).append(port)
    for linux, members in carried.items():
        pcs = {bundle[p] for p in members if p in bundle and bundle[p] in channels}
        mtus = [int(ports[p].get("mtu", 9100)) for p in members]
        mtus += [int(channels[pc]["mtu"]) for pc in pcs if "mtu" in channels[pc]]
        node.mtu[linux] = min(mtus)
        up = [
            p
            for p in members
            if ports[p].get("admin_status", "down") == "up" and (p in bundle or p not in lacp)
        ]
        needed = max([1] + [int(channels[pc].get("min_links", 1)) for pc in pcs])
        if len(up) < needed or any(channels[pc].get("admin_status", "up") != "up" for pc in pcs):
            node.down.add(linux)


def _lacp_partners(lab: Lab, name: str) -> set[str]:
    """A switch's ports whose far end is bundled: a switch's port in a PortChannel of its
    config, a server's NIC in the design's bond."""
    found = set()
    for _, far, e in lab.graph.edges(name, data=True):
        mine, theirs = ("a", "b") if e["a"] == name else ("b", "a")
        if lab.graph.nodes[far]["role"] == "server":
            bundled = bool(e.get(f"{theirs}_bundle"))
        else:
            members = lab.config_db(far).get("PORTCHANNEL_MEMBER", {})
            bundled = any(k.partition("|")[2] == e[f"{theirs}_port"] for k in members)
        if bundled:
            found.add(e[f"{mine}_port"])
    return found


def _vlans(
    lab: Lab,
    name: str,
    db: dict[str, dict[str, dict[str, str]]],
    node: Node,
    servers: dict[str, str],
) -> None:
    """Server VLANs: SVI on the peer-link (proxy ARP), /32 routes onto server ports, and the
    subnet's fallback route, held while a member of the VLAN has carrier."""
    members: dict[str, list[str]] = {}
    for key in db.get("VLAN_MEMBER", {}):
        vlan, member = key.split("|")
        linux = _linux(lab, name, db, member)
        if linux is not None:
            members.setdefault(vlan, []).append(linux)
    peers = {
        p
        for v in members.values()
        for p in v
        if lab.graph.nodes[name]["role"] == "leaf" and _peer_of(lab, name, p) not in servers
    }
    for key in db.get("VLAN_INTERFACE", {}):
        if "|" not in key:
            continue
        vlan, cidr = key.split("|")
        svi = ipaddress.IPv4Interface(cidr)
        on_peer_link = [m for m in members.get(vlan, []) if m in peers]
        for member in on_peer_link:
            node.addresses.append((member, cidr))
            if member not in node.proxy_arp:
                node.proxy_arp.append(member)
        for member in members.get(vlan, []):
            server = _peer_of(lab, name, member)
            if server in servers and ipaddress.IPv4Address(servers[server]) in svi.network:
                node.addresses.append((member, f"{svi.ip}/32"))
                node.routes.append(Route(f"{servers[server]}/32", dev=member))
        node.routes.append(
            Route(
                str(svi.network),
                blackhole=True,
                metric=SVI_FALLBACK_METRIC,
                carriers=tuple(dict.fromkeys(members.get(vlan, []))),
            )
        )


def _peer_of(lab: Lab, node: str, linux: str) -> str | None:
    for port, names in lab.ifmap[node].items():
        if names["netns"] == linux:
            for _, peer, e in lab.graph.edges(node, data=True):
                if e["a_port" if e["a"] == node else "b_port"] == port:
                    return str(peer)
    return None


def _server(lab: Lab, name: str, host: dict[str, Any]) -> Node:
    node = Node(name, "server", netns_name(lab.name, name), dict(SERVER_SYSCTLS))
    address = host["address"].split("/")[0]
    for nic in host["interfaces"]:
        node.mtu[nic["name"]] = int(host["mtu"])
        node.addresses.append((nic["name"], f"{address}/32"))
        node.routes.append(Route(f"{nic['gateway']}/32", dev=nic["name"]))
    for route in host["routes"]:
        hops = tuple((h["gateway"], h["dev"]) for h in route["nexthops"])
        node.routes.append(Route(route["dst"], gateways=hops))
    rules = []
    for mark in host.get("dscp_marking", []):
        for proto in ("tcp", "udp"):
            for port in mark["ports"]:
                rules.append(
                    f"-A OUTPUT -p {proto} --dport {port} -j DSCP --set-dscp {mark['dscp']}"
                )
    node.iptables = rules
    node.rdma = [(d["name"], d["netdev"]) for d in (host.get("rdma") or {}).get("devices", [])]
    return node


def build(lab: Lab) -> Plan:
    """The plan of a lab's netns twin, from its configs."""
    veths = _veths(lab)
    hosts = {s: lab.host(s) for s in lab.nodes("server")}
    servers = {s: host["address"].split("/")[0] for s, host in hosts.items()}
    nodes = {s: _switch(lab, s, veths, servers) for s in lab.switches()}
    nodes.update({s: _server(lab, s, host) for s, host in hosts.items()})
    return Plan(lab.name, nodes, veths)
