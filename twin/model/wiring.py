"""A lab's devices as its configs set them up, on the design's cabling (no routing yet):
`Wiring` (interfaces, bundles, VLANs, which ports are up, who owns an address, servers'
routes), what frr.conf says (`twin.model.frr.parse_frr`: eBGP settings, routing policy and
static routes) and the physical `links`.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Interface, IPv4Network
from typing import Any, TypeVar

from twin.errors import InputError
from twin.lab.directory import Lab
from twin.model.fib import Hops, Link, NextHop, Routes
from twin.model.frr import Bgp, Static, parse_frr
from twin.model.policy import Policy

T = TypeVar("T")

CONNECTED, EBGP = 0, 20


_SHARED: dict[str, tuple[Lab, Any, Wiring]] = {}
"""The last shared Wiring: its lab, the versions of the files it was read from, and itself."""
_BUILDING = threading.Lock()
"""Held while one is looked up or built: readers in two threads (`twin run` judges the static
validators beside a computed play) share one."""


def shared(lab: Lab) -> Wiring:
    """The lab's `Wiring`, built once and shared by every reader of one lab (the backends'
    observers and failures, the plan, the static and dynamic validators) while the files it
    is read from keep their version (`Lab.stamp`); a fresh one, not kept, while one of them
    was just written.
    Readers must not change it; one lab at a time is kept."""
    stamp = lab.stamp()  # None: `Wiring` says what is missing, or a file was just written
    with _BUILDING:
        hit = _SHARED.get("last")
        if stamp is None or hit is None or hit[0] is not lab or hit[1] != stamp:
            wiring = Wiring(lab)
            if stamp is None:
                return wiring
            hit = _SHARED["last"] = (lab, stamp, wiring)
        return hit[2]


def links(lab: Lab) -> list[Link]:
    """Every physical link of a lab."""
    return [(e["a"], e["a_port"], e["b"], e["b_port"]) for _, _, e in lab.graph.edges(data=True)]


@dataclass
class Router:
    """One switch's routing configuration."""

    name: str
    bgp: Bgp | None
    router_id: int
    statics: list[Static]
    neighbors: dict[IPv4Address, int]
    policy: Policy


@dataclass
class Host:
    """One server's network configuration."""

    name: str
    address: IPv4Interface
    nics: list[str]
    routes: list[tuple[IPv4Network, list[tuple[IPv4Address, str]]]]


class Wiring:
    """A lab's devices as its configs set them up, on the design's cabling (no routing yet)."""

    def __init__(self, lab: Lab) -> None:
        self.lab = lab
        self.cable: dict[tuple[str, str], tuple[str, str]] = {}
        for a, a_port, b, b_port in links(lab):
            self.cable[(a, a_port)] = (b, b_port)
            self.cable[(b, b_port)] = (a, a_port)
        self.configs = {s: lab.config_db(s) for s in lab.switches()}
        self.members: dict[str, dict[str, list[str]]] = {}
        self.bundle: dict[tuple[str, str], str] = {}
        self.interfaces: dict[str, dict[str, list[IPv4Interface]]] = {}
        self.vlans: dict[str, dict[str, list[str]]] = {}
        self.admin_down: set[tuple[str, str]] = set()
        self.routers = {s: self._read(s, "config_db.json", self._router) for s in lab.switches()}
        self.hosts = {
            s: self._read(s, "host.json", lambda s: _host(s, lab.host(s)))
            for s in lab.nodes("server")
        }
        self.owner: dict[IPv4Address, tuple[str, str]] = {
            a.ip: (node, name)
            for node, ifs in self.interfaces.items()
            for name, addresses in ifs.items()
            for a in addresses
        }
        self.owner.update({h.address.ip: (h.name, "") for h in self.hosts.values()})
        self._owner = {int(a): o for a, o in self.owner.items()}
        self._far: dict[tuple[str, str], tuple[str, str] | None] = {}
        self._carriers: dict[
            tuple[str, str], tuple[int, list[tuple[tuple[str, str], tuple[str, str]]], list[str]]
        ] = {}
        self._vids: dict[tuple[str, str], str | None] = {}

    def _read(self, node: str, file: str, read: Callable[[str], T]) -> T:
        """A device's config read by `read`; a value it cannot use is one `InputError` line."""
        try:
            return read(node)
        except (KeyError, ValueError, TypeError) as exc:
            path = f"{self.lab.path}/configs/{node}/{file}"
            raise InputError(
                path, "", f"cannot read it ({exc.__class__.__name__}: {exc})"
            ) from None

    def _router(self, switch: str) -> Router:
        db = self.configs[switch]
        for port, attrs in db.get("PORT", {}).items():
            if attrs.get("admin_status", "down") != "up":
                self.admin_down.add((switch, port))
        members: dict[str, list[str]] = {}
        for key in db.get("PORTCHANNEL_MEMBER", {}):
            bundle, _, port = key.partition("|")
            members.setdefault(bundle, []).append(port)
            self.bundle[(switch, port)] = bundle
        self.members[switch] = members
        interfaces: dict[str, list[IPv4Interface]] = {}
        for table in ("INTERFACE", "PORTCHANNEL_INTERFACE", "VLAN_INTERFACE", "LOOPBACK_INTERFACE"):
            for key in db.get(table, {}):
                name, _, address = key.partition("|")
                if address and ":" not in address:
                    interfaces.setdefault(name, []).append(IPv4Interface(address))
        self.interfaces[switch] = interfaces
        vlans: dict[str, list[str]] = {}
        for key in db.get("VLAN_MEMBER", {}):
            vlan, _, member = key.partition("|")
            vlans.setdefault(vlan, []).append(member)
        self.vlans[switch] = vlans
        file = f"{self.lab.path}/configs/{switch}/frr.conf"
        frr = parse_frr(self.lab.frr_conf(switch), file)
        bgp = frr.bgp
        loopback = next((a.ip for a in interfaces.get("Loopback0", [])), IPv4Address(0))
        router_id = bgp.router_id if bgp and bgp.router_id else loopback
        neighbors = {
            IPv4Address(key.rpartition("|")[2]): int(attrs["asn"])
            for key, attrs in db.get("BGP_NEIGHBOR", {}).items()
            if attrs.get("admin_status", "up") == "up" and "asn" in attrs
        }
        return Router(switch, bgp, int(router_id), frr.statics, neighbors, frr.policy)

    def logical(self, node: str, port: str) -> str:
        """The port a physical port belongs to: its PortChannel, or itself."""
        return self.bundle.get((node, port), port)

    def physical(self, node: str, port: str) -> list[str]:
        """The physical ports of a port or PortChannel."""
        return self.members.get(node, {}).get(port, [port])

    def far(self, node: str, port: str) -> tuple[str, str] | None:
        """The neighbour and its (logical) port at the other end of a port or PortChannel."""
        key = (node, port)
        if key not in self._far:
            found = None
            for member in self.physical(node, port):
                if (node, member) in self.cable:
                    peer, peer_port = self.cable[(node, member)]
                    found = (peer, self.logical(peer, peer_port))
                    break
            self._far[key] = found
        return self._far[key]

    def up(self, node: str, port: str, down: Collection[tuple[str, str]]) -> bool:
        """Whether a port or PortChannel carries traffic when `down` physical ports are down."""
        need, wires, members = self._carrier(node, port)
        if members:
            return any(self.up(node, m, down) for m in members)
        for a, b in wires:
            if a not in down and b not in down:
                need -= 1
                if need <= 0:
                    return True
        return need <= 0

    def _carrier(
        self, node: str, port: str
    ) -> tuple[int, list[tuple[tuple[str, str], tuple[str, str]]], list[str]]:
        """What `up` needs of a port: how many of its cabled wires (each the two physical ends)
        must be up (a PortChannel's `min_links`, admin down: more than it has; a loopback
        none), and a VLAN's members (it is up while one of them is)."""
        key = (node, port)
        if key not in self._carriers:
            cabled = [
                ((node, m), self.cable[(node, m)])
                for m in self.members.get(node, {}).get(port, [port])
                if (node, m) in self.cable
            ]
            if port in self.members.get(node, {}):
                attrs = self.configs.get(node, {}).get("PORTCHANNEL", {}).get(port, {})
                admin_up = attrs.get("admin_status", "up") == "up"
                need = int(attrs.get("min_links", 1)) if admin_up else len(cabled) + 1
                self._carriers[key] = (need, cabled, [])
            elif port in self.vlans.get(node, {}):
                self._carriers[key] = (1, [], self.vlans[node][port])
            else:
                self._carriers[key] = (0 if port.startswith("Loopback") else 1, cabled, [])
        return self._carriers[key]

    def reach(
        self, node: str, iface: str, target: str, down: Collection[tuple[str, str]]
    ) -> str | None:
        """The port through which `iface` of `node` reaches `target`: itself for a routed
        interface, for a VLAN its member toward the target, across switches sharing the VLAN."""
        if iface not in self.vlans.get(node, {}):
            far = self.far(node, iface)
            return iface if far and far[0] == target and self.up(node, iface, down) else None
        return self.bridged(node, iface, down).get(target)

    def bridged(self, node: str, vlan: str, down: Collection[tuple[str, str]]) -> dict[str, str]:
        """Every node a VLAN of `node` reaches, across switches sharing the VLAN, with the
        member toward it: the first found breadth first, members in configured order."""
        found: dict[str, str] = {}
        queue = deque((node, vlan, m, m) for m in self.vlans[node][vlan])
        seen = {node}
        up, far_of, vid_of = self.up, self.far, self._vid
        while queue:
            here, here_vlan, member, first = queue.popleft()
            far = far_of(here, member)
            if far is None:
                continue
            peer, peer_port = far
            ends = peer in seen or peer not in self.vlans
            if ends and peer in found:
                continue  # whether the member is up changes nothing
            if not up(here, member, down):
                continue
            found.setdefault(peer, first)
            if ends:
                continue
            vid = vid_of(here, here_vlan)
            for other, ports in self.vlans[peer].items():
                if vid_of(peer, other) == vid and peer_port in ports:
                    seen.add(peer)
                    queue.extend((peer, other, m, first) for m in ports if m != peer_port)
                    break
        return found

    def _vid(self, node: str, vlan: str) -> str | None:
        """A VLAN's `vlanid` in the switch's config (None when it sets none)."""
        key = (node, vlan)
        if key not in self._vids:
            self._vids[key] = self.configs[node].get("VLAN", {}).get(vlan, {}).get("vlanid")
        return self._vids[key]

    def neighbor(
        self, node: str, iface: str, address: IPv4Address, down: Collection[tuple[str, str]]
    ) -> NextHop | None:
        """The first hop from `node` out of `iface` toward the owner of `address`."""
        return self.neighbors(node, iface, down)(int(address))

    def neighbors(
        self, node: str, iface: str, down: Collection[tuple[str, str]]
    ) -> Callable[[int], NextHop | None]:
        """`neighbor` out of one interface, for addresses as integers (a VLAN is walked
        once for all of them)."""
        if iface in self.vlans.get(node, {}):
            reach: Callable[[str], str | None] = self.bridged(node, iface, down).get
        else:

            def reach(target: str) -> str | None:
                return self.reach(node, iface, target, down)

        def hop(address: int) -> NextHop | None:
            owner = self._owner.get(address)
            if owner is None or owner[0] == node:
                return None
            port = reach(owner[0])
            far = self.far(node, port) if port else None
            return NextHop(far[0], port) if far and port else None

        return hop

    def host_routes(self, name: str, down: Collection[tuple[str, str]]) -> Routes:
        """A server's FIB: its subnet over every up NIC, its routes over their up devices; a
        NIC's next hop is the switch it is cabled to."""
        host = self.hosts[name]

        def via(devices: Iterable[str]) -> Hops:
            hops = (
                NextHop(f[0], d)
                for d in devices
                if (f := self.far(name, d)) and self.up(name, d, down)
            )
            return tuple(dict.fromkeys(hops))

        routes = {host.address.network: via(host.nics)}
        routes.update({dst: via(dev for _, dev in hops) for dst, hops in host.routes})
        return routes


def _host(name: str, host: dict[str, Any]) -> Host:
    nics = [i["name"] for i in host["interfaces"]]
    routes = host.get("routes")
    installed = [r for r in routes if isinstance(r, dict)] if isinstance(routes, list) else []
    return Host(
        name,
        IPv4Interface(host["address"]),
        nics,
        [route for r in installed if (route := _route(r, nics)) is not None],
    )


def _route(
    route: dict[str, Any], nics: list[str]
) -> tuple[IPv4Network, list[tuple[IPv4Address, str]]] | None:
    """A host route as the kernel installs it; None when `ip route` would refuse it (its
    destination or a next hop unreadable, a next hop through a device the server lacks):
    the server then has no such route, which the validators judge.

    >>> _route({"dst": "0.0.0.0/0", "nexthops": [{"gateway": "10.2.0.1", "dev": "nic0"}]},
    ...        ["nic0"])
    (IPv4Network('0.0.0.0/0'), [(IPv4Address('10.2.0.1'), 'nic0')])
    >>> _route({"dst": "0.0.0.0/0", "nexthops": [{"dev": "nic0"}]}, ["nic0"]) is None
    True
    """
    hops: Any = route.get("nexthops")
    try:
        dst = IPv4Network(route.get("dst"))
        via = [(IPv4Address(h["gateway"]), h["dev"]) for h in hops]
    except (KeyError, TypeError, ValueError):
        return None
    if not via or any(dev not in nics for _, dev in via):
        return None
    return dst, via
