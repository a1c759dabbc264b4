"""What a lab's configs (as `twin.model.wiring.Wiring` reads them) make routing converge to
(`Routing`):

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
  same AS path, up to `maximum-paths` (64 when unset). Routing policy per session and
  direction (`twin.model.policy`: prefix-lists, filter-lists, route-maps) filters and changes
  the routes first; weight and local preference then come before the AS path's length.
  Sessions between equal ASes (iBGP) are not modelled.
- a server sends to its own subnet over every up NIC, elsewhere by its host file's routes; a
  NIC's next hop is the leaf it is cabled to (MLAG leaves route for each other's gateway).

`Routing.after(failed)` gives the FIB changes when links fail, incrementally: an eBGP
path-vector converges from the state before the failure (without policies shortest-path eBGP
has one stable state, reached from any start; with policy each change is a full reselection).
"""

from __future__ import annotations

import bisect
import threading
from collections import defaultdict
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network

from twin.lab.directory import Lab
from twin.model.bgp import NONE, RESELECT, PathVector, Peer, Rules, Selection
from twin.model.fib import Fib, FibDelta, Hops, Link, NextHop, Routes, lookup
from twin.model.policy import Filters
from twin.model.wiring import CONNECTED, EBGP, Wiring
from twin.model.wiring import shared as shared_wiring


@dataclass(frozen=True)
class Session:
    """An eBGP session both ends configure: `a` reaches `b` (at `address`) out of `a_port`,
    `b` back out of `b_port`."""

    a: str
    a_port: str
    b: str
    b_port: str
    address: IPv4Address


class Prefix(IPv4Network):
    """An IPv4Network that computes its hash once (`ipaddress` computes it from two integers
    on every call; a failure's convergence hashes each prefix it changes tens of times:
    spine to super-spine failures at 4,096 servers 25 % faster). Equal to, hashed, ordered,
    pickled and written as the network.

    >>> p = Prefix("10.1.0.0/16")
    >>> p == IPv4Network("10.1.0.0/16"), hash(p) == hash(IPv4Network("10.1.0.0/16")), p
    (True, True, IPv4Network('10.1.0.0/16'))
    """

    def __init__(self, network: IPv4Network | str) -> None:
        super().__init__(network)
        self._hash = super().__hash__()

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"IPv4Network({str(self)!r})"


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


_SHARED: dict[str, Routing] = {}
"""The last shared Routing (its `w` says which Wiring it is of)."""
_BUILDING = threading.Lock()
"""Held while it is looked up or built (readers in two threads share one)."""

MEMO = 32768
"""How many `after` results a Routing keeps: every single-link failure of a large lab, which
the static `deadlock` and `fib_reachability` both ask for (6,662 links at 1,024 servers, about
30 MB of deltas; 4,096 kept only the first 4,096, the rest converged twice)."""


def shared(lab: Lab) -> Routing:
    """The Routing toward the lab's servers on its shared Wiring (`twin.model.wiring.shared`),
    built once for the readers of one lab (the static validators), with the `after` results
    they ask for kept. Readers must not change it nor the deltas it returns."""
    wiring = shared_wiring(lab)
    with _BUILDING:
        routing = _SHARED.get("last")
        if routing is None or routing.w is not wiring:
            routing = Routing(wiring, [h.address.ip for h in wiring.hosts.values()])
            _SHARED["last"] = routing
        return routing


class _Union(Collection[tuple[str, str]]):
    """Two sets of ports read as one (membership, iteration, size) without copying them."""

    def __init__(self, few: Collection[tuple[str, str]], many: Collection[tuple[str, str]]):
        self.few, self.many = few, many

    def __contains__(self, port: object) -> bool:
        return port in self.few or port in self.many

    def __iter__(self) -> Iterator[tuple[str, str]]:
        yield from self.many
        yield from (p for p in self.few if p not in self.many)

    def __len__(self) -> int:
        return len(self.many) + sum(p not in self.many for p in self.few)


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
        self._host_prefix = {a: IPv4Network(a) for a, _ in self._hosts}
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
        self.pv = PathVector(w.routers, peers, self._rules())
        self.by_interface = {
            n: {i: self._interface_routes(n, i, self.down) for i in w.interfaces[n]}
            for n in w.routers
        }
        """Connected routes of each switch, per interface."""
        self.connected = {n: _merged(self.by_interface[n].values()) for n in w.routers}
        self._holders: dict[str, dict[IPv4Network, list[str]]] = {}
        """Per switch, the interfaces whose connected routes hold each prefix, in order."""
        for n, by_interface in self.by_interface.items():
            holders = self._holders[n] = {}
            for name, routes in by_interface.items():
                for p in routes:
                    holders.setdefault(p, []).append(name)
        networks: set[IPv4Network] = {
            Prefix(p) for r in w.routers.values() if r.bgp for p in r.bgp.networks
        }
        self.origins = {
            p: {n for n in w.routers if self._originates(n, p, self.connected[n], self.down)}
            for p in networks
        }
        self.prefixes = self._relevant(networks, destinations)
        self._down_sessions = self._sessions_down(self.sessions, self.down)
        self.bgp = {
            p: self.pv.solve(self.origins[p], self._down_sessions, p) for p in self.prefixes
        }
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
        self._after: dict[tuple[tuple[str, ...], ...], FibDelta] = {}
        self._order = list(self.bgp)
        self._through_at: dict[str, dict[Peer, list[int]]] = {}

    def _through(self, n: str, peer: Peer) -> list[int]:
        """The prefixes (by `bgp` order) whose multipath set at router n holds the peer (the
        only ones its loss can change without policy: `_shrink`). Indexed a router at a time,
        when a failure there is first converged: every router's index at 4,096 servers holds
        7.7 M entries (3-5 s), and a run's faults ask for a few routers'."""
        at = self._through_at.get(n)
        if at is None:
            at = defaultdict(list)
            for i, chosen in enumerate(self.bgp.values()):
                selection = chosen.get(n)
                for hop in selection.hops if selection is not None else ():
                    at[hop].append(i)
            self._through_at[n] = at
        return at.get(peer, [])

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
                    found.append(Session(a, a_port, b, b_port, address))
        return found

    def _rules(self) -> Rules:
        """The policy of every session that has some (`twin.model.bgp.Rules`)."""
        configs = [r.bgp for r in self.w.routers.values() if r.bgp]
        if not any(b.bound or b.requires_policy or b.no_communities for b in configs):
            return {}
        out: dict[tuple[str, Peer], Filters] = {}
        inbound: dict[tuple[str, Peer], Filters] = {}
        sends: dict[tuple[str, Peer], bool] = {}
        for s in self.sessions:
            bgp = self.w.routers[s.a].bgp
            assert bgp is not None  # a session has BGP on both ends
            inbound[(s.a, (s.b, s.a_port))] = bgp.filters(str(s.address), "in")
            out[(s.b, (s.a, s.b_port))] = bgp.filters(str(s.address), "out")
            sends[(s.b, (s.a, s.b_port))] = bgp.sends_communities(str(s.address))
        keys = inbound.keys() | out.keys()
        rules = {k: (out.get(k, NONE), inbound.get(k, NONE), sends.get(k, True)) for k in keys}
        return {k: r for k, r in rules.items() if r != (NONE, NONE, True)}

    def policy_effects(self, prefix: IPv4Network) -> list[tuple[str, str, str, str]]:
        """With all links up, each (switch, neighbour, statement, what) by which routing
        policy denied a route to `prefix`, or changed it so that the switch left it out or
        preferred it over others; and each switch whose `maximum-paths` left equal paths out
        (neighbour "")."""
        chosen, pv, found = self.bgp.get(prefix, {}), self.pv, []
        for n, sessions in pv.peers.items():
            mine = chosen.get(n)
            if mine is not None and mine.spare:
                what = f"{prefix}: only {len(mine.hops)} of its equal paths used"
                found.append((n, "", f"maximum-paths {pv.maxpaths[n]}", what))
            offers = []
            for r, port, _ in sessions if pv.rules else ():
                theirs = chosen.get(r)
                if theirs is not None and (n, r, port) not in self._down_sessions:
                    offers.append(((r, port), *pv.receive(n, (r, port), theirs, prefix)))
            used = set(mine.hops) if mine else set()
            left_out = sum(attrs is not None and peer not in used for peer, attrs, _, _ in offers)
            for peer, attrs, why, who in offers:
                r = peer[0]
                if not why:
                    continue
                if attrs is None:
                    what = "denied"
                elif peer not in used:
                    what = "changed, not used"
                elif left_out:
                    what = f"changed, preferred over {left_out} other paths"
                else:
                    continue
                if who == r:
                    found.append((r, n, why, f"{prefix} to {n}: {what}"))
                else:
                    found.append((n, r, why, f"{prefix} from {r}: {what}"))
        return found

    def covering(self, address: IPv4Address) -> IPv4Network | None:
        """The longest eBGP prefix routed that holds an address."""
        held = [p for p in self.prefixes if address in p]
        return max(held, key=lambda p: p.prefixlen, default=None)

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
        neighbor = w.neighbors(n, iface, down)
        for a in w.interfaces[n].get(iface, []):
            hops = (neighbor(ip) for ip, _ in _within(self._svis, a.network))
            routes[a.network] = tuple(dict.fromkeys(h for h in hops if h))
            for address, server in _within(self._hosts, a.network):
                hop = neighbor(address)
                if hop and hop.node == server:
                    routes[self._host_prefix[address]] = (hop,)
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
        """The FIB changes once the `failed` links are down (both ends lose carrier); the
        same links (in the same order) give the same delta object, of the first `MEMO` asked
        for: do not change it."""
        key = tuple(map(tuple, failed))
        known = self._after.get(key)
        if known is None:
            known = self._converge(failed)
            if len(self._after) < MEMO:
                self._after[key] = known
        return known

    def _converge(self, failed: Collection[Link]) -> FibDelta:
        w = self.w
        ports = {(a, pa) for a, pa, _, _ in failed} | {(b, pb) for _, _, b, pb in failed}
        # not a copy of every admin-down port per failure (and no wrapper when there are none)
        down: Collection[tuple[str, str]] = _Union(ports, self.down) if self.down else ports
        connected: dict[str, Routes] = {}
        redo: dict[str, set[IPv4Network]] = defaultdict(set)
        for n, names in self._touched(ports).items():
            new = {i: self._interface_routes(n, i, down) for i in names}
            old = self.by_interface[n]
            changed = {p for i in names for p in _changed(old.get(i, {}), new[i])}
            if changed:
                connected[n] = self._patched(n, new, changed)
                redo[n] |= changed
        hit = {s for n, p in ports for s in self._by_port.get((n, w.logical(n, p)), [])}
        dead = self._sessions_down(hit, down) - self._down_sessions
        lost = [(a, (b, port)) for a, b, port in dead]
        flips = self._flips(connected, redo, down)
        delta: dict[str, dict[IPv4Network, Hops | None]] = defaultdict(dict)
        learned: dict[str, dict[IPv4Network, Hops | None]] = defaultdict(dict)
        cache: dict[tuple[str, tuple[Peer, ...]], Hops] = {}
        for p in self._changing(flips, lost):
            chosen = self.bgp[p]
            flip = flips.get(p, set()) if flips else set()
            over = None if flip else self._shrink(chosen, lost)
            if over is None:
                origins = self.origins[p] ^ flip
                down_now = self._down_sessions | dead
                over = self.pv.converge(origins, chosen, down_now, lost, flip, p)
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

    def _patched(self, n: str, new: Mapping[str, Routes], changed: set[IPv4Network]) -> Routes:
        """n's connected routes with the `new` routes of some interfaces, where they differ
        from before at the `changed` prefixes: as if all were merged again in order, the
        interfaces not redone first (a copy of the merged routes, not a merge of each)."""
        routes = dict(self.connected[n])
        for p in changed:
            found = [r[p] for r in new.values() if p in r]
            if not found:
                others = self.by_interface[n]
                found = [others[i][p] for i in self._holders[n].get(p, ()) if i not in new]
            if found:
                routes[p] = found[-1]
            else:
                routes.pop(p, None)
        return routes

    def _changing(
        self, flips: Mapping[IPv4Network, set[str]], lost: list[tuple[str, Peer]]
    ) -> Iterable[IPv4Network]:
        """The prefixes a failure may change, in `bgp` order: every one under policy, else
        those whose origins flip or whose multipath sets hold a lost peer (for the others
        `_shrink` finds no change)."""
        if self.pv.rules:
            return self._order
        some = {i for n, peer in lost for i in self._through(n, peer)}
        if flips:
            some |= {i for i, p in enumerate(self._order) if p in flips}
        return [self._order[i] for i in sorted(some)]

    def _shrink(
        self, chosen: Mapping[str, Selection], lost: list[tuple[str, Peer]]
    ) -> dict[str, Selection | None] | None:
        """The changes when the lost peers only leave multipath sets (no router's advertised
        path changes); None when a full convergence is needed (always under policy)."""
        if self.pv.rules:
            return None
        over: dict[str, Selection | None] = {}
        for n, peer in lost:
            was = over.get(n, chosen.get(n))
            if was is not None and peer in was.hops:
                now = self.pv.update(n, was, peer, None)
                if now is RESELECT or now is None or now.path != was.path:
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


def _changed(old: Routes, new: Routes) -> list[IPv4Network]:
    """The prefixes whose routes differ; without hashing them when both hold the same prefix
    objects in the same order (an interface's routes computed again: most failures change
    none of them)."""
    if len(old) == len(new) and all(a is b for a, b in zip(old, new, strict=True)):
        return [p for (p, a), b in zip(old.items(), new.values(), strict=True) if a != b]
    return [p for p, h in old.items() if new.get(p) != h] + [p for p in new if p not in old]


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
