"""FRR's routing policy as bgpd applies it to the routes the fabric exchanges: prefix-lists,
AS-path access-lists, community-lists and route-maps (`Policy`), bound to a neighbour per
direction (`Filters`), applied to a route's attributes (`Attrs`).

The semantics are FRR 8.4's (docs/validators.md cites them): a prefix-list's entries are
tried by sequence, the first that matches decides, no match denies, a list with no entries
permits and an undefined list denies (lib/plist.c `prefix_list_apply_ext`); an AS-path list
likewise, undefined denies (bgpd/bgp_filter.c `as_list_apply`); a route-map's entries by
sequence, the first whose every `match` holds permits (applying its `set`s) or denies, none
denies, an undefined route-map bound to a neighbour denies everything (bgpd/bgp_route.c
`bgp_input_modifier`, `bgp_output_modifier`); a `match` naming an undefined list does not
match. Inbound, the prefix-list and the filter-list are applied before the route-map.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from ipaddress import IPv4Network
from typing import NamedTuple

NO_EXPORT = frozenset({"no-export", "no-advertise", "local-AS"})
"""Well-known communities a router does not advertise to an eBGP peer (RFC 1997)."""
WELL_KNOWN = {
    "65535:65281": "no-export",
    "65535:65282": "no-advertise",
    "65535:65283": "local-AS",
    "0:0": "internet",
}
NAMES = frozenset({*WELL_KNOWN.values()})


class Attrs(NamedTuple):
    """What policy reads and changes of a route: its AS path (as received), communities,
    weight and local preference (local to the router)."""

    path: tuple[int, ...]
    communities: frozenset[str] = frozenset()
    weight: int = 0
    pref: int = 100


def community(text: str) -> str:
    """A community as policy compares it: `AA:NN` (each 0-65535) or a well-known name.

    >>> community("65535:65281"), community("65000:10")
    ('no-export', '65000:10')
    """
    if text in NAMES:
        return text
    high, sep, low = text.partition(":")
    if not sep or not (0 <= int(high) <= 65535 and 0 <= int(low) <= 65535):
        raise ValueError(f"{text!r} is not a community (AA:NN or a well-known name)")
    value = f"{int(high)}:{int(low)}"
    return WELL_KNOWN.get(value, value)


def _community_text(communities: frozenset[str]) -> str:
    """Communities as FRR prints them (sorted by value), for expanded community-lists."""

    def key(c: str) -> tuple[int, int]:
        for number, name in WELL_KNOWN.items():
            if name == c:
                c = number
        high, _, low = c.partition(":")
        return int(high), int(low)

    return " ".join(sorted(communities, key=key))


def bgp_regex(text: str) -> re.Pattern[str]:
    """FRR's BGP regular expression (AS-path and expanded community lists): `_` stands for a
    boundary (start, end, space or a set's punctuation), as bgpd/bgp_regex.c `bgp_regcomp`
    rewrites it.

    >>> path = "65000 65103"
    >>> bool(bgp_regex("_65103$").search(path)), bool(bgp_regex("^65103_").search(path))
    (True, False)
    """
    return re.compile(text.replace("_", "(^|[,{}() ]|$)"))


@dataclass(frozen=True)
class PrefixEntry:
    """One `ip prefix-list` entry."""

    seq: int
    permit: bool
    prefix: IPv4Network
    ge: int = 0
    le: int = 0

    def matches(self, p: IPv4Network) -> bool:
        """FRR's rule: inside the entry's prefix; its exact length unless ge or le is given,
        then at least ge and at most le."""
        if p.prefixlen < self.prefix.prefixlen or not p.subnet_of(self.prefix):
            return False
        if not self.ge and not self.le:
            return p.prefixlen == self.prefix.prefixlen
        return (not self.le or p.prefixlen <= self.le) and (not self.ge or p.prefixlen >= self.ge)


@dataclass(frozen=True)
class Match:
    """A route-map `match`: `kind` one of prefix-list, as-path, community."""

    kind: str
    name: str
    exact: bool = False


@dataclass
class Entry:
    """One route-map entry (`route-map NAME permit|deny SEQ`)."""

    seq: int
    permit: bool
    matches: dict[str, Match] = field(default_factory=dict)
    pref: int | None = None
    weight: int | None = None
    prepend: tuple[int, ...] = ()
    prepend_last: int = 0
    communities: frozenset[str] | None = None
    """`set community`: None when not set."""
    additive: bool = False


@dataclass(frozen=True)
class Filters:
    """What a neighbour applies in one direction: a prefix-list, a filter-list (AS-path
    access-list) and a route-map, each by name (None: none)."""

    prefix_list: str | None = None
    filter_list: str | None = None
    route_map: str | None = None
    required: bool = False
    """`bgp ebgp-requires-policy` with none of the three: nothing passes."""


class Verdict(NamedTuple):
    """A route once a direction's policy applied: None when denied; `why` names the statement
    that denied or changed it ("" when none did)."""

    attrs: Attrs | None
    why: str


@dataclass
class Policy:
    """A router's policy definitions, by name, each list's entries in sequence order
    (`in_order`)."""

    prefix_lists: dict[str, list[PrefixEntry]] = field(default_factory=dict)
    as_paths: dict[str, list[tuple[int, bool, re.Pattern[str]]]] = field(default_factory=dict)
    community_lists: dict[str, list[tuple[int, bool, frozenset[str] | re.Pattern[str]]]] = field(
        default_factory=dict
    )
    route_maps: dict[str, list[Entry]] = field(default_factory=dict)

    def in_order(self) -> Policy:
        """Every list's and route-map's entries sorted by sequence number."""
        for prefixes in self.prefix_lists.values():
            prefixes.sort(key=lambda e: e.seq)
        for paths in self.as_paths.values():
            paths.sort(key=lambda e: e[0])
        for communities in self.community_lists.values():
            communities.sort(key=lambda e: e[0])
        for entries in self.route_maps.values():
            entries.sort(key=lambda e: e.seq)
        return self

    def prefix_permits(self, name: str, p: IPv4Network) -> bool | None:
        """A prefix-list's verdict on a prefix (None: the list is undefined)."""
        entries = self.prefix_lists.get(name)
        if entries is None:
            return None
        if not entries:
            return True
        for e in entries:
            if e.matches(p):
                return e.permit
        return False

    def as_path_permits(self, name: str, path: tuple[int, ...]) -> bool | None:
        """An AS-path access-list's verdict (None: undefined)."""
        entries = self.as_paths.get(name)
        if entries is None:
            return None
        text = " ".join(map(str, path))
        for _, permit, regex in entries:
            if regex.search(text):
                return permit
        return False

    def community_permits(self, name: str, communities: frozenset[str], exact: bool) -> bool:
        """A community-list's verdict (an undefined list does not match)."""
        for _, permit, value in self.community_lists.get(name, []):
            if isinstance(value, frozenset):
                hit = value == communities if exact else value <= communities
            else:
                hit = bool(value.search(_community_text(communities)))
            if hit:
                return permit
        return False

    def _holds(self, m: Match, p: IPv4Network, attrs: Attrs) -> bool:
        if m.kind == "prefix-list":
            return bool(self.prefix_permits(m.name, p))
        if m.kind == "as-path":
            return bool(self.as_path_permits(m.name, attrs.path))
        return self.community_permits(m.name, attrs.communities, m.exact)

    def route_map(self, name: str, p: IPv4Network, attrs: Attrs) -> Attrs | None:
        """A route-map applied (None: denied, also when the route-map is undefined)."""
        for e in self.route_maps.get(name, []):
            if not all(self._holds(m, p, attrs) for m in e.matches.values()):
                continue
            if not e.permit:
                return None
            path = attrs.path
            if e.prepend_last and path:
                path = (path[0],) * e.prepend_last + path
            path = e.prepend + path
            comms = attrs.communities
            if e.communities is not None:
                comms = comms | e.communities if e.additive else e.communities
            return Attrs(
                path,
                comms,
                attrs.weight if e.weight is None else e.weight,
                attrs.pref if e.pref is None else e.pref,
            )
        return None

    def apply(self, f: Filters, p: IPv4Network, attrs: Attrs, direction: str) -> Verdict:
        """One direction's filters in FRR's order: prefix-list, filter-list, route-map."""
        if f.required:
            return Verdict(None, f"bgp ebgp-requires-policy (no policy {direction})")
        if f.prefix_list is not None and not self.prefix_permits(f.prefix_list, p):
            return Verdict(None, f"prefix-list {f.prefix_list} {direction}")
        if f.filter_list is not None and not self.as_path_permits(f.filter_list, attrs.path):
            return Verdict(None, f"filter-list {f.filter_list} {direction}")
        if f.route_map is None:
            return Verdict(attrs, "")
        out = self.route_map(f.route_map, p, attrs)
        why = f"route-map {f.route_map} {direction}"
        return Verdict(out, "" if out == attrs else why)
