"""The ECMP probe phase (`kind: ecmp_probe`) and `ecmp_spread`'s verdict from it, without root:
the scenario model and plan, the fake backend counting the probe on the uplinks, the sim
backend skipping it with a note, and the validator's bounds on counters made uneven.

The lab is examples/small.yaml with 4 spines (two MLAG pairs, 4 servers), so every leaf has 4
uplinks and the upper and lower bounds can fail apart.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from labs import registry
from labs.backend import COUNTER_FIELDS, Fault, quiet
from tests.conftest import REPO, lab_name
from twin.errors import InputError
from twin.intent import fabric as intent
from twin.lab import directory as labdir
from twin.lab.directory import Lab
from twin.scenario import model as scenarios
from twin.scenario import plan, player
from twin.scenario.model import Traffic
from twin.scenario.observations import Observations
from validators import registry as validators
from validators.dynamic.ecmp_spread import needed_flows
from validators.result import Result, Status

FAKE = registry.get("fake")
PROBE = {"name": "probe", "at": 0, "duration": 2, "kind": "ecmp_probe"}


def generate(out: Path) -> Lab:
    """examples/small.yaml with 4 spines, generated into `out` under a name of its own."""
    fabric = yaml.safe_load((REPO / "examples" / "small.yaml").read_text())
    fabric["name"] = lab_name("ep")
    fabric["spines"]["count"] = 4
    source = out.parent / f"{out.name}.yaml"
    source.write_text(yaml.safe_dump(fabric))
    labdir.generate(intent.load(source), out, str(source))
    return Lab.open(out)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """The lab deployed on the fake backend."""
    lab = generate(tmp_path_factory.mktemp("probe") / "lab")
    FAKE.deploy(lab, quiet)
    yield lab
    FAKE.destroy(lab)


def scenario_file(tmp: Path, traffic: list[dict[str, Any]], **validate: Any) -> Path:
    path = tmp / "scenario.yaml"
    body = {
        "name": "ecmp",
        "settle": 0.5,
        "traffic": traffic,
        "validate": {"ecmp_spread": validate},
    }
    path.write_text(yaml.safe_dump(body))
    return path


def play(lab: Lab, tmp: Path, *traffic: dict[str, Any]) -> Observations:
    scenario = scenarios.load(scenario_file(tmp, list(traffic or [PROBE])), lab)
    return Observations.open(player.play(lab, scenario, FAKE))


def judge(lab: Lab, obs: Observations, **given: Any) -> dict[str, Result]:
    results = validators.run_dynamic(
        lab, obs, [validators.get("ecmp_spread")], {"ecmp_spread": given}
    )
    return {r.scope: r for r in results}


def scale_uplink(obs: Observations, leaf: str, port: str, factor: float) -> Observations:
    """The run with one uplink's tx_packets multiplied by `factor` (re-opened)."""
    path = obs.path / "counters.json"
    data = json.loads(path.read_text())
    tx = COUNTER_FIELDS.index("tx_packets")
    for sample in data["samples"]:
        row = sample["c"].get(f"{leaf}:{port}")
        if row:
            row[tx] = round(row[tx] * factor)
    path.write_text(json.dumps(data))
    return Observations.open(obs.path)


# -- the scenario model and the plan ----------------------------------------------------------


def traffic(**fields: Any) -> Traffic:
    return Traffic.model_validate(fields)


def test_a_probe_sends_one_packet_per_second_per_tuple_unless_told() -> None:
    assert traffic(kind="ecmp_probe").pps == 1.0
    assert traffic(kind="ecmp_probe", pps=3).pps == 3.0
    assert traffic(kind="all_reduce").pps == 150
    assert traffic(kind="ecmp_probe", tuples=500).flows(4, leaves=8) == 4000


def test_a_probe_overlapping_other_traffic_is_refused_in_one_line(lab: Lab, tmp_path: Path) -> None:
    other = {"name": "ar", "at": 1, "duration": 3, "kind": "all_reduce", "pps": 10}
    with pytest.raises(InputError) as refused:
        scenarios.load(scenario_file(tmp_path, [PROBE, other]), lab)
    message = str(refused.value)
    assert "traffic.0" in message and "overlaps traffic.1 (ar)" in message
    assert "\n" not in message
    scenarios.load(scenario_file(tmp_path, [PROBE, {**other, "at": 2}]), lab)  # after: fine


def test_a_probe_beyond_the_machines_rate_is_refused(lab: Lab, tmp_path: Path) -> None:
    fast = {**PROBE, "tuples": 16384, "pps": 10}  # 4 leaves x 16384 x 10 frames/s
    with pytest.raises(InputError, match="655,360 frames/s"):
        scenarios.load(scenario_file(tmp_path, [fast]), lab)


def test_the_plan_sends_each_leafs_tuples_from_servers_behind_it_to_other_groups(
    lab: Lab,
) -> None:
    probe = plan.phase(lab, 0, traffic(kind="ecmp_probe", tuples=1001, pairs=2))
    assert probe.flows == [] and sorted({p.leaf for p in probe.probe}) == lab.nodes("leaf")
    for leaf in lab.nodes("leaf"):
        pairs = [p for p in probe.probe if p.leaf == leaf]
        assert [p.flows for p in pairs] == [501, 500]
        ports = [s for p in pairs for s in range(p.sport, p.sport + p.flows)]
        assert len(set(ports)) == 1001 and max(ports) <= 0xFFFF
        group = lab.graph.nodes[leaf]["group"]
        for p in pairs:
            nic = next(i for i in lab.host(p.src)["interfaces"] if i["name"] == p.nic)
            assert nic["peer"] == leaf
            assert lab.graph.nodes[p.dst]["group"] != group
        assert len({(p.src, p.dst) for p in pairs}) == 2
    assert len({p.flow_id for p in probe.probe}) == len(probe.probe)
    assert set(probe.dscp) == {p.src for p in probe.probe}


# -- the fake and sim backends, and the verdict -----------------------------------------------


def test_the_fake_counts_the_probe_on_the_uplinks_and_every_leaf_passes(
    lab: Lab, tmp_path: Path
) -> None:
    obs = play(lab, tmp_path)
    (phase,) = obs.run["phases"]
    assert phase["flows"] == [] and obs.flows == []
    results = judge(lab, obs)
    leaves = {s: r for s, r in results.items() if s.startswith("leaf")}
    assert set(leaves) == set(lab.nodes("leaf"))
    for leaf, r in leaves.items():
        assert r.status is Status.PASS, r.reason
        assert r.figures["source"] == "ecmp_probe"
        assert r.figures["flows"] == 3000 and r.figures["sent"] == 6000
        counts = [int(r.figures[p]) for p in obs.run["uplinks"][leaf]]
        assert len(counts) == 4 and sum(counts) == r.figures["packets"] == 6000
        assert r.figures["max_over_mean"] == round(max(counts) / 1500, 3) <= 1.25
        assert r.figures["min_over_mean"] == round(min(counts) / 1500, 3) >= 0.75


def test_the_upper_and_lower_bounds_fail_apart_naming_the_uplink(lab: Lab, tmp_path: Path) -> None:
    obs = play(lab, tmp_path)
    up1 = obs.run["uplinks"]["leaf1"][0]
    up3 = obs.run["uplinks"]["leaf3"][0]
    obs = scale_uplink(obs, "leaf1", up1, 2.0)  # ~3000 of ~7500: max/mean ~1.6
    obs = scale_uplink(obs, "leaf3", up3, 0.4)  # ~600 of ~5100: min/mean ~0.47, max ~1.18
    results = judge(lab, obs)
    leaf1, leaf3 = results["leaf1"], results["leaf3"]
    assert leaf1.status is Status.FAIL and leaf3.status is Status.FAIL
    assert [(f.device, f.port) for f in leaf1.findings] == [("leaf1", up1)]
    assert "max/mean" in leaf1.reason and "> 1.25" in leaf1.reason
    assert float(leaf3.figures["max_over_mean"]) <= 1.25  # max/mean alone would pass it
    assert [(f.device, f.port) for f in leaf3.findings] == [("leaf3", up3)]
    assert "min/mean" in leaf3.reason and "< 0.75" in leaf3.reason
    assert {results[s].status for s in ("leaf2", "leaf4")} == {Status.PASS}
    # A tolerance of 60 % takes both back.
    loose = judge(lab, obs, tolerance=0.6)
    assert {loose[s].status for s in ("leaf1", "leaf3")} == {Status.PASS}
    assert "tolerance" in judge(lab, obs, tolerance=1.5)["probe"].reason


def test_too_few_tuples_are_not_observable_saying_how_many_are_needed(
    lab: Lab, tmp_path: Path
) -> None:
    assert needed_flows(4, 0.25) == 768
    obs = play(lab, tmp_path, {**PROBE, "tuples": 700})
    results = judge(lab, obs)
    assert {results[s].status for s in lab.nodes("leaf")} == {Status.NOT_OBSERVABLE}
    assert "700 probe flows sent over 4 uplinks: 768 needed for +-25%" in results["leaf1"].reason
    assert judge(lab, obs, tolerance=0.3)["leaf1"].status is Status.PASS  # 534 needed


def test_uplinks_that_saw_too_few_of_the_probes_packets_are_not_observable(
    lab: Lab, tmp_path: Path
) -> None:
    obs = play(lab, tmp_path)
    for port in obs.run["uplinks"]["leaf2"]:
        obs = scale_uplink(obs, "leaf2", port, 0.1)
    leaf2 = judge(lab, obs)["leaf2"]
    assert leaf2.status is Status.NOT_OBSERVABLE
    assert "of the 6000 its probe sent into it" in leaf2.reason


def test_without_a_probe_the_verdict_says_it_came_from_collective_flows(
    lab: Lab, tmp_path: Path
) -> None:
    ring = {"name": "ar", "kind": "all_reduce", "duration": 4, "qps": 8, "pps": 50}
    results = judge(lab, play(lab, tmp_path, ring))
    judged = [r for s, r in results.items() if s.startswith("leaf")]
    assert judged
    assert all(r.figures["source"] == "collectives" for r in judged)
    assert all("collective flows" in r.reason for r in judged)


def test_the_sim_skips_the_probe_with_a_note_and_the_verdict_is_not_observable(
    tmp_path: Path,
) -> None:
    sim, lab = registry.get("sim"), generate(tmp_path / "sim")
    sim.deploy(lab, quiet)
    try:
        scenario = scenarios.load(scenario_file(tmp_path, [PROBE]), lab)
        obs = Observations.open(player.play(lab, scenario, sim))
    finally:
        sim.destroy(lab)
    assert any("ecmp_probe not played" in n for n in obs.extra("sim")["not_modelled"])
    probe = judge(lab, obs)["probe"]
    assert probe.status is Status.NOT_OBSERVABLE
    assert "sim backend did not play" in probe.reason


def test_a_probe_that_ran_into_another_phase_is_not_observable(lab: Lab, tmp_path: Path) -> None:
    obs = play(lab, tmp_path)
    run = json.loads((obs.path / "run.json").read_text())
    probe = run["phases"][0]
    late = {**probe, "index": 1, "label": "ar", "kind": "all_reduce", "probe": None}
    late["start"] = probe["end"] - 0.5  # started as planned, after the probe's nominal end
    late["end"] = probe["end"] + 5
    run["phases"].append({k: v for k, v in late.items() if v is not None})
    (obs.path / "run.json").write_text(json.dumps(run))
    results = judge(lab, Observations.open(obs.path))
    assert results["probe"].status is Status.NOT_OBSERVABLE
    assert "with ar" in results["probe"].reason and "count both" in results["probe"].reason
    assert not any(scope.startswith("leaf") for scope in results)


def test_a_fault_in_force_or_a_route_change_during_the_probe_is_not_observable(
    lab: Lab, tmp_path: Path
) -> None:
    path = scenario_file(tmp_path, [{**PROBE, "at": 1}])
    body = yaml.safe_load(path.read_text())
    body["faults"] = [{"at": 0, "fault": "link-down", "link": "leaf1:spine1"}]
    path.write_text(yaml.safe_dump(body))
    try:
        obs = Observations.open(player.play(lab, scenarios.load(path, lab), FAKE))
    finally:
        FAKE.fault(lab, Fault("link-up", link="leaf1:spine1"))
    leaf3 = lab.graph.nodes["leaf3"]["subnet"]
    during = {"t": obs.run["phases"][0]["start"] + 1, "event": "route", "node": "leaf3"}
    during |= {"prefix": lab.graph.nodes["leaf1"]["subnet"], "paths": 3, "was": 4}
    with open(obs.path / "events.jsonl", "a") as log:
        log.write(json.dumps(during) + "\n")
    results = judge(lab, Observations.open(obs.path))
    assert results["leaf1"].status is Status.NOT_OBSERVABLE
    assert "had 3 of 4 next hops at the probe (FIB fault1-link-down)" in results["leaf1"].reason
    assert results["leaf3"].status is Status.NOT_OBSERVABLE
    assert "changed during the probe (4 -> 3 paths)" in results["leaf3"].reason
    assert {results[s].status for s in ("leaf2", "leaf4")} == {Status.PASS}
    assert leaf3 != during["prefix"]


def test_a_sender_that_sent_fewer_packets_than_tuples_counts_only_the_tuples_it_sent(
    lab: Lab, tmp_path: Path
) -> None:
    obs = play(lab, tmp_path)
    run = json.loads((obs.path / "run.json").read_text())
    (pair,) = [p for p in run["phases"][0]["probe"] if p["leaf"] == "leaf1"]
    run["phases"][0]["sent"][str(pair["flow_id"])] = 500  # the first 500 tuples, once each
    (obs.path / "run.json").write_text(json.dumps(run))
    results = judge(lab, Observations.open(obs.path))
    assert results["leaf1"].status is Status.NOT_OBSERVABLE
    assert "500 probe flows sent over 4 uplinks: 768 needed" in results["leaf1"].reason
    assert results["leaf2"].status is Status.PASS


def test_a_probe_is_not_a_bulk_phase_for_lossless_isolation(lab: Lab, tmp_path: Path) -> None:
    backup = {"at": 3, "duration": 1, "kind": "backup", "src": "server1", "dst": "server3"}
    obs = play(lab, tmp_path, PROBE, backup)
    (bulk,) = [
        r
        for r in validators.run_dynamic(lab, obs, [validators.get("lossless_isolation")], {})
        if r.scope == "bulk"
    ]
    assert bulk.figures["bulk_phases"] == 1, bulk.reason
