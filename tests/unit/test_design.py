"""twin.design (sizing, graph, addressing): figures checked by hand, refusals, port budgets.

The expected figures below were worked out from the sizing rules (see each test), not copied
from the output.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from twin.design.addressing import Pool, subnet_for
from twin.design.graph import (
    PEER_LINK_BUNDLE,
    Design,
    design,
    figures,
    port_name,
    ports_of,
    uplink_bundle,
)
from twin.design.sizing import Sizing
from twin.errors import DesignError, InputError
from twin.intent import fabric as intent

REPO = Path(__file__).resolve().parents[2]
RADIX = {"leaf": "leaves", "spine": "spines", "superspine": "superspines"}


def _design(data: dict[str, Any]) -> Design:
    return design(intent.parse(data, "f.yaml"), "f.yaml")


def _example(name: str) -> Design:
    path = REPO / "examples" / f"{name}.yaml"
    return design(intent.load(path), str(path))


def _refusal(data: dict[str, Any]) -> DesignError:
    with pytest.raises(DesignError) as info:
        _design(data)
    return info.value


def _assert_ports_fit(d: Design) -> None:
    """No switch uses a port twice or a port beyond its radix; every NIC is cabled once."""
    for node, attrs in d.graph.nodes(data=True):
        ports = ports_of(d.graph, node)
        indices = [p.index for p in ports]
        assert len(indices) == len(set(indices)), node
        if attrs["role"] == "server":
            nics = [f"nic{i}" for i in range(d.fabric.servers.nics)]
            assert sorted(p.name for p in ports) == nics
        else:
            radix = getattr(d.fabric, RADIX[attrs["role"]]).ports
            assert max(indices) < radix, node


def test_reference_sizing() -> None:
    # 32-port leaves keep 2 for the peer-link: 30 free. With 4 spines, 14 server ports need
    # ceil(14/4) = 4 links per spine (16 uplinks, 30 in all); 50 servers then take 4 pairs,
    # ceil(50/4) = 13 servers per pair, still 4 links per spine: 13:16 = 0.8125.
    d = _example("reference")
    assert d.sizing == Sizing(
        leaves=8, spines_per_pod=4, pods=1, superspines=0, uplinks_per_spine=4,
        server_ports_per_leaf=13, peer_link_ports=2, leaves_per_pod=8,
    )  # fmt: skip
    figs = figures(d)
    assert figs["oversubscription_max"] == 0.812
    assert figs["ecmp_width"] == 4
    assert figs["tiers"] == 2
    assert figs["gpus"] == 400
    # Bisection: every leaf's usable bandwidth is its server bandwidth (under its uplinks):
    # 50 servers x 2 NICs x 400G / 2.
    assert figs["bisection_gbps"] == 20000.0
    _assert_ports_fit(d)


def test_small_sizing() -> None:
    # Two pairs share 4 servers: 2 server ports a leaf against 2 x 400G up, 1:1.
    d = _example("small")
    assert d.sizing == Sizing(4, 2, 1, 0, 1, 2, 1, 4)
    assert figures(d)["oversubscription_max"] == 1.0
    assert d.nodes("server") == ["server1", "server2", "server3", "server4"]
    _assert_ports_fit(d)


def test_big_is_three_tiers_with_four_byte_leaf_asns() -> None:
    # 64-port leaves: 2 peer-link ports, 8 spines x 4 links = 32 uplinks, 30 server ports;
    # 2048 servers -> ceil(2048/30) = 69 pairs = 138 leaves. A 64-port spine keeps 32 ports
    # down = 8 leaves x 4 links, so 8 leaves a pod, ceil(138/8) = 18 pods, and its 32 ports up
    # reach 32 super-spines, each with 18 x 8 = 144 spine ports.
    d = _example("big")
    assert d.sizing == Sizing(
        leaves=138, spines_per_pod=8, pods=18, superspines=32, uplinks_per_spine=4,
        server_ports_per_leaf=30, peer_link_ports=2, leaves_per_pod=8,
    )  # fmt: skip
    figs = figures(d)
    assert figs["servers"] == 2048 and figs["tiers"] == 3 and figs["ecmp_width"] == 8
    assert figs["oversubscription_max"] <= 1.0
    leaf_asns = [d.graph.nodes[leaf]["asn"] for leaf in d.nodes("leaf")]
    assert len(set(leaf_asns)) == 138
    assert all(4200000000 <= asn <= 4294967294 for asn in leaf_asns)  # RFC 6996 private
    spine_asns = {d.graph.nodes[s]["asn"] for s in d.nodes("spine")}
    assert len(spine_asns) == 18 and not spine_asns & set(leaf_asns)
    # Each spine: 4 links down to each leaf of its pod (8, and 2 in the last pod), one link
    # to each of the 32 super-spines.
    pod_leaves = Counter(d.graph.nodes[leaf]["pod"] for leaf in d.nodes("leaf"))
    assert [pod_leaves[p] for p in range(18)] == [8] * 17 + [2]
    for spine in d.nodes("spine"):
        kinds = Counter(p.kind for p in ports_of(d.graph, spine))
        pod = d.graph.nodes[spine]["pod"]
        assert kinds == {"fabric": 4 * pod_leaves[pod], "superfabric": 32}
    for sup in d.nodes("superspine"):
        assert len(ports_of(d.graph, sup)) == 144
    _assert_ports_fit(d)


def test_mlag_pairs_never_straddle_pods() -> None:
    d = _example("big")
    for leaf in d.nodes("leaf"):
        peer = d.graph.nodes[leaf]["mlag_peer"]
        assert d.graph.nodes[peer]["pod"] == d.graph.nodes[leaf]["pod"]
        assert d.graph.nodes[peer]["mlag_peer"] == leaf


def test_servers_are_spread_evenly_over_the_pairs() -> None:
    d = _example("reference")
    per_group = Counter(d.graph.nodes[s]["group"] for s in d.nodes("server"))
    assert sorted(per_group.values()) == [12, 12, 13, 13]
    for server in d.nodes("server"):
        leaves = sorted(p.peer for p in ports_of(d.graph, server))
        assert leaves == sorted(d.graph.nodes[server]["leaves"])
        assert d.graph.nodes[leaves[0]]["mlag_peer"] == leaves[1]


def test_default_intent_derives_leaves_and_spines() -> None:
    # 8 dual-homed servers fit one pair; 8 x 400G down at 1:1 needs 8 x 400G up: 8 spines.
    d = _design({})
    assert (d.sizing.leaves, d.sizing.spines_per_pod, d.sizing.uplinks_per_spine) == (2, 8, 1)
    assert figures(d)["oversubscription_max"] == 1.0


def test_single_homed_servers() -> None:
    d = _design({"servers": {"count": 6, "nics": 1, "dual_homed": False}, "leaves": {"count": 3}})
    assert d.sizing.peer_link_ports == 0
    assert all(d.graph.nodes[leaf]["mlag_peer"] is None for leaf in d.nodes("leaf"))
    assert not [e for *_, e in d.graph.edges(data=True) if e["kind"] == "peerlink"]
    # Every leaf has its own server subnet; a server's address is in its leaf's subnet.
    subnets = [d.graph.nodes[leaf]["subnet"] for leaf in d.nodes("leaf")]
    assert len(set(subnets)) == 3
    for server in d.nodes("server"):
        (leaf,) = d.graph.nodes[server]["leaves"]
        address = ipaddress.IPv4Interface(d.graph.nodes[server]["address"])
        assert address.network == ipaddress.IPv4Network(d.graph.nodes[leaf]["subnet"])


def test_parallel_uplinks_are_bundled_single_ones_are_not() -> None:
    d = _example("reference")
    fabric = [e for *_, e in d.graph.edges(data=True) if e["kind"] == "fabric"]
    by_pair = Counter((e["a"], e["b"]) for e in fabric)
    assert set(by_pair.values()) == {4}
    assert all(e["a_bundle"] and e["b_bundle"] for e in fabric)
    # The four links of one bundle share one /31.
    prefixes: dict[tuple[str, str], set[str]] = {}
    for e in fabric:
        prefixes.setdefault((e["a"], e["b"]), set()).add(e["prefix"])
    assert all(len(p) == 1 for p in prefixes.values())
    small = _example("small")
    assert all(
        e["a_bundle"] is None for *_, e in small.graph.edges(data=True) if e["kind"] == "fabric"
    )


def test_uplink_bundles_never_reuse_the_peer_link_or_server_bundle_names() -> None:
    # 101 spines x 2 links: uplinks 100 and 101 must not be PortChannel100 (the peer-link)
    # or PortChannel101.. (server bundles).
    d = _design({
        "spines": {"count": 101, "ports": 8},
        "leaves": {"count": 2, "ports": 256, "uplinks_per_spine": 2},
        "servers": {"count": 4},
    })  # fmt: skip
    for leaf in d.nodes("leaf"):
        owners: dict[str, set[str]] = {}
        for port in ports_of(d.graph, leaf):
            if port.bundle:
                peer = port.peer if port.kind != "server" else "servers"
                owners.setdefault(port.bundle, set()).add(peer)
        assert owners[PEER_LINK_BUNDLE] == {d.graph.nodes[leaf]["mlag_peer"]}
        assert all(len(peers) == 1 for peers in owners.values()), owners
        assert len([b for b, peers in owners.items() if peers <= set(d.nodes("spine"))]) == 101
    assert uplink_bundle(98, 4) == "PortChannel99"
    assert uplink_bundle(99, 4) == "PortChannel105"


def test_server_vlans_stay_valid_with_thousands_of_leaves() -> None:
    d = _design({
        "servers": {"count": 3200, "nics": 1, "dual_homed": False},
        "leaves": {"count": 3200, "ports": 4},
        "spines": {"count": 1, "ports": 1024},
        "addressing": {"loopbacks": "10.0.0.0/16", "servers": "10.128.0.0/9"},
        "asn": {"leaf_base": 4200000000},
    })  # fmt: skip
    vlans = [d.graph.nodes[leaf]["vlan"] for leaf in d.nodes("leaf")]
    assert len(vlans) == 3200
    assert all(2 <= v <= 4000 for v in vlans)  # 4094 is the MLAG keepalive VLAN
    assert max(vlans) == 4000


def test_port_names_follow_lanes() -> None:
    assert [port_name(i, 400000) for i in range(3)] == ["Ethernet0", "Ethernet8", "Ethernet16"]
    assert port_name(5, 100000) == "Ethernet20"
    assert port_name(5, 25000) == "Ethernet5"


# --------------------------------------------------------------------------- refusals
@pytest.mark.parametrize(
    ("data", "key", "problem"),
    [
        (
            {"leaves": {"count": 2, "ports": 8}, "servers": {"count": 40}},
            "leaves.ports",
            "8 ports cannot hold 40 server ports, 2 peer-link ports and 40 uplinks",
        ),
        (
            {"leaves": {"count": 4}, "servers": {"count": 18, "per_rack": 8}},
            "servers.per_rack",
            "2 x 8 servers per rack hold 16, fewer than the 18 servers",
        ),
        (
            {"spines": {"count": 2}, "servers": {"count": 8, "per_rack": 29}},
            "leaves.ports",
            "32 ports cannot hold 29 server ports, 2 peer-link ports and 30 uplinks",
        ),
        (
            {"spines": {"count": 1}, "leaves": {"uplinks_per_spine": 1}, "servers": {"count": 50}},
            "oversubscription.max",
            "leaves would be 25.00:1 oversubscribed, above 2.0",
        ),
        ({"leaves": {"count": 3}}, "leaves.count", "dual-homed servers need leaves in MLAG pairs"),
        (
            {"servers": {"nics": 2, "dual_homed": False}},
            "servers.nics",
            "single-homed servers have 1 NIC",
        ),
        (
            {"servers": {"nic_speed": 123}},
            "servers.nic_speed",
            "123 Mb/s is not a port speed (10G, 25G, 40G, 50G, 100G, 200G, 400G, 800G)",
        ),
        (
            {"leaves": {"uplink_speed": "1G"}},
            "leaves.uplink_speed",
            "1000 Mb/s is not a port speed (10G, 25G, 40G, 50G, 100G, 200G, 400G, 800G)",
        ),
        (
            {"addressing": {"loopbacks": "10.0.0.0/30"}},
            "addressing.loopbacks",
            "pool 10.0.0.0/30 is too small: 3 addresses fit, more are needed",
        ),
        (
            {"asn": {"leaf_base": 4294967290}, "servers": {"count": 100}},
            "asn.leaf_base",
            "14 leaves need AS numbers up to 4294967304, above 4294967294",
        ),
        (
            {"asn": {"spine": 65000, "leaf_base": 64990}, "servers": {"count": 200}},
            "asn.leaf_base",
            "leaf AS numbers 64991..65018 overlap the spines' 65000",
        ),
        (
            {"asn": {"superspine": 65101}, "superspines": {"count": 2}},
            "asn.superspine",
            "65101 is also a leaf or spine AS number",
        ),
    ],
)
def test_impossible_designs_are_refused(data: dict[str, Any], key: str, problem: str) -> None:
    error = _refusal(data)
    assert (error.file, error.key, error.problem) == ("f.yaml", key, problem)


def test_spine_asns_of_many_pods_must_not_reach_the_leaves() -> None:
    # 204 single-homed leaves, 2 a pod (4-port spines: 2 down): 102 pods, spine ASNs
    # 65000..65101 against leaf ASNs 65101..65304.
    data: dict[str, Any] = {
        "servers": {"count": 204, "nics": 1, "dual_homed": False},
        "leaves": {"count": 204, "ports": 4},
        "spines": {"count": 1, "ports": 4},
        "superspines": {"count": 2, "ports": 128},
    }
    error = _refusal(data)
    assert error.key == "asn.leaf_base"
    assert error.problem == "leaf AS numbers 65101..65304 overlap the spines' 65000..65101"
    data["asn"] = {"leaf_base": 4200000000}
    assert _design(data).sizing.pods == 102


def test_three_tier_refusals() -> None:
    base: dict[str, Any] = {
        "spines": {"count": 2, "ports": 8},
        "leaves": {"count": 12, "ports": 8, "uplinks_per_spine": 1, "peer_link_ports": 1},
        "servers": {"count": 12},
    }
    assert _design(base).sizing.pods == 3  # 4 leaves a pod
    few = _refusal({**base, "superspines": {"ports": 5}})
    assert few.key == "superspines.ports"
    many = _refusal({**base, "superspines": {"count": 5}})
    assert many.problem == "spines have 4 ports up, too few for 5 super-spines"
    narrow = _refusal({**base, "spines": {"count": 2, "ports": 2}})
    assert narrow.key == "spines.ports"


# --------------------------------------------------------------------------- addressing
def test_pool_hands_out_hosts_pairs_and_subnets_by_position() -> None:
    pool = Pool("10.0.0.0/29", "loopbacks", "f.yaml")
    assert [str(pool.host(i)) for i in (2, 0, 1)] == ["10.0.0.3", "10.0.0.1", "10.0.0.2"]
    subnets = Pool("10.2.0.0/24", "servers", "f.yaml")
    assert str(subnets.subnet(1, 28)) == "10.2.0.16/28"
    assert str(subnets.subnet(0, 30)) == "10.2.0.0/30"
    pairs = Pool("10.1.0.0/30", "fabric", "f.yaml")
    assert pairs.pair(0) == ("10.1.0.0/31", "10.1.0.1/31", "10.1.0.0/31")
    assert pairs.pair(-1) == ("10.1.0.2/31", "10.1.0.3/31", "10.1.0.2/31")
    for position in (2, -2):  # past the end, and onto a /31 already handed out
        with pytest.raises(DesignError) as info:
            pairs.pair(position)
        assert str(info.value) == (
            "f.yaml: addressing.fabric: pool 10.1.0.0/30 is too small: "
            "2 /31 links fit, more are needed"
        )


def test_subnet_bigger_than_the_pool_is_refused() -> None:
    with pytest.raises(DesignError) as info:
        Pool("10.2.0.0/28", "servers", "f.yaml").subnet(0, 27)
    assert info.value.key == "addressing.servers"


def test_subnet_for_counts_network_and_broadcast() -> None:
    assert subnet_for(2) == 30
    assert subnet_for(3) == 29
    assert subnet_for(6) == 29
    assert subnet_for(7) == 28
    assert subnet_for(254) == 24


def test_server_names_padded_to_the_width_asked_and_unpadded_by_default() -> None:
    servers = {"count": 16, "name_prefix": "gpu"}
    assert _design({"servers": servers}).nodes("server")[:2] == ["gpu1", "gpu2"]
    padded = _design({"servers": servers | {"name_width": 2}}).nodes("server")
    assert padded == [f"gpu{i:02d}" for i in range(1, 17)] and padded == sorted(padded)
    assert _design({"servers": servers | {"name_width": 4}}).nodes("server")[-1] == "gpu0016"


def test_a_width_too_narrow_for_the_count_is_refused() -> None:
    with pytest.raises(InputError) as info:
        _design({"servers": {"count": 16, "name_width": 1}})
    assert (info.value.file, info.value.key) == ("f.yaml", "servers")
    assert info.value.problem == "name_width 1 cannot number 16 servers (give 2 or more, or 0)"
