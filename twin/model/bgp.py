"""The eBGP path-vector engine: `PathVector` selects, one prefix at a time over fixed
sessions, each router's best AS path and multipath set (`Selection`), from scratch or
converging again from a solved state after a change (sessions down, origins changed).

Without routing policy the shortest AS path wins and the engine takes shortcuts that hold for
shortest paths; with policy (`Rules`: per session and direction, `twin.model.policy`) every
change is a full reselection among the offers as policy leaves them: highest weight, then
highest local preference, then shortest AS path, then the peer's rank.
"""

from __future__ import annotations

import bisect
from collections import defaultdict, deque
from collections.abc import Collection, Iterable, Mapping
from ipaddress import IPv4Network
from typing import NamedTuple

from twin.model.policy import NO_EXPORT, Attrs, Filters
from twin.model.wiring import Router

Peer = tuple[str, str]
"""A BGP neighbour as a router sees it: (neighbour, local port of the session)."""
Rules = Mapping[tuple[str, Peer], tuple[Filters, Filters, bool]]
"""Per receiving router and the peer it hears: the peer's outbound filters toward it, its own
inbound filters, and whether the peer sends communities."""
NONE = Filters()
Offer = tuple[str, str, str, tuple[int, ...], frozenset[str]]
"""An offer as received: receiver, peer, its port, the AS path and communities it advertises."""
RECEIVED = 1 << 17
"""How many policy verdicts on an offer a PathVector keeps."""


class Selection(NamedTuple):
    """A router's eBGP choice for one prefix."""

    path: tuple[int, ...]
    """AS path of the best route as received; () when the router originates the prefix."""
    best: Peer | None
    hops: tuple[Peer, ...]
    """Multipath neighbours, in tie-break order."""
    spare: bool
    """Equal paths beyond maximum-paths exist (they may step in when a hop leaves)."""
    communities: frozenset[str] = frozenset()
    weight: int = 0
    pref: int = 100
    """Weight and local preference of the best route (policy may set them)."""


ORIGIN = Selection((), None, (), False)
RESELECT = Selection((-1,), None, (), False)


class PathVector:
    """eBGP over fixed sessions, one prefix at a time: `solve` from scratch (breadth first,
    layer k holds the routers whose best path is k ASes long), `converge` from a solved state
    after a change (each change of a router's choice is offered to its neighbours, which
    mostly update in O(1) and reselect from all offers only when their best route is lost).

    `peers[r]` lists r's sessions as (neighbour, local port, neighbour's port); r knows a
    neighbour as the `Peer` (neighbour, local port). With `rules` (policy on some session)
    both converge from the origins outward and every router an advertisement reaches
    reselects among all its offers as policy leaves them (`receive`, `choose`).
    """

    def __init__(
        self,
        routers: Mapping[str, Router],
        peers: Mapping[str, list[tuple[str, str, str]]],
        rules: Rules | None = None,
    ) -> None:
        self.peers = peers
        self.rules = rules or {}
        self._received: dict[IPv4Network, dict[Offer, Attrs | None]] = {}
        self._kept = 0
        self.policies = {r: c.policy for r, c in routers.items()}
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
        self,
        origins: Collection[str],
        down: Collection[tuple[str, str, str]],
        prefix: IPv4Network,
    ) -> dict[str, Selection]:
        """Every router's selection, sessions (router, neighbour, port) in `down` down."""
        if self.rules:
            run = _Convergence(self, origins, {}, down, prefix)
            for n in sorted(origins):
                run.set(n, ORIGIN)
            run.drain()
            return {n: c for n, c in run.over.items() if c is not None}
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
        prefix: IPv4Network,
    ) -> dict[str, Selection | None]:
        """The selections that differ from a solved `state` once converged again, sessions in
        `down` down (`lost`: each end's peer of the sessions that just went down) and the
        routers in `reselect` changing what they originate."""
        run = _Convergence(self, origins, state, down, prefix)
        for n, peer in lost:
            run.consider(n, peer)
        for n in reselect:
            run.set(n, run.select(n))
        run.drain()
        return run.over

    def verdicts(self, prefix: IPv4Network) -> dict[Offer, Attrs | None]:
        """The offers of `prefix` already received (`receive`'s attributes by receiver, peer
        and what the peer advertises), kept while fewer than `RECEIVED` are: the same offers
        come back at every failure."""
        if self._kept >= RECEIVED:
            return {}
        return self._received.setdefault(prefix, {})

    def receive(
        self, n: str, peer: Peer, chosen: Selection, prefix: IPv4Network
    ) -> tuple[Attrs | None, str, str]:
        """What n holds of the route `peer` selected once policy applied both ways: the
        attributes (None: none), and when policy denied or changed it, the statement and
        the router it is on."""
        r = peer[0]
        if self.asn[n] == self.asn[r]:
            return None, "", ""
        out, inbound, send = self.rules.get((n, peer), (NONE, NONE, True))
        attrs = Attrs(chosen.path, chosen.communities)
        if attrs.communities & NO_EXPORT:
            return None, f"community {min(attrs.communities & NO_EXPORT)}", r
        held, why = self.policies[r].apply(out, prefix, attrs, "out")
        if held is None:
            return None, why, r
        path = (self.asn[r], *held.path)
        if self.asn[n] in path:
            return None, "", ""
        changed = (why, r) if why else ("", "")
        got = Attrs(path, held.communities if send else frozenset())
        held, why = self.policies[n].apply(inbound, prefix, got, "in")
        if held is None:
            return None, why, n
        return held, *((why, n) if why else changed)

    def choose(self, n: str, offers: Mapping[Peer, Attrs]) -> Selection | None:
        """n's selection among the offers (by peer) as policy left them."""
        if not offers:
            return None
        ranks = {p: _rank(a) for p, a in offers.items()}
        top = min(ranks.values())
        tied = sorted((p for p, r in ranks.items() if r == top), key=self.order.__getitem__)
        peer, best = tied[0], offers[tied[0]]
        equal = tied if self.relax[n] else [p for p in tied if offers[p].path == best.path]
        limit = self.maxpaths[n]
        hops = tuple(equal[:limit])
        return Selection(
            best.path, peer, hops, len(equal) > limit, best.communities, best.weight, best.pref
        )

    def policed(
        self,
        n: str,
        cur: Selection | None,
        offers: Mapping[Peer, Attrs],
        peer: Peer,
        old: Attrs | None,
    ) -> Selection | None:
        """n's selection once `peer`'s offer changed from `old` to `offers.get(peer)`: in
        O(1) where the change cannot move the best route, else `choose`."""
        new = offers.get(peer)
        if cur is None or cur.best is None or peer in cur.hops:
            return self.choose(n, offers)
        mine = (-cur.weight, -cur.pref, len(cur.path))
        if old is not None and _rank(old) == mine:
            return self.choose(n, offers)  # it may have been a path beyond maximum-paths
        if new is None or _rank(new) > mine:
            return cur
        if _rank(new) < mine:
            return Selection(new.path, peer, (peer,), False, new.communities, new.weight, new.pref)
        if self.order[peer] < self.order[cur.best]:
            return self.choose(n, offers)
        if not self.relax[n] and new.path != cur.path:
            return cur
        hops = list(cur.hops)
        bisect.insort(hops, peer, key=self.order.__getitem__)
        limit = self.maxpaths[n]
        return cur._replace(hops=tuple(hops[:limit]), spare=cur.spare or len(hops) > limit)

    def update(
        self, n: str, cur: Selection | None, peer: Peer, offer: tuple[int, ...] | None
    ) -> Selection | None:
        """n's selection once `peer` offers `offer`, or RESELECT when only a full
        reselection can tell."""
        if cur is None:
            return None if offer is None else Selection(offer, peer, (peer,), False)
        if cur.best is None:
            return RESELECT
        length, relax = len(cur.path), self.relax[n]
        if offer is not None and len(offer) < length:
            return Selection(offer, peer, (peer,), False)
        if peer in cur.hops:
            if offer is not None and len(offer) == length:
                if peer == cur.best:
                    return Selection(offer, peer, cur.hops, cur.spare) if relax else RESELECT
                if relax or offer == cur.path:
                    return cur
            if peer == cur.best or cur.spare:
                return RESELECT
            i = cur.hops.index(peer)
            return Selection(cur.path, cur.best, cur.hops[:i] + cur.hops[i + 1 :], False)
        if offer is None or len(offer) > length:
            return cur
        better = self.order[peer] < self.order[cur.best]
        if not relax and (better or offer != cur.path):
            return RESELECT if better else cur
        hops = list(cur.hops)
        bisect.insort(hops, peer, key=self.order.__getitem__)
        limit = self.maxpaths[n]
        best = (offer, peer) if better else (cur.path, cur.best)
        return Selection(best[0], best[1], tuple(hops[:limit]), cur.spare or len(hops) > limit)


def _rank(a: Attrs) -> tuple[int, int, int]:
    """What selects among routes before the peer's rank: weight, local preference (both
    highest first), AS path length."""
    return (-a.weight, -a.pref, len(a.path))


class _Convergence:
    """One prefix converging from a state (read-only) into `over` (the changes)."""

    def __init__(
        self,
        pv: PathVector,
        origins: Collection[str],
        state: Mapping[str, Selection],
        down: Collection[tuple[str, str, str]],
        prefix: IPv4Network,
    ) -> None:
        self.pv, self.origins, self.state, self.down = pv, origins, state, down
        self.prefix = prefix
        self.rib: dict[str, dict[Peer, Attrs]] = {}
        """Under policy: the offers each router considered holds, by peer."""
        self.verdicts = pv.verdicts(prefix) if pv.rules else {}
        self.budget = 64 * (len(pv.asn) + 16)
        """Changes of advertisement a policy run may make before it stops (a policy dispute
        that never settles: FRR would oscillate too)."""
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
        if self.pv.rules:
            return self.pv.choose(n, self._received(n))
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

    def _received(self, n: str) -> dict[Peer, Attrs]:
        """Every offer n holds once policy applied, by peer (kept as n's `rib`)."""
        rib = {}
        for r, port, _ in self.pv.peers.get(n, []):
            attrs = self._policed_offer(n, (r, port))
            if attrs is not None:
                rib[(r, port)] = attrs
        self.rib[n] = rib
        return rib

    def _policed_offer(self, n: str, peer: Peer) -> Attrs | None:
        r, port = peer
        chosen = self.get(r)
        if chosen is None or (n, r, port) in self.down:
            return None
        key = (n, r, port, chosen.path, chosen.communities)
        if key in self.verdicts:
            return self.verdicts[key]
        attrs = self.pv.receive(n, peer, chosen, self.prefix)[0]
        if self.pv._kept < RECEIVED:
            self.verdicts[key] = attrs
            self.pv._kept += 1
        return attrs

    def set(self, n: str, new: Selection | None) -> None:
        old = self.get(n)
        if new != old:
            self.over[n] = new
            if (
                new is None
                or old is None
                or new.path != old.path
                or new.communities != old.communities
            ):
                self.queue.append((n, None if old is None else old.path))

    def consider(self, n: str, peer: Peer) -> None:
        if n in self.origins:
            return
        if self.pv.rules:
            self.set(n, self._policed(n, peer))
            return
        cur, offer = self.get(n), self.offer(n, peer)
        new = self.pv.update(n, cur, peer, offer)
        if new is RESELECT:
            new = self._promote(n, cur, peer) or self.select(n)
        self.set(n, new)

    def _policed(self, n: str, peer: Peer) -> Selection | None:
        """n's selection once `peer`'s offer may have changed, under policy."""
        rib = self.rib.get(n)
        if rib is None:
            return self.pv.choose(n, self._received(n))
        old = rib.pop(peer, None)
        offer = self._policed_offer(n, peer)
        if offer is not None:
            rib[peer] = offer
        return self.pv.policed(n, self.get(n), rib, peer, old)

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
            if self.pv.rules:
                self.budget -= 1
                if self.budget < 0:
                    return
            r, before = self.queue.popleft()
            now = self.get(r)
            for asn, group in self.pv.by_asn.get(r, []):
                if (before is None or asn in before) and (now is None or asn in now.path):
                    continue
                for n, peer, _ in group:
                    self.consider(n, peer)
