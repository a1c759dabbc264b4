"""`fib_reachability`: every leaf reaches every server, over full ECMP, in the FIBs the configs
converge to, with all links up and after every single-link failure."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Collection, Iterable, Iterator
from ipaddress import IPv4Address, IPv4Network
from itertools import combinations

from twin.design.graph import remote_subnets, uplink_width
from twin.lab.directory import Lab
from twin.model.fib import Fib, FibDelta, Link, Lpm
from twin.model.routing import Routing, shared
from twin.model.wiring import links
from validators.registry import Params, static
from validators.result import Finding, Result, verdict
from validators.static.deadlock import link_name

GOOD = ""


class Walk:
    """Where packets to one address go from each switch of a FIB: GOOD when every ECMP branch
    delivers them, else why not (a black hole or a loop, with the switch where it happens)."""

    def __init__(self, lpms: dict[str, Lpm], address: IPv4Address, owner: str) -> None:
        self.lpms, self.address, self.owner = lpms, int(address), owner
        self.verdicts: dict[str, str] = {owner: GOOD}
        self.open: set[str] = set()

    def __call__(self, node: str) -> str:
        """GOOD, or the first problem on the way from `node`."""
        known = self.verdicts.get(node)
        if known is not None:
            return known
        if node in self.open:
            return f"loops back to {node}"
        lpm = self.lpms.get(node)
        if lpm is None:
            return f"reaches {node}, not {self.owner}"
        self.open.add(node)
        hops = lpm(self.address)
        why = GOOD
        if not hops:
            why = f"black hole at {node} ({'no route' if hops is None else 'dropped'})"
        else:
            verdicts = self.verdicts
            for hop in hops:
                known = verdicts.get(hop.node)
                why = self(hop.node) if known is None else known
                if why:
                    break
        self.open.discard(node)
        self.verdicts[node] = why
        return why


BAD = None
"""A switch from which the class's walk met a problem (`_Classes`)."""


class _Classes:
    """Which servers every leaf provably delivers to, found per class of servers that the FIBs
    route alike, not per server: a walk per server visits every switch, leaves x servers
    walks (1.1 M at 4,096 servers), where what differs between servers of one subnet is the
    few switches holding a route that matches only one of them (its leaves' /32s).

    A route is the server's own when its prefix holds no other server's address; a class is
    the servers every other prefix of every table holds alike, so that at a switch holding
    none of their own routes (a class's ordinary switch) every one of them matches the same
    route. The class walks its ordinary switches once, each to the set of the class's other
    switches and servers it ends at (its frontier), no black hole, no loop and nothing else
    on the way; each server then walks only the rest (`delivered`), with its own lookups. A
    server is proven delivered exactly when `Walk` would find no problem from any leaf; any
    other goes to `Walk`, which says what and where."""

    def __init__(self, lpms: dict[str, Lpm], addresses: dict[str, int]) -> None:
        self.lpms, self.addresses = lpms, addresses
        ordered = sorted((a, s) for s, a in addresses.items())
        ints = [a for a, _ in ordered]
        held: dict[tuple[int, int], tuple[int, int]] = {}
        self.own: dict[str, set[str]] = {s: set() for s in addresses}
        """Per server, the switches holding a route that matches it and no other server."""
        for node, lpm in lpms.items():
            for shift, table in lpm.tables.items():
                for key in table:
                    span = held.get((shift, key))
                    if span is None:
                        low = key << shift
                        span = (bisect_left(ints, low), bisect_left(ints, low + (1 << shift)))
                        held[(shift, key)] = span
                    if span[1] - span[0] == 1:
                        self.own[ordered[span[0]][1]].add(node)
        alike: list[list[tuple[int, int]]] = [[] for _ in ordered]
        for span in held.values():
            if span[1] - span[0] > 1:
                for i in range(*span):
                    alike[i].append(span)
        groups: dict[tuple[tuple[int, int], ...], list[str]] = {}
        for i, (_, server) in enumerate(ordered):
            groups.setdefault(tuple(sorted(alike[i])), []).append(server)
        self.classes = list(groups.values())

    def delivered(self, leaves: list[str]) -> set[str]:
        """The servers every leaf delivers to along every branch."""
        addresses, found = self.addresses, set[str]()
        for members in self.classes:
            special = set().union(*(self.own[s] for s in members))
            frontier = self._frontiers(special, addresses[members[0]])
            starts = {leaf for leaf in leaves if leaf in special}
            for leaf in leaves:
                ends = frontier(leaf) if leaf not in special else frozenset()
                if ends is BAD:
                    break
                starts |= ends
            else:
                found.update(
                    s for s in members if self._reaches(s, addresses[s], starts, special, frontier)
                )
        return found

    def _frontiers(self, special: set[str], address: int) -> Callable[[str], frozenset[str] | None]:
        """A class's ordinary switch -> what its walk ends at (BAD: a problem on the way),
        each found once, when first asked for."""
        lpms, open_ = self.lpms, set()
        memo: dict[str, frozenset[str] | None] = {}

        def frontier(node: str) -> frozenset[str] | None:
            if node in memo:
                return memo[node]
            if node in open_:
                return BAD
            open_.add(node)
            hops, ends = lpms[node](address), set()
            result: frozenset[str] | None = BAD
            if hops:
                for hop in hops:
                    if hop.node in special or hop.node not in lpms:
                        ends.add(hop.node)
                        continue
                    further = memo[hop.node] if hop.node in memo else frontier(hop.node)
                    if further is BAD:
                        break
                    ends |= further
                else:
                    result = frozenset(ends)
            open_.discard(node)
            memo[node] = result
            return result

        return frontier

    def _reaches(
        self,
        server: str,
        address: int,
        starts: Iterable[str],
        special: set[str],
        frontier: Callable[[str], frozenset[str] | None],
    ) -> bool:
        """Whether everything the leaves' walks reach (`starts`: the class's special leaves and
        what its ordinary ones end at) delivers to `server`: the class's special switches walked
        with its own lookups, its ordinary ones by their frontiers."""
        lpms, done, open_ = self.lpms, set(), set()

        def good(node: str) -> bool:
            if node == server or node in done:
                return True
            if node not in lpms or node in open_:
                return False
            if node not in special:
                ends = frontier(node)
                return ends is not BAD and all(good(end) for end in ends)
            open_.add(node)
            hops = lpms[node](address) or ()
            ok = bool(hops) and all(good(hop.node) for hop in hops)
            open_.discard(node)
            if ok:
                done.add(node)
            return ok

        return all(good(start) for start in starts)


def _problems(
    lpms: dict[str, Lpm], servers: dict[str, IPv4Address], leaves: list[str]
) -> Iterator[tuple[str, str, str]]:
    """(leaf, server, problem) for every server some leaf cannot deliver to (`Walk`), the
    servers every leaf provably delivers to (`_Classes`) left out."""
    addresses = {s: int(a) for s, a in servers.items()}
    delivered = _Classes(lpms, addresses).delivered(leaves)
    for server, address in servers.items():
        if server in delivered:
            continue
        walk = Walk(lpms, address, server)
        for leaf in leaves:
            why = walk(leaf)
            if why:
                yield leaf, server, why


def _suspects(
    fib: Fib, delta: FibDelta, switches: Collection[str]
) -> list[tuple[str, IPv4Network]]:
    """The routes a failure changed other than by dropping some of their next hops. When a
    failure only drops next hops and leaves at least one, every path it leaves was a path
    before: nothing that delivered stops delivering, so only these routes need a walk."""
    found = []
    # most changes at a switch drop the same hop: known by the two lists' identities (shared
    # tuples, alive in `fib` and `delta` while this runs), not by hashing them
    within: dict[tuple[int, int], bool] = {}
    for node, changes in delta.items():
        if node not in switches:
            continue
        routes = fib[node]
        for prefix, hops in changes.items():
            before = routes.get(prefix)
            if not hops or before is None:
                found.append((node, prefix))
                continue
            pair = (id(hops), id(before))
            kept = within.get(pair)
            if kept is None:
                kept = within[pair] = set(hops) <= set(before)
            if not kept:
                found.append((node, prefix))
    return found


def _narrow(fib: Fib, lab: Lab) -> list[tuple[str, str, int, int]]:
    """(switch, subnet, next hops, intent's width) for each leaf whose route to a remote
    server subnet has fewer next hops than uplinks: what the netns deploy waits for
    (`twin.design.graph.uplink_width`, `remote_subnets`); and each spine whose route to the
    subnet of leaves cabled to it has fewer next hops than there are such leaves."""
    found = []
    for leaf in lab.nodes("leaf"):
        width = uplink_width(lab.graph, leaf)
        for subnet in remote_subnets(lab.graph, leaf):
            hops = fib[leaf].get(IPv4Network(subnet), ())
            if len(hops) != width:
                found.append((leaf, subnet, len(hops), width))
    for spine in lab.nodes("spine"):
        below: dict[str, set[str]] = {}
        for n in lab.graph.neighbors(spine):
            if lab.graph.nodes[n]["role"] == "leaf":
                below.setdefault(lab.graph.nodes[n]["subnet"], set()).add(n)
        for subnet, leaves in sorted(below.items()):
            hops = fib.get(spine, {}).get(IPv4Network(subnet), ())
            if len(hops) < len(leaves):
                found.append((spine, subnet, len(hops), len(leaves)))
    return found


def _policy(routing: Routing, prefixes: Iterable[IPv4Network | None]) -> list[Finding]:
    """The routing policy (and `maximum-paths`) behind the routes to `prefixes` that a check
    found missing or narrow: one finding per switch, neighbour and statement (listed first:
    the cause before the switches it leaves short)."""
    found = []
    for prefix in sorted({p for p in prefixes if p is not None}):
        for switch, _, where, what in routing.policy_effects(prefix):
            found.append(Finding(switch, what, "", where))
    return found


@static("fib_reachability", failures=1)
def fib_reachability(lab: Lab, params: Params) -> list[Result]:
    """Every leaf delivers to every server along every ECMP branch of the FIBs the configs
    converge to, over all its uplinks; and still delivers after any `failures` (1) links fail
    (0: none, 2: every pair).

    Scope `FIB` (all links up): from each leaf, every next hop toward each server's address,
    switch by switch, ends at the server (no black hole, no loop), and the route to each
    remote leaf's server subnet has one next hop per uplink (the ECMP width the netns deploy
    waits for). Scope `K-link failures`: after each set of K links fails (a single-homed
    server's own link is left out) and routing reconverges, every leaf still delivers to
    every server.

    >>> from validators.examples import tiny_lab, edit_json
    >>> lab = tiny_lab()
    >>> for r in fib_reachability(lab, {"failures": 1}):
    ...     print(r.scope, r.status.value, r.reason)
    FIB pass 4 paths (2 leaves x 2 servers) deliver over full ECMP width
    1-link failures pass every server reachable from every leaf after each of 9 failures
    >>> edit_json(lab, "leaf2", lambda db: db["PORT"]["Ethernet0"].update(admin_status="down"))
    >>> print(fib_reachability(lab, {"failures": 1})[1].findings[-1])
    leaf2 leaf1:Ethernet16-leaf2:Ethernet16 down: server1: black hole at leaf2 (dropped)
    """
    routing = shared(lab)
    wiring = routing.w
    servers = {h.name: h.address.ip for h in wiring.hosts.values()}
    fib = routing.fib
    switches = list(wiring.routers)
    leaves = lab.nodes("leaf")
    lpms = {n: Lpm(fib[n]) for n in switches}
    problems = list(_problems(lpms, servers, leaves))
    narrow = _narrow(fib, lab)
    affected = [routing.covering(servers[s]) for _, s, _ in problems]
    findings = _policy(routing, affected + [IPv4Network(p) for _, p, _, _ in narrow])
    findings += [Finding(leaf, f"{s}: {why}", "", "FIB") for leaf, s, why in problems]
    findings += [Finding(n, f"{p} has {k}/{w} paths", "", "FIB") for n, p, k, w in narrow]
    ok = (
        f"{len(leaves) * len(servers)} paths ({len(leaves)} leaves x {len(servers)} servers) "
        "deliver over full ECMP width"
    )
    figures = {"leaves": len(leaves), "servers": len(servers)}
    results = [verdict("fib_reachability", "FIB", findings, ok, figures)]
    k = params["failures"]
    if not k:
        return results
    failed: list[Finding] = []
    checked = 0
    by_address = sorted((int(a), s) for s, a in servers.items())
    for failed_links in combinations(_failable(lab), k):
        checked += 1
        delta = routing.after(failed_links)
        suspects = _suspects(fib, delta, lpms.keys())
        if not suspects:
            continue
        changed = {**lpms, **{n: lpms[n].patched(d) for n, d in delta.items() if n in lpms}}
        for server, starts in _covered(by_address, suspects).items():
            walk = Walk(changed, servers[server], server)
            if any(walk(n) for n in starts):
                for leaf in leaves:
                    if why := walk(leaf):
                        where = " + ".join(map(link_name, failed_links)) + " down"
                        failed.append(Finding(leaf, f"{server}: {why}", "", where))
    ok = f"every server reachable from every leaf after each of {checked} failures"
    figures = {"failure_sets": checked}
    results.append(verdict("fib_reachability", f"{k}-link failures", failed, ok, figures))
    return results


def _covered(
    by_address: list[tuple[int, str]], suspects: list[tuple[str, IPv4Network]]
) -> dict[str, list[str]]:
    """Servers (from `by_address`, sorted by address) in a suspect route's prefix, with the
    switches of those routes."""
    starts: dict[str, list[str]] = {}
    for node, prefix in suspects:
        low = int(prefix.network_address)
        first = bisect_left(by_address, (low, ""))
        last = bisect_left(by_address, (low + prefix.num_addresses, ""))
        for _, server in by_address[first:last]:
            starts.setdefault(server, []).append(node)
    return starts


def _failable(lab: Lab) -> list[Link]:
    """Every link but the only link of a single-homed server (its loss is no routing matter)."""
    single = {s for s in lab.nodes("server") if lab.graph.degree(s) < 2}
    return [link for link in links(lab) if not ({link[0], link[2]} & single)]
