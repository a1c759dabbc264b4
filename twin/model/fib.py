"""Forwarding tables (FIBs): the neutral types, longest-prefix match, and their JSON.

A `Fib` maps every node (switch or server) to its routes: prefix -> next hops, each a
`NextHop(node, port)`: the neighbour the packet goes to next (switch or server: the first
physical hop) and the egress port (a port or PortChannel; for a VLAN, its member toward
that neighbour). An empty tuple drops. Several sources produce this type, so the same checks
run on any of them: `twin.model.routing.Routing` (what a lab's configs converge to) and every
backend's observer (a live twin's FIB, saved with a run as `to_grouped` writes it, or as its
changes: `twin.scenario.fibfiles`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Network
from operator import itemgetter
from typing import Any, NamedTuple

from twin.errors import InputError


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

    def patched(self, changes: Mapping[IPv4Network, Hops | None]) -> Lpm:
        """This table with one node's changes of a `FibDelta` (None: the route is gone),
        itself left as it was; the prefix lengths no change touches are shared.

        >>> p, q = IPv4Network("10.0.0.0/8"), IPv4Network("10.1.0.0/16")
        >>> lpm = Lpm({p: (NextHop("a", "p1"),), q: ()})
        >>> after = lpm.patched({q: None})
        >>> after(int(IPv4Address("10.1.2.3"))), lpm(int(IPv4Address("10.1.2.3")))
        ((NextHop(node='a', port='p1'),), ())
        """
        new = Lpm({})
        new.tables = dict(self.tables)
        copied: set[int] = set()
        for prefix, hops in changes.items():
            shift = 32 - prefix.prefixlen
            if shift not in copied:
                new.tables[shift] = dict(new.tables.get(shift, {}))
                copied.add(shift)
            key = int(prefix.network_address) >> shift
            if hops is None:
                new.tables[shift].pop(key, None)
            else:
                new.tables[shift][key] = hops
        new.tables = {s: t for s, t in new.tables.items() if t}
        new.shifts = sorted(new.tables)
        return new


class Lookup:
    """Longest-prefix match in every node's table of one FIB: a node's `Lpm` is built at its
    first lookup and kept for the next ones (not built per lookup).

    >>> p = IPv4Network("10.0.0.0/8")
    >>> find = Lookup({"a": {p: (NextHop("b", "p1"),)}})
    >>> find("a", int(IPv4Address("10.1.2.3"))), find("b", 0), find.lpm("a") is find.lpm("a")
    ((NextHop(node='b', port='p1'),), None, True)
    """

    def __init__(self, fib: Mapping[str, Mapping[IPv4Network, Hops]]) -> None:
        self.fib = fib
        self._lpm: dict[str, Lpm] = {}

    def lpm(self, node: str) -> Lpm:
        """The node's table (empty for a node the FIB does not hold)."""
        table = self._lpm.get(node)
        if table is None:
            table = self._lpm[node] = Lpm(self.fib.get(node, {}))
        return table

    def __call__(self, node: str, address: int) -> Hops | None:
        """Where `node` sends a packet for `address` (None: no route)."""
        return self.lpm(node)(address)


def applied(fib: Fib, delta: FibDelta) -> Fib:
    """The FIB once a delta (`Routing.after`) is applied, `fib` left as it was.

    >>> p = IPv4Network("10.0.0.0/8")
    >>> applied({"a": {p: ()}}, {"a": {p: None}}), applied({"a": {}}, {"a": {p: ()}})
    ({'a': {}}, {'a': {IPv4Network('10.0.0.0/8'): ()}})
    """
    after = {node: dict(routes) for node, routes in fib.items()}
    for node, changes in delta.items():
        for prefix, hops in changes.items():
            if hops is None:
                after.setdefault(node, {}).pop(prefix, None)
            else:
                after.setdefault(node, {})[prefix] = hops
    return after


def delta(old: Fib, new: Fib) -> FibDelta:
    """What changes `old` into `new` (`applied(old, delta(old, new))` routes as `new` does):
    per node, each prefix whose next hops differ, None where `new` has none.

    >>> p, q = IPv4Network("10.0.0.0/8"), IPv4Network("10.1.0.0/16")
    >>> d = delta({"a": {p: (), q: ()}, "b": {p: ()}}, {"a": {p: ()}, "c": {q: ()}})
    >>> [(n, [(str(k), v) for k, v in c.items()]) for n, c in d.items()]
    [('a', [('10.1.0.0/16', None)]), ('b', [('10.0.0.0/8', None)]), ('c', [('10.1.0.0/16', ())])]
    """
    out: FibDelta = {}
    for node in {**old, **new}:
        was, now = old.get(node, {}), new.get(node, {})
        if was is now or was == now:
            continue
        changes: dict[IPv4Network, Hops | None] = {p: h for p, h in now.items() if was.get(p) != h}
        changes.update((p, None) for p in was if p not in now)
        out[node] = changes
    return out


def to_json(fib: Fib) -> dict[str, dict[str, list[dict[str, str]]]]:
    """A FIB in the observations' JSON: node -> prefix -> [{"node", "port"}] ([] drops).

    >>> to_json({"leaf1": {IPv4Network("10.2.0.0/24"): (NextHop("spine1", "Ethernet0"),)}})
    {'leaf1': {'10.2.0.0/24': [{'node': 'spine1', 'port': 'Ethernet0'}]}}
    """
    return {
        node: {
            str(prefix): [{"node": h.node, "port": h.port} for h in hops]
            for prefix, hops in sorted(routes.items(), key=lambda r: (r[0].prefixlen, r[0]))
        }
        for node, routes in sorted(fib.items())
    }


def to_grouped(fib: Fib) -> dict[str, Any]:
    """A FIB as `to_json` writes it with each distinct next-hop list once: `hops` the lists,
    `nodes` node -> prefix -> the index of its list in `hops` (a spine's 64-way ECMP list is
    written once, not once per prefix it carries).

    >>> hops = (NextHop("spine1", "Ethernet0"), NextHop("spine2", "Ethernet4"))
    >>> to_grouped({"leaf1": {IPv4Network("10.2.0.0/24"): hops, IPv4Network("10.2.1.0/24"): hops}})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'encoding': 'grouped', 'hops': [[{'node': 'spine1', 'port': 'Ethernet0'},
                                      {'node': 'spine2', 'port': 'Ethernet4'}]],
     'nodes': {'leaf1': {'10.2.0.0/24': 0, '10.2.1.0/24': 0}}}
    """
    index: dict[Hops, int] = {}
    by_id: dict[int, int] = {}  # a list's index by identity: a FIB's nodes share their lists
    keys: dict[IPv4Network, tuple[int, int, str]] = {}  # and their prefixes

    def key(prefix: IPv4Network) -> tuple[int, int, str]:
        """The prefix's order (its length, then its address) and its text, made once."""
        made = keys.get(prefix)
        if made is None:
            made = keys[prefix] = (prefix.prefixlen, int(prefix.network_address), str(prefix))
        return made

    nodes: dict[str, dict[str, int]] = {}
    for node, routes in sorted(fib.items()):
        listed = nodes[node] = {}
        for (*_, text), hops in sorted((key(p), hops) for p, hops in routes.items()):
            at = by_id.get(id(hops))
            if at is None:
                at = by_id[id(hops)] = index.setdefault(hops, len(index))
            listed[text] = at
    lists = [[{"node": h.node, "port": h.port} for h in hops] for hops in index]
    return {"encoding": "grouped", "hops": lists, "nodes": nodes}


def from_grouped(data: dict[str, Any], file: str = "") -> Fib:
    """The FIB `to_grouped` wrote, checked as `from_json` checks its form (an index that is
    not one of `hops`' refused too).

    >>> fib = {"s": {IPv4Network("10.0.0.0/8"): (NextHop("a", "p1"),)}}
    >>> from_grouped(to_grouped(fib)) == fib
    True
    >>> from_grouped({"hops": [], "nodes": {"s": {"10.0.0.0/8": 0}}}, "fib/start.json")
    Traceback (most recent call last):
    twin.errors.InputError: fib/start.json: nodes.s.10.0.0.0/8: not an index of hops (it has 0)
    """
    hops, nodes = data.get("hops"), data.get("nodes")
    if not isinstance(hops, list):
        raise InputError(file, "hops", f"must be an array of next-hop lists, not {_kind(hops)}")
    if not isinstance(nodes, dict):
        raise InputError(file, "nodes", f"must be an object of node -> routes, not {_kind(nodes)}")
    made = _Made(file)
    lists = [made.hops(f"hops.{i}", h) for i, h in enumerate(hops)]
    fib: Fib = {}
    for node, routes in nodes.items():
        if not isinstance(routes, dict):
            problem = f"must be an object of prefix -> next-hop list, not {_kind(routes)}"
            raise InputError(file, f"nodes.{node}", problem)
        table: Routes = {}
        for prefix, i in routes.items():
            network = _prefix(file, f"nodes.{node}.{prefix}", prefix)
            if type(i) is not int or not 0 <= i < len(lists):
                problem = f"not an index of hops (it has {len(lists)})"
                raise InputError(file, f"nodes.{node}.{prefix}", problem)
            table[network] = lists[i]
        fib[node] = table
    return fib


def from_json(data: Any, file: str = "") -> Fib:
    """The FIB `to_json` wrote, checked as it is read: anything else (a node's routes not an
    object, a prefix not an IPv4 network, next hops not an array of objects with string
    `node` and `port`; other keys of a next hop are ignored) is refused as one `InputError`
    line naming `file` and the key.

    A FIB of thousands of routes has a few hundred distinct prefixes and next-hop lists:
    each distinct prefix is parsed once (`_network`), each distinct next hop and next-hop
    list made (and checked) once and shared by every route that has it.

    >>> fib = {"s": {IPv4Network("10.0.0.0/8"): (NextHop("a", "p1"),)}}
    >>> fib["s"][IPv4Network("0.0.0.0/0")] = ()
    >>> from_json(to_json(fib)) == fib
    True
    >>> from_json({"s": {"10.0.0.0/8": [{"node": "a"}]}}, "fib/start.json")
    Traceback (most recent call last):
    twin.errors.InputError: fib/start.json: s.10.0.0.0/8.0.port: missing
    """
    if not isinstance(data, dict):
        raise InputError(file, "", f"must be an object of node -> routes, not {_kind(data)}")
    made = _Made(file)
    fib: Fib = {}
    for node, routes in data.items():
        if not isinstance(routes, dict):
            raise InputError(
                file, node, f"must be an object of prefix -> next hops, not {_kind(routes)}"
            )
        table: Routes = {}
        for prefix, hops in routes.items():
            network = _prefix(file, f"{node}.{prefix}", prefix)
            try:  # the common case: a list of next hops seen before
                known = made.lists.get(tuple(map(_PAIR, hops))) if type(hops) is list else None
            except (KeyError, TypeError):  # not a list of {node, port}: said by `made.hops`
                known = None
            table[network] = known if known is not None else made.hops(f"{node}.{prefix}", hops)
        fib[node] = table
    return fib


_PAIR = itemgetter("node", "port")
_network = functools.lru_cache(maxsize=1 << 16)(IPv4Network)
"""A prefix parsed strictly (no host bits set), once per process: every snapshot of a run has
the same few hundred to thousands."""


def _prefix(file: str, key: str, prefix: str) -> IPv4Network:
    """A route's prefix (`_network`), or refused as one line naming `key`."""
    try:
        return _network(prefix)
    except ValueError as exc:
        raise InputError(file, key, f"not a valid IPv4 network ({exc})") from None


@dataclass
class _Made:
    """The next hops and next-hop lists of one FIB file, each made once."""

    file: str
    lists: dict[tuple[tuple[str, str], ...], Hops] = field(default_factory=dict)
    nexthops: dict[tuple[str, str], NextHop] = field(default_factory=dict)

    def hops(self, key: str, hops: Any) -> Hops:
        """A list of next hops checked, or refused naming the first wrong element."""
        if not isinstance(hops, list):
            raise InputError(self.file, key, f"must be an array of next hops, not {_kind(hops)}")
        pairs = []
        for i, hop in enumerate(hops):
            if not isinstance(hop, dict):
                problem = f"must be an object with node and port, not {_kind(hop)}"
                raise InputError(self.file, f"{key}.{i}", problem)
            for name in ("node", "port"):
                if name not in hop:
                    raise InputError(self.file, f"{key}.{i}.{name}", "missing")
                if not isinstance(hop[name], str):
                    problem = f"must be a string, not {_kind(hop[name])}"
                    raise InputError(self.file, f"{key}.{i}.{name}", problem)
            pairs.append((hop["node"], hop["port"]))
        made = tuple(self.nexthops.setdefault(p, NextHop(*p)) for p in pairs)
        return self.lists.setdefault(tuple(pairs), made)


def _kind(value: Any) -> str:
    """A JSON value's type, as a message names it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    names: dict[type, str] = {dict: "an object", list: "an array", str: "a string"}
    return names.get(type(value), "a number")
