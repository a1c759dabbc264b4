"""Experiment files, units, routes and the errors a person sees for a wrong file."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labs.sim import ExperimentError, Link, load, simulate
from labs.sim import build as core_build
from labs.sim.loader import experiment
from labs.sim.routing import ROUTE_COUNT_BITS, RoutingError, forwarding, route_rows
from labs.sim.units import UnitError, rate, seconds, size

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"


def test_every_example_loads() -> None:
    files = sorted(EXAMPLES.glob("*.yaml"))
    assert len(files) >= 6
    for path in files:
        exp, seed = load(path)
        assert exp.switches and exp.hosts and exp.links and seed == 1


def test_units() -> None:
    assert rate("40Gbps") == 40e9 and rate(5e9) == 5e9
    assert seconds("500ns") == 5e-7 and seconds("2ms") == 2e-3
    assert size("1.5MB") == 1_500_000 and size("18KiB") == 18432
    with pytest.raises(UnitError, match="unknown unit"):
        rate("40Gbit")
    with pytest.raises(UnitError):
        size(True)


def test_qos_merges_over_defaults() -> None:
    exp = experiment(
        {
            "qos": {"queues": {3: {"kmin": "5KB"}}, "pgs": {3: {"dynamic_th": -2}}},
            "switches": [{"name": "sw", "qos": {"queues": {3: {"pmax": 0.2}}}}],
            "hosts": ["h"],
            "links": [["h:eth0", "sw:Ethernet0", "100G", "1us"]],
        }
    )
    q = exp.switches[0].qos.queue(3)
    assert (q.ecn, q.kmin, q.kmax, q.pmax) == (True, 5000, 1_500_000, 0.2)
    assert exp.switches[0].qos.queue(6).strict  # untouched default
    assert exp.switches[0].qos.pg(3).alpha == 0.25
    assert exp.links[0].propagation == 1e-6


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"switchs": []}, "unknown keys"),
        ({"hosts": [{"name": "h", "nic": 1}]}, r"hosts\[0\]: unknown key 'nic'"),
        ({"links": [["a:p", "b:q"]]}, r"links\[0\]"),
        ({"flows": [{"name": "f", "src": "a", "dst": "b", "cc": "reno"}]}, r"flows\[0\].cc"),
        ({"faults": [{"flap": "a:p"}]}, r"faults\[0\]"),
        ({"qos": {"ecn_at": "ingress"}}, r"qos.ecn_at: 'ingress' is not one of dequeue, enqueue"),
        ({"duration": "soon"}, r"^duration: "),
        ({"packet_bytes": "big"}, r"^packet_bytes: "),
    ],
)
def test_errors_name_the_place(data: dict[str, object], message: str) -> None:
    with pytest.raises(ExperimentError, match=message):
        experiment(data)


def test_unknown_flow_endpoint_is_reported() -> None:
    exp = experiment(
        {
            "switches": [{"name": "sw"}],
            "hosts": ["h"],
            "links": [["h:eth0", "sw:Ethernet0", "100G"]],
            "flows": [{"name": "f", "src": "h", "dst": "nowhere"}],
        }
    )
    with pytest.raises(ExperimentError, match="'nowhere' is not a host"):
        simulate(exp)


@pytest.mark.parametrize(
    ("flow", "qos", "message"),
    [
        ({"dscp": 64}, {}, "dscp 0-63"),
        ({"ttl": 0}, {}, "ttl 1-255"),
        ({"priority": 9}, {}, "priority 9"),
        ({}, {"tc_to_pg": [0, 0, 0]}, "tc_to_pg: 8 values"),
        ({}, {"dscp_to_tc": {26: 8}}, "traffic classes 0-7"),
    ],
)
def test_values_the_core_cannot_index_are_refused(
    flow: dict[str, object], qos: dict[str, object], message: str
) -> None:
    exp = experiment(
        {
            "qos": qos,
            "switches": [{"name": "sw"}],
            "hosts": ["a", "b"],
            "links": [["a:eth0", "sw:Ethernet0", "100G"], ["b:eth0", "sw:Ethernet4", "100G"]],
            "flows": [{"name": "f", "src": "a", "dst": "b", "size": 1000, **flow}],
        }
    )
    with pytest.raises(ExperimentError, match=message):
        simulate(exp)


@pytest.mark.parametrize(
    ("section", "values", "message"),
    [
        ("checks", {"interval": 0}, "checks.interval must be positive"),
        ("dcqcn", {"cnp_interval": "0us"}, "dcqcn.cnp_interval must be positive"),
        ("monitor", {"interval": -1}, "must not be negative"),
    ],
)
def test_periods_that_would_spin_are_refused(
    section: str, values: dict[str, object], message: str
) -> None:
    exp = experiment(
        {
            section: values,
            "switches": [{"name": "sw"}],
            "hosts": ["a"],
            "links": [["a:eth0", "sw:Ethernet0", "100G"]],
        }
    )
    with pytest.raises(ExperimentError, match=message):
        simulate(exp)


def test_more_port_profiles_than_a_port_can_index_are_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a port holds its profile's index in 16 bits: past MAX_PROFILES distinct ones, an error
    monkeypatch.setattr(core_build, "MAX_PROFILES", 1)
    exp = experiment(
        {
            "switches": [{"name": "sw"}],
            "hosts": ["a", "b"],  # ports at two speeds: two profiles
            "links": [["a:eth0", "sw:Ethernet0", "100G"], ["b:eth0", "sw:Ethernet4", "400G"]],
        }
    )
    with pytest.raises(ExperimentError, match="more than 1 distinct port QoS profiles"):
        simulate(exp)


def test_prefix_routes_and_shortest_paths() -> None:
    exp = experiment(
        {
            "switches": [
                {
                    "name": "a",
                    "routes": {"10.0.1.0/24": ["Ethernet4"], "10.0.0.0/16": ["Ethernet8"]},
                },
                {"name": "b"},
                {"name": "c"},
            ],
            "hosts": [{"name": "h1", "address": "10.0.1.5"}, {"name": "h2", "address": "10.0.2.5"}],
            "links": [
                ["a:Ethernet4", "b:Ethernet0", "100G"],
                ["a:Ethernet8", "c:Ethernet0", "100G"],
                ["h1:eth0", "b:Ethernet4", "100G"],
                ["h2:eth0", "c:Ethernet4", "100G"],
                ["b:Ethernet8", "c:Ethernet8", "100G"],
            ],
        }
    )
    table = forwarding(exp.switches, exp.hosts, exp.links)
    assert table["a"] == {"h1": ["a:Ethernet4"], "h2": ["a:Ethernet8"]}  # longest prefix wins
    assert table["b"]["h2"] == ["b:Ethernet8"] and table["c"]["h1"] == ["c:Ethernet8"]


def test_routes_by_name_for_every_host_read_a_switch_at_a_time() -> None:
    """Every switch routing every host by name (a lab's tables) takes the by-name path; a
    route through a port the switch lacks is refused as the host-by-host path refuses it."""
    links = [
        ["a:Ethernet4", "b:Ethernet0", "100G"],
        ["h1:eth0", "b:Ethernet4", "100G"],
        ["h2:eth0", "a:Ethernet8", "100G"],
    ]
    routes = {
        "a": {"h1": ["Ethernet4"], "h2": ["a:Ethernet8"]},
        "b": {"h1": ["Ethernet4"], "h2": ["Ethernet0"]},
    }
    switches = [{"name": n, "routes": r} for n, r in routes.items()]
    exp = experiment({"switches": switches, "hosts": ["h1", "h2"], "links": links})
    table = forwarding(exp.switches, exp.hosts, exp.links)
    assert table == {
        "a": {"h1": ["a:Ethernet4"], "h2": ["a:Ethernet8"]},
        "b": {"h1": ["b:Ethernet4"], "h2": ["b:Ethernet0"]},
    }
    assert table["b"]["h1"] is not table["b"]["h2"]
    routes["b"] = {"h1": ["Ethernet9"], "h2": ["Ethernet7"]}
    switches = [{"name": n, "routes": r} for n, r in routes.items()]
    exp = experiment({"switches": switches, "hosts": ["h1", "h2"], "links": links})
    with pytest.raises(RoutingError, match="b: route to h1 via unknown port 'b:Ethernet9'"):
        forwarding(exp.switches, exp.hosts, exp.links)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(["s1", "s2", "h1", "s3", "h2", "h3"]), unique=True, min_size=1),
    st.lists(st.sampled_from(["h1", "h2", "h3", "h4"]), unique=True),
    st.data(),
)
def test_route_rows_read_back_as_the_table(
    nodes: list[str], hosts: list[str], data: st.DataObject
) -> None:
    """Any table (nodes without a row among those with one, lists shared by several hosts or
    equal but apart) reads back cell by cell as the core reads it."""
    pool = [["p0"], ["p0", "p1"], [], ["p2"]]
    table: dict[str, dict[str, list[str]]] = {}
    for node in nodes:
        if node.startswith("s") and data.draw(st.booleans()):
            picks = data.draw(st.lists(st.integers(0, 7), min_size=len(hosts), max_size=len(hosts)))
            table[node] = {
                h: pool[k] if k < 4 else list(pool[k - 4])
                for h, k in zip(hosts, picks, strict=True)
            }
    ports = ["p0", "p1", "p2"]
    rows = route_rows(table, nodes, hosts, {p: i for i, p in enumerate(ports)})
    mask = (1 << ROUTE_COUNT_BITS) - 1
    for i, node in enumerate(nodes):
        for j, host in enumerate(hosts):
            cell = rows.cell(i, j)
            start = cell >> ROUTE_COUNT_BITS
            got = [ports[k] for k in rows.hops[start : start + (cell & mask)]]
            assert got == table.get(node, {}).get(host, [])


def test_route_rows_hold_each_next_hop_list_once() -> None:
    # a spine reaching 4 remote hosts over the same 2 uplinks; a leaf two of them by their own
    # ports, the two others over its uplink
    up = ["s:up0", "s:up1"]
    table = {
        "s": {"h1": up, "h2": up, "h3": up, "h4": up},
        "l": {"h1": ["l:d1"], "h2": ["l:d2"], "h3": ["l:up"], "h4": ["l:up"]},
    }
    nodes, hosts = ["s", "l", "h1"], ["h1", "h2", "h3", "h4"]
    ports = ["s:up0", "s:up1", "l:d1", "l:d2", "l:up"]
    rows = route_rows(table, nodes, hosts, {p: i for i, p in enumerate(ports)})
    mask = (1 << ROUTE_COUNT_BITS) - 1

    def hops(node: int, host: int) -> list[str]:
        cell = rows.cell(node, host)
        start = cell >> ROUTE_COUNT_BITS
        return [ports[i] for i in rows.hops[start : start + (cell & mask)]]

    for i, node in enumerate(nodes):
        for j, host in enumerate(hosts):
            assert hops(i, j) == table.get(node, {}).get(host, [])
    # the leaf's ports to h1 and h2 are theirs alone: out of the rows, which h1 and h2 share
    assert rows.n_dest == 2 and rows.dest[0] == rows.dest[1] != rows.dest[2] == rows.dest[3]
    assert rows.own_start.tolist() == [0, 1, 2, 2, 2]
    assert rows.own.reshape(-1, 2)[:, 0].tolist() == [1, 1]  # both at the leaf
    assert sorted(rows.hops.tolist()) == [0, 1, 2, 3, 4]  # the uplinks once, not once per host


def test_link_delay_from_length() -> None:
    assert Link("a:p", "b:q", 1e9, length_m=200).propagation == pytest.approx(1e-6)
