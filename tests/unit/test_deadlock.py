"""Routing from configs (`twin.model.routing`), the buffer dependency graph, the deadlock validator.

Labs are examples/small.yaml generated into a temporary directory (as is, or single-homed)
and edited as a person would: a static route added to frr.conf, a value changed in
config_db.json. The incremental routing after failures is checked against routing
recomputed with the failed links down.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Collection
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labs.kernel import from_snapshot
from twin.configs.buffer_graph import BufferGraph
from twin.lab.directory import RACY_NS, Lab
from twin.model import routing as routing_model
from twin.model import wiring as wiring_model
from twin.model.fib import Fib, Link, NextHop, applied, from_json, lookup, to_json
from twin.model.routing import Routing
from twin.model.wiring import Wiring, links
from validators import registry
from validators.examples import add_frr_line, edit_json, generate, neighbor_address
from validators.result import Status
from validators.static.deadlock import dscps

SMALL = Path(__file__).resolve().parents[2] / "examples" / "small.yaml"
SINGLE_HOMED = {"servers": {"count": 8, "nics": 1, "dual_homed": False}}
"""The small fabric with four single-homed leaves, two servers on each."""


def subnet(lab: Lab, leaf: str) -> str:
    return str(lab.graph.nodes[leaf]["subnet"])


def link(lab: Lab, a: str, b: str) -> Link:
    """The physical link between two nodes."""
    return next(x for x in links(lab) if {x[0], x[2]} == {a, b})


def deadlock(lab: Lab, failures: int = 1) -> dict[str, Any]:
    """The deadlock verdicts by scope."""
    v = registry.get("deadlock")
    return {r.scope: r for r in v.check(lab, v.params({"failures": failures}))}


def recomputed(lab: Lab, failed: Collection[Link]) -> Fib:
    """Routing from scratch with the failed links' ports down."""
    wiring = Wiring(lab)
    wiring.admin_down |= {(a, pa) for a, pa, _, _ in failed} | {(b, pb) for _, _, b, pb in failed}
    return Routing(wiring).fib


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    return generate(tmp_path_factory.mktemp("dl") / "small", SMALL)


@pytest.fixture
def single(tmp_path: Path) -> Lab:
    return generate(tmp_path / "single", SMALL, **SINGLE_HOMED)


@pytest.fixture(scope="module")
def floating(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    """Single-homed; spine1 holds a backup route (distance 250) for leaf1's subnet through
    leaf3, and leaf3 always sends that subnet to spine1: when spine1 loses its eBGP route for
    it, they loop."""
    lab = generate(tmp_path_factory.mktemp("dl") / "floating", SMALL, **SINGLE_HOMED)
    target = subnet(lab, "leaf1")
    add_frr_line(lab, "spine1", f"ip route {target} {neighbor_address(lab, 'spine1', 'leaf3')} 250")
    add_frr_line(lab, "leaf3", f"ip route {target} {neighbor_address(lab, 'leaf3', 'spine1')}")
    return lab


def test_fib_from_configs_of_the_small_lab(small: Lab) -> None:
    fib = Routing(Wiring(small)).fib
    pair, other = IPv4Network(subnet(small, "leaf1")), IPv4Network(subnet(small, "leaf3"))
    assert fib["spine1"][pair] == (NextHop("leaf1", "Ethernet0"), NextHop("leaf2", "Ethernet8"))
    assert fib["leaf1"][other] == (NextHop("spine1", "Ethernet24"), NextHop("spine2", "Ethernet32"))
    assert fib["leaf1"][pair] == (NextHop("leaf2", "PortChannel100"),)
    server1 = IPv4Network(small.host("server1")["address"].split("/")[0])
    assert fib["leaf1"][server1] == (NextHop("server1", "PortChannel101"),)
    everywhere = IPv4Network("0.0.0.0/0")
    assert fib["server1"][everywhere] == (NextHop("leaf1", "nic0"), NextHop("leaf2", "nic1"))


def test_shared_spine_as_refuses_paths_back_through_the_spines(small: Lab) -> None:
    routing = Routing(Wiring(small))
    loopback = IPv4Network(small.graph.nodes["leaf1"]["loopback"])
    assert routing.fib["spine1"][loopback] == (NextHop("leaf1", "Ethernet0"),)
    delta = routing.after([link(small, "leaf1", "spine1")])
    # spine1 hears leaf1's loopback only through leaves that learnt it from spine2 (AS 65000)
    assert delta["spine1"][loopback] is None
    assert delta["leaf3"][loopback] == (NextHop("spine2", "Ethernet32"),)


def test_multipath_needs_relax_and_stops_at_maximum_paths(single: Lab) -> None:
    def without_relax(text: str) -> str:
        return text.replace(" bgp bestpath as-path multipath-relax\n", "")

    path = single.path / "configs" / "leaf1" / "frr.conf"
    path.write_text(without_relax(path.read_text()).replace("maximum-paths 64", "maximum-paths 8"))
    path = single.path / "configs" / "leaf2" / "frr.conf"
    path.write_text(path.read_text().replace("maximum-paths 64", "maximum-paths 1"))
    fib = Routing(Wiring(single)).fib
    far = IPv4Network(subnet(single, "leaf4"))
    # leaf1: the two paths [65000, 65104] are the same AS path, so relax is not needed
    assert [h.node for h in fib["leaf1"][far]] == ["spine1", "spine2"]
    assert [h.node for h in fib["leaf2"][far]] == ["spine1"]


def test_a_session_needs_both_ends_to_agree(single: Lab) -> None:
    address = neighbor_address(single, "leaf1", "spine2")
    edit_json(single, "leaf1", lambda db: db["BGP_NEIGHBOR"][address].update(asn="65009"))
    routing = Routing(Wiring(single))
    assert ("leaf1", "spine2") not in {(s.a, s.b) for s in routing.sessions}
    assert routing.fib["leaf1"][IPv4Network(subnet(single, "leaf4"))] == (
        NextHop("spine1", "Ethernet16"),
    )
    assert IPv4Network(subnet(single, "leaf1")) not in {
        p for p, hops in routing.fib["spine2"].items() if any(h.node == "leaf1" for h in hops)
    }


@pytest.mark.parametrize("name", ["small", "floating"])
def test_incremental_routing_equals_recomputing_for_every_link_and_some_pairs(
    name: str, request: pytest.FixtureRequest
) -> None:
    lab: Lab = request.getfixturevalue(name)
    routing = Routing(Wiring(lab))
    every = links(lab)
    sets = [(x,) for x in every] + list(itertools.combinations(every, 2))[::7]
    for failed in sets:
        assert applied(routing.fib, routing.after(failed)) == recomputed(lab, failed), failed


def test_the_shared_routing_follows_the_configs_on_disk(single: Lab) -> None:
    old = time.time_ns() - 10 * RACY_NS  # files written long ago: their versions can be kept
    kept = [single.path / "design.json", single.path / "ifmap.json"]
    for path in [*kept, *(single.path / "configs").rglob("*")]:
        os.utime(path, ns=(old, old))
    first = routing_model.shared(single)
    assert routing_model.shared(single) is first and first.w is wiring_model.shared(single)
    failed = (link(single, "leaf1", "spine1"),)
    delta = first.after(failed)
    assert first.after(list(failed)) is delta
    servers = [h.address.ip for h in first.w.hosts.values()]
    assert delta == Routing(Wiring(single), servers).after(failed)
    edit_json(single, "leaf1", lambda db: db["PORT"]["Ethernet16"].update(admin_status="down"))
    edited = routing_model.shared(single)
    assert edited is not first and ("leaf1", "Ethernet16") in edited.w.admin_down
    assert edited.fib == Routing(Wiring(single), servers).fib != first.fib
    spine = neighbor_address(single, "spine1", "leaf3")
    add_frr_line(single, "spine1", f"ip route {subnet(single, 'leaf1')} {spine} 250")
    assert routing_model.shared(single).w.routers["spine1"].statics
    assert routing_model.shared(Lab.open(single.path)) is not routing_model.shared(single)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_failure_checks_are_incremental_and_sound(floating: Lab, data: st.DataObject) -> None:
    failed = data.draw(st.sets(st.sampled_from(links(floating)), max_size=3))
    wiring = Wiring(floating)
    routing = Routing(wiring)
    delta = routing.after(failed)
    after = applied(routing.fib, delta)
    assert after == recomputed(floating, failed)
    graph = BufferGraph(wiring, routing.fib, dscps(floating))
    if not graph.may_close_cycle(graph.gains(delta)):
        assert BufferGraph(wiring, after, dscps(floating)).cycles() == []


def ip_route_json(fib: Fib, lab: Lab, switch: str) -> list[dict[str, Any]]:
    """A switch's FIB written as `ip -j route` prints it (gateways are not looked at)."""
    names = {port: n["netns"] for port, n in lab.ifmap[switch].items()}
    wiring = Wiring(lab)

    def dev(port: str) -> str:
        return names.get(port) or names[wiring.physical(switch, port)[0]]

    entries: list[dict[str, Any]] = []
    for prefix, hops in fib[switch].items():
        dst = str(prefix.network_address) if prefix.prefixlen == 32 else str(prefix)
        if not hops:
            entries.append({"type": "blackhole", "dst": dst, "flags": []})
        elif len(hops) == 1:
            entries.append(
                {"dst": dst, "gateway": "192.0.2.1", "dev": dev(hops[0].port), "flags": []}
            )
        else:
            nexthops = [
                {"gateway": "192.0.2.1", "dev": dev(h.port), "weight": 1, "flags": []} for h in hops
            ]
            nexthops.append(
                {"gateway": "192.0.2.9", "dev": dev(hops[0].port), "flags": ["linkdown"]}
            )
            entries.append({"dst": dst, "protocol": "bgp", "nexthops": nexthops, "flags": []})
    entries.append({"dst": "fe80::/64", "dev": "Ethernet0", "flags": []})
    return entries


def test_snapshot_of_a_live_fib_reads_back_as_the_same_fib(small: Lab) -> None:
    fib = Routing(Wiring(small)).fib
    snapshot = {s: ip_route_json(fib, small, s) for s in small.switches()}
    assert from_snapshot(Wiring(small), snapshot) == fib


def test_a_fib_written_as_json_reads_back_as_the_same_fib(small: Lab) -> None:
    fib = Routing(Wiring(small)).fib
    assert from_json(json.loads(json.dumps(to_json(fib)))) == fib


def test_a_prefix_takes_its_first_usable_route_as_the_kernel_does(small: Lab) -> None:
    """The twin holds an SVI's subnet on the peer-link and, after it, a fallback blackhole
    (metric 4000): the kernel lists a prefix's routes best first and uses the first whose next
    hop is usable."""
    fib = Routing(Wiring(small)).fib
    subnet = small.graph.nodes["leaf1"]["subnet"]
    routes = ip_route_json(fib, small, "leaf1")
    fallback = {"type": "blackhole", "dst": subnet, "metric": 4000, "flags": []}
    svi = next(i for i, e in enumerate(routes) if e["dst"] == subnet)
    routes.insert(svi + 1, fallback)
    assert from_snapshot(Wiring(small), {"leaf1": routes})["leaf1"] == fib["leaf1"]
    routes[svi]["flags"] = ["linkdown"]
    assert from_snapshot(Wiring(small), {"leaf1": routes})["leaf1"][IPv4Network(subnet)] == ()


def test_small_lab_graph_has_one_queue_per_port_and_no_cycle(small: Lab) -> None:
    wiring = Wiring(small)
    graph = BufferGraph(wiring, Routing(wiring).fib, dscps(small))
    assert len(graph.classes) == 2
    # leaves: 2 servers and 2 uplinks each; spines: 4 downlinks; the peer-links carry nothing
    assert len(graph.vertices) == 4 * 4 + 2 * 4
    assert {q[2] for q in graph.vertices} == {3}
    assert graph.cycles() == []


def test_a_loop_is_no_deadlock_where_one_hop_is_lossy(single: Lab) -> None:
    target = subnet(single, "leaf1")
    for spine in ("spine1", "spine2"):
        add_frr_line(single, spine, f"ip route {target} {neighbor_address(single, spine, 'leaf3')}")
    assert deadlock(single, 0)["priority 3"].status is Status.FAIL

    def lossy_uplinks(db: Any) -> None:
        for port in ("Ethernet16", "Ethernet24"):
            db["PORT_QOS_MAP"][port]["pfc_enable"] = ""

    edit_json(single, "leaf3", lossy_uplinks)
    assert deadlock(single, 0)["priority 3"].status is Status.PASS


def test_a_priority_the_configs_make_lossless_gets_its_own_graph(single: Lab) -> None:
    def rdma_on_4(db: Any) -> None:
        db["DSCP_TO_TC_MAP"]["RDMA"]["26"] = "4"
        for entry in db["PORT_QOS_MAP"].values():
            if "pfc_enable" in entry:
                entry["pfc_enable"] = "3,4"

    edit_json(single, "spine2", rdma_on_4)
    results = deadlock(single, 0)
    assert list(results) == ["priority 3", "priority 4"]
    assert results["priority 4"].status is Status.PASS


def test_a_single_failure_that_closes_a_loop_is_named(floating: Lab) -> None:
    results = deadlock(floating)
    assert results["priority 3"].status is Status.PASS
    failures = results["priority 3, 1-link failures"]
    assert failures.status is Status.FAIL
    failed = {f.where for f in failures.findings}
    a, pa, b, pb = link(floating, "leaf1", "spine1")
    assert f"{a}:{pa}-{b}:{pb} down" in failed
    ring = next(f.message for f in failures.findings if f.where == f"{a}:{pa}-{b}:{pb} down")
    assert ring.startswith("leaf3:Ethernet16:3 -> spine1:Ethernet16:3 -> leaf3:Ethernet16:3")


def test_pairs_of_failures_on_request(single: Lab) -> None:
    """spine1 and leaf3 back each other up for leaf1's subnet: one uplink of leaf1 failing
    leaves a path through spine2; both failing makes the backups loop."""
    target = subnet(single, "leaf1")
    add_frr_line(
        single, "spine1", f"ip route {target} {neighbor_address(single, 'spine1', 'leaf3')} 250"
    )
    add_frr_line(
        single, "leaf3", f"ip route {target} {neighbor_address(single, 'leaf3', 'spine1')} 250"
    )
    add_frr_line(
        single, "leaf3", f"ip route {target} {neighbor_address(single, 'leaf3', 'spine2')} 250"
    )
    assert deadlock(single, 1)["priority 3, 1-link failures"].status is Status.PASS
    pairs = deadlock(single, 2)["priority 3, 2-link failures"]
    assert pairs.status is Status.FAIL
    uplinks = [link(single, "leaf1", s) for s in ("spine1", "spine2")]
    both = " + ".join(f"{a}:{pa}-{b}:{pb}" for a, pa, b, pb in uplinks) + " down"
    assert both in {f.where for f in pairs.findings}
    assert pairs.figures["failure_sets"] == len(links(single)) * (len(links(single)) - 1) // 2


def test_lookup_is_longest_prefix_first() -> None:
    routes = {IPv4Network("10.0.0.0/8"): (NextHop("a", "p"),), IPv4Network("10.2.0.0/16"): ()}
    assert lookup(routes, IPv4Address("10.2.3.4")) == ()
    assert lookup(routes, IPv4Address("11.0.0.1")) is None
