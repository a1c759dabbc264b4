"""`fib_reachability` walks a class of servers the FIBs route alike once (`_Classes`): on any
FIB, what it reports is what a walk per server and leaf (`Walk`) finds, in the same order."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network

from hypothesis import given, settings
from hypothesis import strategies as st

from twin.model.fib import Fib, Lpm, NextHop
from validators.static.fib_reachability import Walk, _Classes, _problems

SWITCHES = ["leaf1", "leaf2", "leaf3", "spine1", "spine2"]
LEAVES = SWITCHES[:3]
SERVERS = {f"s{i}": IPv4Address(f"10.0.{i // 3}.{1 + i % 3}") for i in range(6)}
"""Two subnets of three servers: classes of several servers, and their own /32s."""
PREFIXES = [
    IPv4Network(p)
    for p in ("0.0.0.0/0", "10.0.0.0/16", "10.0.0.0/24", "10.0.1.0/24", "10.0.1.0/30")
] + [IPv4Network(f"{a}/32") for a in SERVERS.values()]


def per_server(fib: Fib) -> list[tuple[str, str, str]]:
    """What a walk per server finds from every leaf, in order."""
    lpms = {n: Lpm(fib[n]) for n in SWITCHES}
    found = []
    for server, address in SERVERS.items():
        walk = Walk(lpms, address, server)
        found += [(leaf, server, why) for leaf in LEAVES if (why := walk(leaf))]
    return found


def healthy() -> Fib:
    """Leaves to the spines for every subnet, the spines down to the subnet's leaves, each
    leaf to its own servers by /32 (subnet 10.0.0.0/24 on leaf1 and leaf2, 10.0.1.0/24 on
    leaf3)."""
    up = tuple(NextHop(s, "up") for s in ("spine1", "spine2"))
    down = {
        "10.0.0.0/24": (NextHop("leaf1", "d"), NextHop("leaf2", "d")),
        "10.0.1.0/24": (NextHop("leaf3", "d"),),
    }
    fib: Fib = {s: {IPv4Network(p): h for p, h in down.items()} for s in ("spine1", "spine2")}
    for leaf, subnet in (("leaf1", "10.0.0"), ("leaf2", "10.0.0"), ("leaf3", "10.0.1")):
        fib[leaf] = {IPv4Network(p): up for p in down}
        for server, address in SERVERS.items():
            if str(address).startswith(subnet + "."):
                fib[leaf][IPv4Network(f"{address}/32")] = (NextHop(server, "e"),)
    return fib


def test_a_healthy_fabric_is_proven_per_class() -> None:
    fib = healthy()
    lpms = {n: Lpm(fib[n]) for n in SWITCHES}
    addresses = {s: int(a) for s, a in SERVERS.items()}
    classes = _Classes(lpms, addresses)
    assert sorted(map(sorted, classes.classes)) == [["s0", "s1", "s2"], ["s3", "s4", "s5"]]
    assert classes.own["s0"] == {"leaf1", "leaf2"} and classes.own["s4"] == {"leaf3"}
    assert classes.delivered(LEAVES) == set(SERVERS)
    assert list(_problems(lpms, SERVERS, LEAVES)) == per_server(fib) == []


def test_one_servers_missing_route_fails_it_alone() -> None:
    fib = healthy()
    del fib["leaf2"][IPv4Network("10.0.0.2/32")]  # s1: leaf2 sends it up, a spine back down
    lpms = {n: Lpm(fib[n]) for n in SWITCHES}
    addresses = {s: int(a) for s, a in SERVERS.items()}
    assert _Classes(lpms, addresses).delivered(LEAVES) == set(SERVERS) - {"s1"}
    found = list(_problems(lpms, SERVERS, LEAVES))
    assert found == per_server(fib) and {s for _, s, _ in found} == {"s1"}
    assert "loops back to leaf2" in found[0][2]


@settings(max_examples=300, deadline=None)
@given(
    st.fixed_dictionaries(
        {
            s: st.dictionaries(
                st.sampled_from(PREFIXES),
                st.lists(st.sampled_from(SWITCHES + list(SERVERS)), max_size=3).map(
                    lambda nodes: tuple(NextHop(n, "p") for n in nodes)
                ),
                max_size=6,
            )
            for s in SWITCHES
        }
    ),
    st.sets(st.sampled_from([(s, p) for s in SWITCHES for p in PREFIXES]), max_size=3),
)
def test_any_fib_reports_what_a_walk_per_server_finds(
    fib: Fib, removed: set[tuple[str, IPv4Network]]
) -> None:
    fib = {s: {**healthy()[s], **fib[s]} for s in SWITCHES}  # healthy routes, some overridden
    for switch, prefix in removed:
        fib[switch].pop(prefix, None)
    lpms = {n: Lpm(fib[n]) for n in SWITCHES}
    assert list(_problems(lpms, SERVERS, LEAVES)) == per_server(fib)
