"""Forwarding tables (FIBs): computed from a lab's configs, or read from a live twin.

A `Fib` maps every node (switch or server) to its routes: prefix -> next hops, each a
`NextHop(node, port)`: the neighbour the packet goes to next (switch or server: the first
physical hop) and the egress port (a port or PortChannel; for a VLAN, its member toward
that neighbour). An empty tuple drops. Both sources produce this type, so the same checks
run on either.

From configs (`Routing`), what each switch's routing would converge to:

- an interface (INTERFACE, PORTCHANNEL_INTERFACE, VLAN_INTERFACE, LOOPBACK_INTERFACE) is up
  when its port is admin up and cabled to an admin-up port, a PortChannel when `min_links`
  members are, a VLAN when a member is; up interfaces give connected routes (distance 0);
- a VLAN's subnet goes to the switches bridged to it that hold an address in it (the MLAG
  peer, over the peer-link), and each server on one of its members (host files say their
  addresses) is a /32 onto its port: when a server's own link is down, the subnet route
  takes its traffic across the peer-link;
- `ip route PREFIX (GATEWAY [IFNAME] | IFNAME | blackhole) [DISTANCE]` in frr.conf (distance 1
  by default) is active when its gateway is on an up connected subnet or resolves through
  another route;
- eBGP (distance 20) over the sessions that BGP_NEIGHBOR defines on both ends (each names the
  other's address on a shared up subnet, with the other's `router bgp` AS); `network`
  statements originate a prefix that is in the RIB (connected or static); a path holding the
  receiver's AS is refused; the shortest AS path wins, then the lowest router-id; multipath
  takes the equal-length paths (`bgp bestpath as-path multipath-relax`) or only those with the
  same AS path, up to `maximum-paths` (64 when unset). Sessions between equal ASes (iBGP) are
  not modelled.
- a server sends to its own subnet over every up NIC, elsewhere by its host file's routes; a
  NIC's next hop is the leaf it is cabled to (MLAG leaves route for each other's gateway).

`Routing.after(failed)` gives the FIB changes when links fail, incrementally: an eBGP
path-vector converges from the state before the failure (without policies shortest-path eBGP
has one stable state, reached from any start).
"""

from __future__ import annotations

import bisect
from collections import defaultdict, deque
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Interface, IPv4Network
from typing import Any, NamedTuple, TypeVar

from twin.errors import InputError
from twin.labdir import Lab

T = TypeVar("T")


class NextHop(NamedTuple):
    """Where a packet goes next: the neighbour and the egress port toward it."""

    node: str
    port: str


Hops = tuple[NextHop, ...]
Routes = dict[IPv4Network, Hops]
Fib = dict[str, Routes]
FibDelta = dict[str, dict[IPv4Network, Hops | None]]
"""FIB changes per node: the new next hops of a prefix, or None when its route is gone."""
Link = tuple[str, str, str, str]
"""A physical link (node, port, node, port), as in the design graph."""

CONNECTED, STATIC, EBGP = 0, 1, 20
DEFAULT_MAXIMUM_PATHS = 64


def links(lab: Lab) -> list[Link]:
    """Every physical link of a lab."""
    return [(e["a"], e["a_port"], e["b"], e["b_port"]) for _, _, e in lab.graph.edges(data=True)]


def lookup(routes: Mapping[IPv4Network, Hops], address: IPv4Address) -> Hops | None:
    """Longest-prefix match (None when no route covers the address).

    >>> r = {IPv4Network("10.0.0.0/8"): (NextHop("a", "p1"),), IPv4Network("10.1.0.0/16"): ()}
    >>> lookup(r, IPv4Address("10.1.2.3")), lookup(r, IPv4Address("10.2.0.1"))
    ((), (NextHop(node='a', port='p1'),))
    """
    return Lpm(routes)(int(address))


class Lpm:
    """Fast longest-prefix match over a fixed table, on integer addresses."""

    def __init__(self, routes: Mapping[IPv4Network, Hops]) -> None:
        self.tables: dict[int, dict[int, Hops]] = {}
        for prefix, hops in routes.items():
            shift = 32 - prefix.prefixlen
            self.tables.setdefault(shift, {})[int(prefix.network_address) >> shift] = hops
        self.shifts = sorted(self.tables)

    def __call__(self, address: int) -> Hops | None:
        for shift in self.shifts:
            hops = self.tables[shift].get(address >> shift)
            if hops is not None:
                return hops
        return None


@dataclass(frozen=True)
class Static:
    """An `ip route` of frr.conf."""

    prefix: IPv4Network
    gateway: IPv4Address | None
    interface: str | None
    distance: int
    blackhole: bool


@dataclass
class Bgp:
    """What frr.conf's `router bgp` says."""

    asn: int
    router_id: IPv4Address | None = None
    networks: list[IPv4Network] = field(default_factory=list)
    maximum_paths: int = DEFAULT_MAXIMUM_PATHS
    relax: bool = False


def parse_frr(text: str, file: str) -> tuple[Bgp | None, list[Static]]:
    """The eBGP settings and static routes of an frr.conf.

    >>> bgp, statics = parse_frr("ip route 10.2.0.0/24 10.1.0.1 250\\nrouter bgp 65001\\n"
    ...     " bgp bestpath as-path multipath-relax\\n address-family ipv4 unicast\\n"
    ...     "  network 10.0.0.1/32\\n  maximum-paths 8\\n exit-address-family\\nexit\\n", "f")
    >>> bgp.asn, bgp.networks, bgp.maximum_paths, bgp.relax, statics[0].distance
    (65001, [IPv4Network('10.0.0.1/32')], 8, True, 250)
    """
    bgp: Bgp | None = None
    statics: list[Static] = []
    in_bgp = False
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split()
        if not words or words[0] == "!":
            continue
        try:
            if not line[0].isspace():
                in_bgp = words[:2] == ["router", "bgp"] and len(words) == 3
                if in_bgp:
                    bgp = Bgp(int(words[2]))
                elif words[:2] == ["ip", "route"]:
                    statics.append(_static(words[2:]))
            elif in_bgp and bgp is not None:
                _bgp_line(bgp, words)
        except (ValueError, IndexError) as exc:
            raise InputError(
                file, f"line {number}", f"cannot read {line.strip()!r}: {exc}"
            ) from None
    return bgp, statics


def _bgp_line(bgp: Bgp, words: list[str]) -> None:
    if words[:2] == ["bgp", "router-id"]:
        bgp.router_id = IPv4Address(words[2])
    elif words == ["bgp", "bestpath", "as-path", "multipath-relax"]:
        bgp.relax = True
    elif words[0] == "network":
        bgp.networks.append(IPv4Network(words[1]))
    elif words[0] == "maximum-paths" and words[1].isdigit():
        bgp.maximum_paths = int(words[1])


def _static(words: list[str]) -> Static:
    prefix = IPv4Network(words[0])
    rest = words[1:]
    distance = int(rest.pop()) if len(rest) > 1 and rest[-1].isdigit() else STATIC
    target = rest[0]
    if target in ("blackhole", "Null0", "reject"):
        return Static(prefix, None, None, distance, True)
    if target[0].isdigit():
        return Static(
            prefix, IPv4Address(target), rest[1] if len(rest) > 1 else None, distance, False
        )
    return Static(prefix, None, target, distance, False)


@dataclass
class Router:
    """One switch's routing configuration."""

    name: str
    bgp: Bgp | None
    router_id: int
    statics: list[Static]
    neighbors: dict[IPv4Address, int]


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
        bgp, statics = parse_frr(self.lab.frr_conf(switch), file)
        loopback = next((a.ip for a in interfaces.get("Loopback0", [])), IPv4Address(0))
        router_id = bgp.router_id if bgp and bgp.router_id else loopback
        neighbors = {
            IPv4Address(key.rpartition("|")[2]): int(attrs["asn"])
            for key, attrs in db.get("BGP_NEIGHBOR", {}).items()
            if attrs.get("admin_status", "up") == "up" and "asn" in attrs
        }
        return Router(switch, bgp, int(router_id), statics, neighbors)

    def logical(self, node: str, port: str) -> str:
        """The port a physical port belongs to: its PortChannel, or itself."""
        return self.bundle.get((node, port), port)

    def physical(self, node: str, port: str) -> list[str]:
        """The physical ports of a port or PortChannel."""
        return self.members.get(node, {}).get(port, [port])

    def far(self, node: str, port: str) -> tuple[str, str] | None:
        """The neighbour and its (logical) port at the other end of a port or PortChannel."""
        for member in self.physical(node, port):
            if (node, member) in self.cable:
                peer, peer_port = self.cable[(node, member)]
                return peer, self.logical(peer, peer_port)
        return None

    def up(self, node: str, port: str, down: Collection[tuple[str, str]]) -> bool:
        """Whether a port or PortChannel carries traffic when `down` physical ports are down."""
        db = self.configs.get(node, {})
        if port in self.members.get(node, {}):
            attrs = db.get("PORTCHANNEL", {}).get(port, {})
            live = sum(self._wire_up(node, m, down) for m in self.members[node][port])
            return attrs.get("admin_status", "up") == "up" and live >= int(
                attrs.get("min_links", 1)
            )
        if port in self.vlans.get(node, {}):
            return any(self.up(node, m, down) for m in self.vlans[node][port])
        return port.startswith("Loopback") or self._wire_up(node, port, down)

    def _wire_up(self, node: str, port: str, down: Collection[tuple[str, str]]) -> bool:
        peer = self.cable.get((node, port))
        return peer is not None and (node, port) not in down and peer not in down

    def reach(
        self, node: str, iface: str, target: str, down: Collection[tuple[str, str]]
    ) -> str | None:
        """The port through which `iface` of `node` reaches `target`: itself for a routed
        interface, for a VLAN its member toward the target, across switches sharing the VLAN."""
        if iface not in self.vlans.get(node, {}):
            far = self.far(node, iface)
            return iface if far and far[0] == target and self.up(node, iface, down) else None
        queue = deque((node, iface, m, m) for m in self.vlans[node][iface])
        seen = {node}
        while queue:
            here, vlan, member, first = queue.popleft()
            far = self.far(here, member)
            if far is None or not self.up(here, member, down):
                continue
            peer, peer_port = far
            if peer == target:
                return first
            vid = self.configs[here].get("VLAN", {}).get(vlan, {}).get("vlanid")
            for other, ports in self.vlans.get(peer, {}).items():
                same = self.configs[peer].get("VLAN", {}).get(other, {}).get("vlanid") == vid
                if peer not in seen and same and peer_port in ports:
                    seen.add(peer)
                    queue.extend((peer, other, m, first) for m in ports if m != peer_port)
        return None

    def neighbor(
        self, node: str, iface: str, address: IPv4Address, down: Collection[tuple[str, str]]
    ) -> NextHop | None:
        """The first hop from `node` out of `iface` toward the owner of `address`."""
        owner = self.owner.get(address)
        if owner is None or owner[0] == node:
            return None
        port = self.reach(node, iface, owner[0], down)
        far = self.far(node, port) if port else None
        return NextHop(far[0], port) if far and port else None

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
    routes = [
        (IPv4Network(r["dst"]), [(IPv4Address(h["gateway"]), h["dev"]) for h in r["nexthops"]])
        for r in host.get("routes", [])
    ]
    nics = [i["name"] for i in host.get("interfaces", [])]
    return Host(name, IPv4Interface(host["address"]), nics, routes)


Peer = tuple[str, str]
"""A BGP neighbour as a router sees it: (neighbour, local port of the session)."""


class Selection(NamedTuple):
    """A router's eBGP choice for one prefix."""

    path: tuple[int, ...]
    """AS path of the best route as received; () when the router originates the prefix."""
    best: Peer | None
    hops: tuple[Peer, ...]
    """Multipath neighbours, in tie-break order."""
    spare: bool
    """Equal paths beyond maximum-paths exist (they may step in when a hop leaves)."""


ORIGIN = Selection((), None, (), False)
_RESELECT = Selection((-1,), None, (), False)


class PathVector:
    """eBGP over fixed sessions, one prefix at a time: `solve` from scratch (breadth first,
    layer k holds the routers whose best path is k ASes long), `converge` from a solved state
    after a change (each change of a router's choice is offered to its neighbours, which
    mostly update in O(1) and reselect from all offers only when their best route is lost).

    `peers[r]` lists r's sessions as (neighbour, local port, neighbour's port); r knows a
    neighbour as the `Peer` (neighbour, local port).
    """

    def __init__(
        self, routers: Mapping[str, Router], peers: Mapping[str, list[tuple[str, str, str]]]
    ) -> None:
        self.peers = peers
        self.asn = {r: c.bgp.asn for r, c in routers.items() if c.bgp}
        self.maxpaths = {r: c.bgp.maximum_paths for r, c in routers.items() if c.bgp}
        self.relax = {r: c.bgp.relax for r, c in routers.items() if c.bgp}
        known = {(b, port) for sessions in peers.values() for b, port, _ in sessions}
        ranked = sorted(known, key=lambda p: (routers[p[0]].router_id, p[0], p[1]))
        self.order = {peer: i for i, peer in enumerate(ranked)}
        """Tie-break rank of a peer: lowest router-id, then name, then port."""
        self.by_asn: dict[str, list[tuple[int, list[tuple[str, Peer, int]]]]] = {}
        """r's neighbours by AS: (neighbour, how it knows r, rank of r there)."""
        for r, sessions in peers.items():
            groups: dict[int, list[tuple[str, Peer, int]]] = {}
            for n, _, n_port in sessions:
                peer = (r, n_port)
                groups.setdefault(self.asn[n], []).append((n, peer, self.order[peer]))
            self.by_asn[r] = list(groups.items())

    def solve(
        self, origins: Collection[str], down: Collection[tuple[str, str, str]]
    ) -> dict[str, Selection]:
        """Every router's selection, sessions (router, neighbour, port) in `down` down."""
        chosen = dict.fromkeys(sorted(origins), ORIGIN)
        frontier = list(chosen)
        while frontier:
            offers: dict[str, list[tuple[int, Peer]]] = defaultdict(list)
            adv = {}
            for r in frontier:
                adv[r] = path = (self.asn[r], *chosen[r].path)
                for asn, group in self.by_asn.get(r, []):
                    if asn not in path:
                        for n, peer, rank in group:
                            if n not in chosen and not (down and (n, *peer) in down):
                                offers[n].append((rank, peer))
            for n, found in offers.items():
                found.sort()
                best = found[0][1]
                if not self.relax[n]:
                    found = [o for o in found if adv[o[1][0]] == adv[best[0]]]
                limit = self.maxpaths[n]
                hops = tuple(o[1] for o in found[:limit])
                chosen[n] = Selection(adv[best[0]], best, hops, len(found) > limit)
            frontier = list(offers)
        return chosen

    def converge(
        self,
        origins: Collection[str],
        state: Mapping[str, Selection],
        down: Collection[tuple[str, str, str]],
        lost: Iterable[tuple[str, Peer]],
        reselect: Iterable[str],
    ) -> dict[str, Selection | None]:
        """The selections that differ from a solved `state` once converged again, sessions in
        `down` down (`lost`: each end's peer of the sessions that just went down) and the
        routers in `reselect` changing what they originate."""
        run = _Convergence(self, origins, state, down)
        for n, peer in lost:
            run.consider(n, peer)
        for n in reselect:
            run.set(n, run.select(n))
        run.drain()
        return run.over

    def update(
        self, n: str, cur: Selection | None, peer: Peer, offer: tuple[int, ...] | None
    ) -> Selection | None:
        """n's selection once `peer` offers `offer`, or _RESELECT when only a full
        reselection can tell."""
        if cur is None:
            return None if offer is None else Selection(offer, peer, (peer,), False)
        if cur.best is None:
            return _RESELECT
        length, relax = len(cur.path), self.relax[n]
        if offer is not None and len(offer) < length:
            return Selection(offer, peer, (peer,), False)
        if peer in cur.hops:
            if offer is not None and len(offer) == length:
                if peer == cur.best:
                    return Selection(offer, peer, cur.hops, cur.spare) if relax else _RESELECT
                if relax or offer == cur.path:
                    return cur
            if peer == cur.best or cur.spare:
                return _RESELECT
            i = cur.hops.index(peer)
            return Selection(cur.path, cur.best, cur.hops[:i] + cur.hops[i + 1 :], False)
        if offer is None or len(offer) > length:
            return cur
        better = self.order[peer] < self.order[cur.best]
        if not relax and (better or offer != cur.path):
            return _RESELECT if better else cur
        hops = list(cur.hops)
        bisect.insort(hops, peer, key=self.order.__getitem__)
        limit = self.maxpaths[n]
        best = (offer, peer) if better else (cur.path, cur.best)
        return Selection(best[0], best[1], tuple(hops[:limit]), cur.spare or len(hops) > limit)


class _Convergence:
    """One prefix converging from a state (read-only) into `over` (the changes)."""

    def __init__(
        self,
        pv: PathVector,
        origins: Collection[str],
        state: Mapping[str, Selection],
        down: Collection[tuple[str, str, str]],
    ) -> None:
        self.pv, self.origins, self.state, self.down = pv, origins, state, down
        self.over: dict[str, Selection | None] = {}
        self.queue: deque[tuple[str, tuple[int, ...] | None]] = deque()
        """Routers whose advertisement changed, with the AS path they advertised before."""

    def get(self, r: str) -> Selection | None:
        return self.over[r] if r in self.over else self.state.get(r)

    def offer(self, n: str, peer: Peer) -> tuple[int, ...] | None:
        """The AS path `peer` advertises to n, unless the session is down or n refuses it."""
        r, port = peer
        chosen = self.get(r)
        if chosen is None or (n, r, port) in self.down:
            return None
        asn = self.pv.asn[n]
        if asn == self.pv.asn[r] or asn in chosen.path:
            return None
        return (self.pv.asn[r], *chosen.path)

    def select(self, n: str) -> Selection | None:
        """n's selection from all its neighbours' offers."""
        if n in self.origins:
            return ORIGIN
        offers = []
        for r, port, _ in self.pv.peers.get(n, []):
            path = self.offer(n, (r, port))
            if path is not None:
                offers.append((len(path), self.pv.order[(r, port)], (r, port), path))
        if not offers:
            return None
        length = min(o[0] for o in offers)
        equal = sorted(o[1:] for o in offers if o[0] == length)
        _, best, path = equal[0]
        if not self.pv.relax[n]:
            equal = [o for o in equal if o[2] == path]
        limit = self.pv.maxpaths[n]
        return Selection(path, best, tuple(o[1] for o in equal[:limit]), len(equal) > limit)

    def set(self, n: str, new: Selection | None) -> None:
        old = self.get(n)
        if new != old:
            self.over[n] = new
            if new is None or old is None or new.path != old.path:
                self.queue.append((n, None if old is None else old.path))

    def consider(self, n: str, peer: Peer) -> None:
        if n in self.origins:
            return
        cur, offer = self.get(n), self.offer(n, peer)
        new = self.pv.update(n, cur, peer, offer)
        if new is _RESELECT:
            new = self._promote(n, cur, peer) or self.select(n)
        self.set(n, new)

    def _promote(self, n: str, cur: Selection | None, lost: Peer) -> Selection | None:
        """When the best of several equal paths (multipath-relax, none spare) leaves, the next
        in rank is the best; None when that shortcut does not apply."""
        if cur is None or cur.best != lost or cur.spare or not self.pv.relax[n]:
            return None
        if len(cur.hops) < 2 or self.offer(n, lost) is not None:
            return None
        path = self.offer(n, cur.hops[1])
        if path is None or len(path) != len(cur.path):
            return None
        return Selection(path, cur.hops[1], cur.hops[1:], False)

    def drain(self) -> None:
        while self.queue:
            r, before = self.queue.popleft()
            now = self.get(r)
            for asn, group in self.pv.by_asn.get(r, []):
                if (before is None or asn in before) and (now is None or asn in now.path):
                    continue
                for n, peer, _ in group:
                    self.consider(n, peer)


@dataclass(frozen=True)
class Session:
    """An eBGP session both ends configure: `a` reaches `b` out of `a_port`, `b` back out of
    `b_port`."""

    a: str
    a_port: str
    b: str
    b_port: str


Ranked = dict[IPv4Network, tuple[int, Hops]]
"""Routes with their administrative distance."""


def _offer(routes: Ranked, prefix: IPv4Network, distance: int, hops: Hops) -> None:
    """Keep the route of lowest distance; equal distances add up (ECMP)."""
    known = routes.get(prefix)
    if known is None or distance < known[0]:
        routes[prefix] = (distance, hops)
    elif distance == known[0]:
        routes[prefix] = (distance, known[1] + tuple(h for h in hops if h not in known[1]))


def _diff(old: Routes, new: Routes) -> dict[IPv4Network, Hops | None]:
    changed: dict[IPv4Network, Hops | None] = {p: h for p, h in new.items() if old.get(p) != h}
    changed.update({p: None for p in old if p not in new})
    return changed


class Routing:
    """What a lab's configs make its routing converge to (`fib`), and how failing links
    change it (`after`).

    With `destinations`, eBGP is computed only for the prefixes covering them (and the
    gateways of recursive static routes): the FIB then serves traffic to those addresses.
    """

    def __init__(self, wiring: Wiring, destinations: Iterable[IPv4Address] | None = None) -> None:
        self.w = w = wiring
        self.down = frozenset(w.admin_down)
        self._subnets: dict[str, dict[int, dict[int, tuple[str, IPv4Address]]]] = {}
        for n, ifs in w.interfaces.items():
            for name, addresses in ifs.items():
                for a in addresses:
                    shift = 32 - a.network.prefixlen
                    by_shift = self._subnets.setdefault(n, {}).setdefault(shift, {})
                    by_shift[int(a.ip) >> shift] = (name, a.ip)
            self._subnets[n] = dict(sorted(self._subnets.get(n, {}).items()))
        self._hosts = sorted((int(h.address.ip), h.name) for h in w.hosts.values())
        self._svis = sorted(
            (int(ip), n) for ip, (n, i) in w.owner.items() if i in w.vlans.get(n, {})
        )
        self._hops: dict[tuple[str, tuple[Peer, ...]], Hops] = {}
        self.sessions = self._sessions()
        self._by_port: dict[tuple[str, str], list[Session]] = {}
        peers: dict[str, list[tuple[str, str, str]]] = {}
        for s in self.sessions:
            peers.setdefault(s.a, []).append((s.b, s.a_port, s.b_port))
            self._by_port.setdefault((s.a, s.a_port), []).append(s)
        self.pv = PathVector(w.routers, peers)
        self.by_interface = {
            n: {i: self._interface_routes(n, i, self.down) for i in w.interfaces[n]}
            for n in w.routers
        }
        """Connected routes of each switch, per interface."""
        self.connected = {n: _merged(self.by_interface[n].values()) for n in w.routers}
        networks = {p for r in w.routers.values() if r.bgp for p in r.bgp.networks}
        self.origins = {
            p: {n for n in w.routers if self._originates(n, p, self.connected[n], self.down)}
            for p in networks
        }
        self.prefixes = self._relevant(networks, destinations)
        self._down_sessions = self._sessions_down(self.sessions, self.down)
        self.bgp = {p: self.pv.solve(self.origins[p], self._down_sessions) for p in self.prefixes}
        self.learned = {n: self._learned(n, self.bgp) for n in w.routers}
        self.statics = {
            n: self._statics(n, self.down, self.connected[n], self.learned[n]) for n in w.routers
        }
        self.fib: Fib = {
            n: _table(self.connected[n], self.statics[n], self.learned[n]) for n in w.routers
        }
        self._shadowed = {n: self.connected[n].keys() | self.statics[n].keys() for n in w.routers}
        """Per switch, the prefixes a connected or static route may shadow eBGP on."""
        self._involved = {n for n in w.routers if self._recursive(n)}
        """Switches whose static routes resolve through other routes."""
        self.fib.update({h: w.host_routes(h, self.down) for h in w.hosts})

    def _sessions(self) -> list[Session]:
        """Sessions whose two ends name each other, with each other's AS, on a shared subnet."""
        w, found = self.w, []
        for a, router in w.routers.items():
            for address, asn in router.neighbors.items():
                here, owner = self._subnet_of(a, address), w.owner.get(address)
                if here is None or owner is None or owner[0] not in w.routers:
                    continue
                b = owner[0]
                mine, theirs = router.bgp, w.routers[b].bgp
                if mine is None or theirs is None or theirs.asn != asn or mine.asn == asn:
                    continue
                back = self._subnet_of(b, here[1])
                if back is None or w.routers[b].neighbors.get(here[1]) != mine.asn:
                    continue
                a_port, b_port = w.reach(a, here[0], b, ()), w.reach(b, back[0], a, ())
                if a_port and b_port:
                    found.append(Session(a, a_port, b, b_port))
        return found

    def _subnet_of(self, node: str, address: IPv4Address) -> tuple[str, IPv4Address] | None:
        """(interface, own address) of the node's subnet holding `address` (not its own),
        the longest first."""
        for shift, networks in self._subnets.get(node, {}).items():
            hit = networks.get(int(address) >> shift)
            if hit and hit[1] != address:
                return hit
        return None

    def _sessions_down(
        self, sessions: Iterable[Session], down: Collection[tuple[str, str]]
    ) -> frozenset[tuple[str, str, str]]:
        """(router, neighbour, local port) of both ends of each session that is down."""
        up = self.w.up
        return frozenset(
            end
            for s in sessions
            if not (up(s.a, s.a_port, down) and up(s.b, s.b_port, down))
            for end in ((s.a, s.b, s.a_port), (s.b, s.a, s.b_port))
        )

    def _interface_routes(self, n: str, iface: str, down: Collection[tuple[str, str]]) -> Routes:
        """Connected routes of one interface. A VLAN's subnet goes to the switches bridged to it
        that hold an address in it (the MLAG peer), its servers on their own ports as /32s."""
        w, routes = self.w, Routes()
        if iface.startswith("Loopback") or not w.up(n, iface, down):
            return routes
        if iface not in w.vlans[n]:
            far = w.far(n, iface)
            return {
                a.network: (NextHop(far[0], iface),) if far else ()
                for a in w.interfaces[n].get(iface, [])
            }
        for a in w.interfaces[n].get(iface, []):
            hops = (
                w.neighbor(n, iface, IPv4Address(ip), down)
                for ip, _ in _within(self._svis, a.network)
            )
            routes[a.network] = tuple(dict.fromkeys(h for h in hops if h))
            for address, server in _within(self._hosts, a.network):
                hop = w.neighbor(n, iface, IPv4Address(address), down)
                if hop and hop.node == server:
                    routes[IPv4Network(address)] = (hop,)
        return routes

    def _originates(
        self, n: str, prefix: IPv4Network, connected: Routes, down: Collection[tuple[str, str]]
    ) -> bool:
        """A `network` statement originates a prefix the RIB holds (connected, a loopback or
        a static route that needs no other route)."""
        bgp = self.w.routers[n].bgp
        if bgp is None or prefix not in bgp.networks:
            return False
        ifs = self.w.interfaces[n]
        loopbacks = {
            a.network for i, addrs in ifs.items() if i.startswith("Loopback") for a in addrs
        }
        return (
            prefix in connected
            or prefix in loopbacks
            or prefix in self._statics(n, down, connected, None)
        )

    def _relevant(
        self, networks: set[IPv4Network], destinations: Iterable[IPv4Address] | None
    ) -> list[IPv4Network]:
        """The originated prefixes covering the destinations or a recursive static gateway."""
        if destinations is None:
            return sorted(networks)
        wanted = {int(d) for d in destinations}
        wanted |= {int(s.gateway) for r in self.w.routers.values() for s in r.statics if s.gateway}
        ints = sorted(wanted)
        return [
            p
            for p in sorted(networks)
            if bisect.bisect_right(ints, int(p.broadcast_address))
            > bisect.bisect_left(ints, int(p.network_address))
        ]

    def _bgp_hops(
        self, n: str, chosen: Selection | None, cache: dict[tuple[str, tuple[Peer, ...]], Hops]
    ) -> Hops | None:
        """The FIB next hops of an eBGP selection (None when none or originated here); equal
        hops are one tuple per `cache`."""
        if chosen is None or chosen.best is None:
            return None
        key = (n, chosen.hops)
        if key not in cache:
            far = self.w.far
            cache[key] = tuple(
                NextHop(f[0], port) for _, port in chosen.hops if (f := far(n, port))
            )
        return cache[key]

    def _learned(
        self, n: str, chosen: Mapping[IPv4Network, Mapping[str, Selection]]
    ) -> dict[IPv4Network, Hops]:
        """n's eBGP routes (not the prefixes it originates)."""
        learned = {}
        for p in self.prefixes:
            hops = self._bgp_hops(n, chosen[p].get(n), self._hops)
            if hops is not None:
                learned[p] = hops
        return learned

    def _statics(
        self,
        n: str,
        down: Collection[tuple[str, str]],
        connected: Routes,
        learned: Mapping[IPv4Network, Hops] | None,
    ) -> Ranked:
        """Active static routes; a gateway off every connected subnet resolves through the
        connected and `learned` routes (not at all when None)."""
        w = self.w
        routes: Ranked = {}
        for s in w.routers[n].statics:
            hops: Hops | None = None
            if s.blackhole:
                hops = ()
            elif s.gateway is None:
                port = s.interface or ""
                far = w.far(n, port)
                hops = (NextHop(far[0], port),) if far and w.up(n, port, down) else None
            elif (here := self._subnet_of(n, s.gateway)) is not None:
                fits = s.interface in (None, here[0])
                hop = w.neighbor(n, here[0], s.gateway, down) if fits else None
                hops = (hop,) if hop else None
            elif learned is not None:
                hops = lookup({**learned, **connected}, s.gateway) or None
            if hops is not None:
                _offer(routes, s.prefix, s.distance, hops)
        return routes

    def _recursive(self, n: str) -> bool:
        """Whether a static route of n resolves through other routes."""
        statics = self.w.routers[n].statics
        return any(s.gateway and self._subnet_of(n, s.gateway) is None for s in statics)

    def _touched(self, ports: set[tuple[str, str]]) -> dict[str, set[str]]:
        """Per switch, the interfaces whose connected routes the `ports` going down may
        change: theirs, their VLANs, and the VLANs of switches bridged to those VLANs."""
        w = self.w
        touched: dict[str, set[str]] = defaultdict(set)
        for n, port in ports:
            if n not in w.routers:
                continue
            logical = w.logical(n, port)
            vlans = {v for v, members in w.vlans[n].items() if logical in members}
            touched[n] |= {logical} | vlans
            for v in vlans:
                for far in filter(None, (w.far(n, m) for m in w.vlans[n][v])):
                    if far[0] in w.routers:
                        theirs = w.vlans[far[0]].items()
                        touched[far[0]] |= {v2 for v2, members in theirs if far[1] in members}
        return touched

    def after(self, failed: Collection[Link]) -> FibDelta:
        """The FIB changes once the `failed` links are down (both ends lose carrier)."""
        w = self.w
        ports = {(a, pa) for a, pa, _, _ in failed} | {(b, pb) for _, _, b, pb in failed}
        down = self.down | ports
        connected: dict[str, Routes] = {}
        redo: dict[str, set[IPv4Network]] = defaultdict(set)
        for n, names in self._touched(ports).items():
            new = {i: self._interface_routes(n, i, down) for i in names}
            old = self.by_interface[n]
            if any(new[i] != old.get(i, {}) for i in names):
                others = (routes for i, routes in old.items() if i not in names)
                connected[n] = _merged([*others, *new.values()])
                redo[n] |= {p for i in names for p in old.get(i, {}).keys() | new[i].keys()}
        hit = {s for n, p in ports for s in self._by_port.get((n, w.logical(n, p)), [])}
        dead = self._sessions_down(hit, down) - self._down_sessions
        lost = [(a, (b, port)) for a, b, port in dead]
        flips = self._flips(connected, redo, down)
        delta: dict[str, dict[IPv4Network, Hops | None]] = defaultdict(dict)
        learned: dict[str, dict[IPv4Network, Hops | None]] = defaultdict(dict)
        cache: dict[tuple[str, tuple[Peer, ...]], Hops] = {}
        for p, chosen in self.bgp.items():
            flip = flips.get(p, set()) if flips else set()
            over = None if flip else self._shrink(chosen, lost)
            if over is None:
                origins = self.origins[p] ^ flip
                over = self.pv.converge(origins, chosen, self._down_sessions | dead, lost, flip)
            for n, now in over.items():
                was = chosen.get(n)
                if (
                    now
                    and was
                    and now.hops == was.hops
                    and (now.best is None) == (was.best is None)
                ):
                    continue
                hops = self._bgp_hops(n, now, cache)
                if hops == self.learned[n].get(p):
                    continue
                statics = n in self._involved or (n in connected and w.routers[n].statics)
                if statics or p in self._shadowed[n] or p in connected.get(n, {}):
                    learned[n][p] = hops
                else:
                    delta[n][p] = hops
        for n in redo.keys() | learned.keys():
            prefixes = redo.get(n, set()) | learned[n].keys()
            delta[n].update(self._entries(n, prefixes, down, connected, learned[n]))
        for h in {n for n, _ in ports} & w.hosts.keys():
            delta[h] = _diff(self.fib[h], w.host_routes(h, down))
        return {n: d for n, d in delta.items() if d}

    def _shrink(
        self, chosen: Mapping[str, Selection], lost: list[tuple[str, Peer]]
    ) -> dict[str, Selection | None] | None:
        """The changes when the lost peers only leave multipath sets (no router's advertised
        path changes); None when a full convergence is needed."""
        over: dict[str, Selection | None] = {}
        for n, peer in lost:
            was = over.get(n, chosen.get(n))
            if was is not None and peer in was.hops:
                now = self.pv.update(n, was, peer, None)
                if now is _RESELECT or now is None or now.path != was.path:
                    return None
                over[n] = now
        return over

    def _flips(
        self,
        connected: Mapping[str, Routes],
        redo: Mapping[str, set[IPv4Network]],
        down: Collection[tuple[str, str]],
    ) -> dict[IPv4Network, set[str]]:
        """Per prefix, the routers that start or stop originating it (their connected or
        static routes changed)."""
        flips: dict[IPv4Network, set[str]] = defaultdict(set)
        for n, routes in connected.items():
            bgp = self.w.routers[n].bgp
            statics = {s.prefix for s in self.w.routers[n].statics}
            for p in (redo[n] | statics) & set(bgp.networks if bgp else ()):
                if p in self.origins and self._originates(n, p, routes, down) != (
                    n in self.origins[p]
                ):
                    flips[p].add(n)
        return flips

    def _entries(
        self,
        n: str,
        prefixes: set[IPv4Network],
        down: Collection[tuple[str, str]],
        connected: Mapping[str, Routes],
        learned: Mapping[IPv4Network, Hops | None],
    ) -> dict[IPv4Network, Hops | None]:
        """n's FIB entries that change among `prefixes`, with new connected and eBGP routes."""
        conn, statics = connected.get(n, self.connected[n]), self.statics[n]
        if self.w.routers[n].statics and (n in connected or (learned and n in self._involved)):
            now = {p: h for p, h in {**self.learned[n], **learned}.items() if h is not None}
            statics = self._statics(n, down, conn, now)
            prefixes = prefixes | statics.keys() | self.statics[n].keys()
        changes = {}
        for p in prefixes:
            bgp = learned[p] if p in learned else self.learned[n].get(p)
            if p in conn or p in statics:
                entry = _table({p: conn[p]} if p in conn else {}, statics, {p: bgp} if bgp else {})
                bgp = entry.get(p)
            if bgp != self.fib[n].get(p):
                changes[p] = bgp
        return changes


def _within(addresses: list[tuple[int, str]], network: IPv4Network) -> list[tuple[int, str]]:
    """The (address, owner) pairs of a sorted list inside a network."""
    low = bisect.bisect_left(addresses, (int(network.network_address), ""))
    high = bisect.bisect_right(addresses, (int(network.broadcast_address), "~"))
    return addresses[low:high]


def _merged(parts: Iterable[Routes]) -> Routes:
    merged: Routes = {}
    for routes in parts:
        merged.update(routes)
    return merged


def _table(connected: Routes, statics: Ranked, learned: Mapping[IPv4Network, Hops]) -> Routes:
    """Per prefix, the route of lowest distance: connected, static or eBGP."""
    routes: Ranked = {p: (CONNECTED, h) for p, h in connected.items()}
    for p, (d, h) in statics.items():
        _offer(routes, p, d, h)
    for p, h in learned.items():
        _offer(routes, p, EBGP, h)
    return {p: h for p, (_, h) in routes.items()}


def from_snapshot(wiring: Wiring, snapshot: Mapping[str, list[dict[str, Any]]]) -> Fib:
    """The FIB of a live twin: each switch's `ip -j route` (as `twin.observations` saves it),
    servers' routes from their host files (the snapshot does not hold them).

    A device name maps back to its port through `ifmap.json`; a next hop is the neighbour
    cabled to that port; next hops flagged `linkdown` or `dead` are left out, as the kernel
    ignores them.
    """
    fib: Fib = {h: wiring.host_routes(h, wiring.admin_down) for h in wiring.hosts}
    for switch, entries in snapshot.items():
        ports = {names["netns"]: port for port, names in wiring.lab.ifmap.get(switch, {}).items()}
        routes: Routes = {}
        for entry in entries:
            dst = entry.get("dst", "")
            if ":" in dst or entry.get("type", "unicast") not in ("unicast", "blackhole"):
                continue
            prefix = IPv4Network("0.0.0.0/0" if dst == "default" else dst)
            hops = []
            for hop in entry.get("nexthops") or (
                [] if entry.get("type") == "blackhole" else [entry]
            ):
                port = wiring.logical(switch, ports.get(hop.get("dev", ""), hop.get("dev", "")))
                far = wiring.far(switch, port)
                if far and not {"linkdown", "dead"} & set(hop.get("flags", [])):
                    hops.append(NextHop(far[0], port))
            if hops or entry.get("type") == "blackhole":
                routes[prefix] = tuple(hops)
        fib[switch] = routes
    return fib
