"""What an frr.conf says that routing depends on (`parse_frr`): `router bgp` (AS, router-id,
`network`s, multipath, neighbours' peer-groups and policy bindings), static routes, and the
policy definitions (`twin.model.policy`) in FRR 8.4's syntax.

Only the IPv4 unicast address family counts (statements under `router bgp` outside any
address-family are FRR's IPv4 unicast ones; other families are skipped). A statement that
could change the IPv4 routing and that the model does not apply is refused as one
`InputError` line naming the file, the line and the statement; statements that cannot change
it (timers, BFD, descriptions, other address families) are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Network

from twin.errors import InputError
from twin.model.policy import Entry, Filters, Match, Policy, PrefixEntry, bgp_regex, community

STATIC = 1
DEFAULT_MAXIMUM_PATHS = 64


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
    groups: dict[str, str] = field(default_factory=dict)
    """Neighbour -> its peer-group."""
    bound: dict[tuple[str, str, str], str] = field(default_factory=dict)
    """(neighbour or peer-group, kind, "in"|"out") -> list or route-map name; kind is one of
    prefix-list, filter-list, route-map."""
    no_communities: set[str] = field(default_factory=set)
    """Neighbours or peer-groups with `no neighbor X send-community`."""
    requires_policy: bool = False
    """`bgp ebgp-requires-policy`: an eBGP neighbour without policy in a direction exchanges
    nothing that way (FRR's default but in its `datacenter` profile)."""

    def filters(self, neighbour: str, direction: str) -> Filters:
        """What applies to a neighbour (an address) in one direction: its own bindings, else
        its peer-group's (FRR: a member's own setting overrides the group's)."""
        chain = [neighbour, self.groups.get(neighbour, "")]

        def name(kind: str) -> str | None:
            keys = ((n, kind, direction) for n in chain)
            return next((self.bound[k] for k in keys if k in self.bound), None)

        found = Filters(name("prefix-list"), name("filter-list"), name("route-map"))
        if self.requires_policy and found == Filters():
            return Filters(required=True)
        return found

    def sends_communities(self, neighbour: str) -> bool:
        """FRR sends communities to every neighbour unless told not to."""
        return not {neighbour, self.groups.get(neighbour, "")} & self.no_communities


@dataclass
class Frr:
    """An frr.conf as the routing model reads it."""

    bgp: Bgp | None
    statics: list[Static]
    policy: Policy


HARMLESS_NEIGHBOR = {
    "remote-as", "peer-group", "description", "timers", "bfd", "activate", "password",
    "update-source", "ebgp-multihop", "ttl-security", "capability",
    "send-community", "soft-reconfiguration", "advertisement-interval", "next-hop-self",
    "route-reflector-client", "interface", "enforce-first-as", "disable-connected-check",
    "addpath-tx-all-paths", "addpath-tx-bestpath-per-AS", "maximum-prefix", "solo",
    "strict-capability-match", "dont-capability-negotiate", "override-capability",
    "passive", "port", "graceful-restart", "graceful-restart-helper",
}  # fmt: skip
"""`neighbor X ...` settings that do not change which routes a fabric of eBGP sessions that
come up selects (the sessions themselves are BGP_NEIGHBOR's)."""
_NO_COMMUNITIES = (
    ["send-community"],
    ["send-community", "standard"],
    ["send-community", "both"],
    ["send-community", "all"],
)
REFUSED_BGP = frozenset({"redistribute", "aggregate-address", "table-map", "distance", "import"})
"""`router bgp` IPv4 statements that change routing and are not modelled, by first word."""


class _Reader:
    """One frr.conf, line by line."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.bgp: Bgp | None = None
        self.statics: list[Static] = []
        self.policy = Policy()
        self.block = ""  # "bgp", "route-map" or "" (top level or a block that is ignored)
        self.ipv4 = True  # inside router bgp: in the IPv4 unicast address family
        self.entry: Entry | None = None
        self.protocol_maps: list[tuple[int, str, str]] = []
        self.datacenter = False  # `frr defaults datacenter`

    def refuse(self, number: int, line: str, what: str) -> InputError:
        problem = f"{line.strip()!r}: {what} is not in the routing model and could change routing"
        return InputError(self.file, f"line {number}", problem)

    def line(self, number: int, line: str, words: list[str]) -> None:
        if not line[0].isspace():
            self.top(number, line, words)
        elif self.block == "bgp" and self.bgp is not None:
            self.bgp_line(number, line, words)
        elif self.block == "route-map" and self.entry is not None:
            self.route_map_line(number, line, words)

    def top(self, number: int, line: str, words: list[str]) -> None:
        self.block, self.entry = "", None
        if words[:2] == ["router", "bgp"] and len(words) == 3:
            self.block, self.ipv4 = "bgp", True
            self.bgp = Bgp(int(words[2]), requires_policy=not self.datacenter)
        elif words[:2] == ["frr", "defaults"]:
            self.datacenter = words[2:] == ["datacenter"]
        elif words[:2] == ["ip", "route"]:
            self.statics.append(_static(words[2:]))
        elif words[:2] == ["ip", "prefix-list"] and len(words) > 3:
            self.prefix_list(words[2], words[3:])
        elif words[:3] == ["bgp", "as-path", "access-list"]:
            seq, rest = _seq(words[4:], len(self.policy.as_paths.get(words[3], [])))
            regex = bgp_regex(" ".join(rest[1:]))
            self.policy.as_paths.setdefault(words[3], []).append((seq, _action(rest[0]), regex))
        elif words[:2] == ["bgp", "community-list"]:
            self.community_list(words[2:])
        elif words[0] == "route-map" and len(words) == 4:
            self.block = "route-map"
            seq, permit = int(words[3]), _action(words[2])
            kept = self.policy.route_maps.get(words[1], [])
            same = [e for e in kept if e.seq == seq and e.permit == permit]
            entry = self.entry = same[0] if same else Entry(seq, permit)
            self.policy.route_maps[words[1]] = [e for e in kept if e.seq != seq] + [entry]
        elif words[:3] == ["ip", "protocol", "bgp"] and words[3:4] == ["route-map"]:
            self.protocol_maps.append((number, line, words[4]))

    def prefix_list(self, name: str, words: list[str]) -> None:
        if words[0] in ("description", "sequence-number"):
            self.policy.prefix_lists.setdefault(name, [])
            return
        entries = self.policy.prefix_lists.setdefault(name, [])
        auto = (max((e.seq for e in entries), default=0) // 5 + 1) * 5
        seq, rest = (int(words[1]), words[2:]) if words[0] == "seq" else (auto, words)
        permit = _action(rest[0])
        if rest[1] == "any":
            entry = PrefixEntry(seq, permit, IPv4Network("0.0.0.0/0"), 0, 32)
        else:
            bounds = dict(zip(rest[2::2], map(int, rest[3::2]), strict=True))
            if set(bounds) - {"ge", "le"}:
                raise ValueError(f"unknown {sorted(set(bounds) - {'ge', 'le'})}")
            entry = PrefixEntry(
                seq, permit, IPv4Network(rest[1]), bounds.get("ge", 0), bounds.get("le", 0)
            )
        entries[:] = [e for e in entries if e.seq != seq] + [entry]

    def community_list(self, words: list[str]) -> None:
        if words[0] in ("standard", "expanded"):
            kind, name, rest = words[0], words[1], words[2:]
        else:
            kind = "standard" if int(words[0]) < 100 else "expanded"
            name, rest = words[0], words[1:]
        entries = self.policy.community_lists.setdefault(name, [])
        seq, rest = _seq(rest, len(entries))
        permit = _action(rest[0])
        if kind == "standard":
            entries.append((seq, permit, frozenset(map(community, rest[1:]))))
        else:
            entries.append((seq, permit, bgp_regex(" ".join(rest[1:]))))

    def bgp_line(self, number: int, line: str, words: list[str]) -> None:
        bgp = self.bgp
        assert bgp is not None
        if words[0] == "address-family":
            self.ipv4 = words[1:] in (["ipv4"], ["ipv4", "unicast"])
            return
        if words[0] == "exit-address-family":
            self.ipv4 = True
            return
        if not self.ipv4:
            return
        if words[:2] == ["bgp", "router-id"]:
            bgp.router_id = IPv4Address(words[2])
        elif words == ["bgp", "bestpath", "as-path", "multipath-relax"]:
            bgp.relax = True
        elif words[:3] == ["bgp", "bestpath", "as-path"] and words[3:4] == ["ignore"]:
            raise self.refuse(number, line, "bgp bestpath as-path ignore")
        elif words[0] == "network":
            if len(words) > 2:
                raise self.refuse(number, line, f"network ... {words[2]}")
            bgp.networks.append(IPv4Network(words[1]))
        elif words[0] == "maximum-paths":
            if words[1] != "ibgp":  # iBGP is not in the fabric the model routes
                bgp.maximum_paths = int(words[1])
        elif words[0] in REFUSED_BGP:
            raise self.refuse(number, line, words[0])
        elif words[0] == "neighbor":
            self.neighbor(number, line, words[1], words[2:])
        elif words[:2] == ["no", "neighbor"] and words[3:] in _NO_COMMUNITIES:
            bgp.no_communities.add(words[2])
        elif words[-1] == "ebgp-requires-policy":
            bgp.requires_policy = words[0] != "no"

    def neighbor(self, number: int, line: str, name: str, words: list[str]) -> None:
        bgp = self.bgp
        assert bgp is not None
        kind = words[0]
        if kind == "peer-group" and len(words) == 2:
            bgp.groups[name] = words[1]
        elif kind in ("prefix-list", "filter-list", "route-map"):
            if len(words) != 3 or words[2] not in ("in", "out"):
                raise ValueError(f"write neighbor {name} {kind} NAME in|out")
            bgp.bound[(name, kind, words[2])] = words[1]
        elif kind not in HARMLESS_NEIGHBOR:
            raise self.refuse(number, line, f"neighbor ... {kind}")

    def route_map_line(self, number: int, line: str, words: list[str]) -> None:
        e = self.entry
        assert e is not None
        text = " ".join(words)
        if words[0] in ("description", "exit", "!"):
            return
        if words[:4] == ["match", "ip", "address", "prefix-list"]:
            e.matches["prefix-list"] = Match("prefix-list", words[4])
        elif words[:2] == ["match", "as-path"]:
            e.matches["as-path"] = Match("as-path", words[2])
        elif words[:2] == ["match", "community"]:
            e.matches["community"] = Match("community", words[2], words[3:] == ["exact-match"])
        elif words[:2] == ["set", "local-preference"] and words[2].isdigit():
            e.pref = int(words[2])
        elif words[:2] == ["set", "weight"]:
            e.weight = int(words[2])
        elif words[:4] == ["set", "as-path", "prepend", "last-as"]:
            e.prepend_last = int(words[4])
        elif words[:3] == ["set", "as-path", "prepend"]:
            e.prepend = tuple(int(w) for w in words[3:])
        elif words[:2] == ["set", "community"]:
            additive = words[-1] == "additive"
            values = words[2 : len(words) - additive]
            e.communities = frozenset() if values == ["none"] else frozenset(map(community, values))
            e.additive = additive
        elif words[:2] in (["set", "src"], ["set", "tag"], ["match", "ipv6"], ["set", "ipv6"]):
            return  # what zebra installs the route with; IPv6 routes
        else:
            raise self.refuse(number, line, f"route-map {text}")

    def done(self) -> Frr:
        self.policy.in_order()
        for number, line, name in self.protocol_maps:
            entries = self.policy.route_maps.get(name, [])
            if not entries or not entries[0].permit or entries[0].matches:
                raise self.refuse(number, line, "a route-map filtering what zebra installs")
        return Frr(self.bgp, self.statics, self.policy)


def parse_frr(text: str, file: str) -> Frr:
    """The routing settings of an frr.conf.

    >>> conf = parse_frr("ip route 10.2.0.0/24 10.1.0.1 250\\nrouter bgp 65001\\n"
    ...     " bgp bestpath as-path multipath-relax\\n address-family ipv4 unicast\\n"
    ...     "  network 10.0.0.1/32\\n  maximum-paths 8\\n exit-address-family\\nexit\\n", "f")
    >>> b = conf.bgp
    >>> b.asn, b.networks, b.maximum_paths, b.relax, conf.statics[0].distance
    (65001, [IPv4Network('10.0.0.1/32')], 8, True, 250)
    >>> parse_frr("router bgp 1\\n redistribute connected\\n", "leaf1/frr.conf")
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    twin.errors.InputError: leaf1/frr.conf: line 2: 'redistribute connected': redistribute is not...
    """
    reader = _Reader(file)
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split()
        if not words or words[0] == "!":
            continue
        try:
            reader.line(number, line, words)
        except (ValueError, IndexError, KeyError) as exc:
            raise InputError(
                file, f"line {number}", f"cannot read {line.strip()!r}: {exc}"
            ) from None
    return reader.done()


def _action(word: str) -> bool:
    if word not in ("permit", "deny"):
        raise ValueError(f"{word!r} is neither permit nor deny")
    return word == "permit"


def _seq(words: list[str], count: int) -> tuple[int, list[str]]:
    """An optional `seq N` first; else the next multiple of 5."""
    if words[:1] == ["seq"]:
        return int(words[1]), words[2:]
    return (count + 1) * 5, words


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
