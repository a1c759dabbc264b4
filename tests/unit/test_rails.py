"""Rail-optimized designs (docs/rails.md): which NIC goes to which leaf, addressing, sizing by
scalable unit in two and three tiers, and collectives that stay on their rail. Expectations
come from the intent's figures (servers, NICs, a unit's size), never from the design read
back."""

from __future__ import annotations

import ipaddress
import itertools
from pathlib import Path
from typing import Any

import pytest
import yaml

from traffic import collectives
from twin.design.graph import Design, design
from twin.errors import DesignError, InputError
from twin.intent import fabric as intent
from twin.lab import directory as labdir
from twin.lab.directory import Lab
from twin.scenario import plan
from twin.scenario.model import Traffic

REPO = Path(__file__).resolve().parents[2]
SERVERS, NICS, PER_UNIT = 4, 4, 2
"""The small rail fabric: 4 servers x 4 NICs; 4-port leaves hold 2 servers (2 down, 2 up)."""
RAIL_SERVERS: dict[str, Any] = {
    "count": SERVERS,
    "nics": NICS,
    "dual_homed": False,
    "rails": True,
}
SMALL: dict[str, Any] = {
    "name": "rails",
    "spines": {"count": 2, "ports": 32},
    "leaves": {"ports": 4, "uplinks_per_spine": 1},
    "servers": RAIL_SERVERS,
}


def _design(data: dict[str, Any]) -> Design:
    return design(intent.parse(data, "f.yaml"), "f.yaml")


def _leaf_of(server: int, nic: int, per_unit: int = PER_UNIT, nics: int = NICS) -> str:
    """Rail `nic`'s leaf of the scalable unit of server `server` (1-based): units of
    `per_unit` servers, each with one leaf per rail, numbered unit by unit."""
    unit = (server - 1) // per_unit
    return f"leaf{unit * nics + nic + 1}"


def test_nic_k_of_every_server_of_a_unit_goes_to_rail_k_leaf() -> None:
    d = _design(SMALL)
    g = d.graph
    assert len(d.nodes("leaf")) == SERVERS // PER_UNIT * NICS
    for s in range(1, SERVERS + 1):
        for k in range(NICS):
            endpoint = f"server{s}r{k}"
            links = [(p, e["b_port"]) for _, p, e in g.edges(endpoint, data=True)]
            assert links == [(_leaf_of(s, k), f"nic{k}")], endpoint
            assert g.nodes[endpoint]["rail"] == k and g.nodes[endpoint]["server"] == f"server{s}"
    assert len(d.nodes("server")) == SERVERS * NICS
    # a leaf holds one rail of one unit: NIC k of that unit's servers, nothing else
    for leaf in d.nodes("leaf"):
        rails = {g.nodes[n]["rail"] for n in g.neighbors(leaf) if g.nodes[n]["role"] == "server"}
        assert rails == {g.nodes[leaf]["rail"]}


def test_rail_addresses_are_unique_and_each_rail_has_one_block() -> None:
    d = _design({**SMALL, "servers": {**RAIL_SERVERS, "count": 6}, "leaves": {"ports": 4}})
    g = d.graph
    addresses = [g.nodes[n]["address"] for n in d.nodes("server")]
    addresses += [g.nodes[n]["svi"] for n in d.nodes("leaf")]
    ips = [ipaddress.IPv4Interface(a).ip for a in addresses]
    assert len(set(ips)) == len(ips) == 6 * NICS + len(d.nodes("leaf"))
    for n in d.nodes("server"):
        leaf = g.nodes[n]["leaves"][0]
        assert ipaddress.IPv4Interface(g.nodes[n]["address"]).ip in ipaddress.IPv4Network(
            g.nodes[leaf]["subnet"]
        )
    # rail k's subnets come before rail k + 1's: each rail is one contiguous block
    by_rail: dict[int, list[ipaddress.IPv4Network]] = {}
    for leaf in d.nodes("leaf"):
        by_rail.setdefault(g.nodes[leaf]["rail"], []).append(
            ipaddress.IPv4Network(g.nodes[leaf]["subnet"])
        )
    spans = [(min(n[0] for n in v), max(n[-1] for n in v)) for _, v in sorted(by_rail.items())]
    assert all(a[1] < b[0] for a, b in itertools.pairwise(spans))


def test_eight_rails_of_128_servers_in_two_tiers() -> None:
    fabric = intent.load(REPO / "examples" / "rail.yaml")
    d = design(fabric)
    assert d.sizing.pods == 1 and d.sizing.superspines == 0
    per_unit = fabric.leaves.ports // 2  # 1:1: half the ports down
    assert len(d.nodes("leaf")) == 128 // per_unit * 8
    assert len(d.nodes("server")) == 128 * 8
    assert _leaf_of(128, 7, per_unit, 8) == "leaf32"
    assert [p for _, p in d.graph.edges("server128r7")] == ["leaf32"]


def test_three_tiers_keep_a_scalable_unit_in_one_pod() -> None:
    d = _design(
        {
            **SMALL,
            "servers": {**RAIL_SERVERS, "count": 8},
            "spines": {"count": 2, "ports": 8},
            "superspines": {"ports": 16},
        }
    )
    assert d.sizing.pods > 1 and d.sizing.leaves_per_pod % NICS == 0
    g = d.graph
    for s in range(1, 9):
        pods = {g.nodes[_leaf_of(s, k)]["pod"] for k in range(NICS)}
        assert len(pods) == 1, s


def test_dual_homed_rails_go_to_a_leaf_pair_per_rail() -> None:
    d = _design(
        {
            "name": "rails",
            "spines": {"count": 2, "ports": 32},
            "leaves": {"ports": 8, "uplinks_per_spine": 1, "peer_link_ports": 1},
            "servers": {"count": 8, "nics": 2, "dual_homed": True, "rails": True},
        }
    )
    g = d.graph
    for k in range(2):
        ports = sorted(e["b_port"] for *_, e in g.edges(f"server1r{k}", data=True))
        assert ports == [f"nic{k}p0", f"nic{k}p1"]
        a, b = g.nodes[f"server1r{k}"]["leaves"]
        assert g.nodes[a]["mlag_peer"] == b and g.nodes[a]["rail"] == k


def test_leaves_must_come_in_whole_units() -> None:
    with pytest.raises(DesignError, match="multiples of 4"):
        _design({**SMALL, "leaves": {"count": 6, "ports": 4}})


def test_nine_nics_are_refused_and_rails_are_written_out_only_when_set() -> None:
    with pytest.raises(InputError, match=r"servers\.nics"):
        intent.parse({"servers": {"nics": 9, "rails": True}}, "f.yaml")
    assert "rails" not in intent.dump(intent.parse({}, "f.yaml"))
    rail = intent.parse(SMALL, "f.yaml")
    assert intent.parse(yaml.safe_load(intent.dump(rail)), "f.yaml") == rail


def test_rail_local_schedule_keeps_every_flow_on_its_rail() -> None:
    ranks = [f"s{s}r{k}" for s in range(4) for k in range(8)]
    rails = [k for _ in range(4) for k in range(8)]
    s = collectives.rail_local(collectives.ring_all_reduce, ranks, rails, 8_000_000, 2)
    rail = dict(zip(ranks, rails, strict=True))
    flows = [f for step in s.steps for f in step]
    assert flows and all(rail[f.src] == rail[f.dst] for f in flows)
    assert len(s.steps) == 2 * (4 - 1)  # each rail's ring over its 4 servers, side by side
    # each rank's ring carries S/8: 2(n-1)/n of it
    assert {s.sent_by(r) for r in ranks} == {2 * 3 * 1_000_000 // 4}


@pytest.fixture(scope="module")
def rail_lab(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    out = tmp_path_factory.mktemp("rails") / "lab"
    labdir.generate(intent.parse(SMALL, "f.yaml"), out, "f.yaml")
    return Lab.open(out)


def test_the_default_all_reduce_stays_on_its_rails(rail_lab: Lab) -> None:
    phase = Traffic.model_validate(
        {"name": "ar", "kind": "all_reduce", "at": 0, "duration": 1, "servers": "all", "qps": 2}
    )
    rail = {f"server{s}r{k}": k for s in range(1, SERVERS + 1) for k in range(NICS)}
    flows = plan.phase_flows(rail_lab, phase)
    assert {(rail[f.src], rail[f.dst]) for f in flows} == {(k, k) for k in range(NICS)}
    timeline = plan.phase(rail_lab, 0, phase)
    assert timeline.rails == [rail[r] for r in timeline.ranks]
    bound = plan.analytical(rail_lab, phase)
    assert bound is not None and bound["link_gbps"] == 400  # a rank is one NIC


def test_a_rail_lab_has_one_host_file_per_nic(rail_lab: Lab) -> None:
    host = rail_lab.host("server2r3")
    assert [i["name"] for i in host["interfaces"]] == ["nic3"]
    assert host["interfaces"][0]["peer"] == _leaf_of(2, 3)
    assert host["bond"] is None
