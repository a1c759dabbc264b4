"""The simulator's clock for a scenario written in live seconds: the example scenarios' faults
fall inside their collectives (`sim.time_scale: auto`, `twin.scenario.plan.time_scale`), so
that failover's convergence judges flows that crossed them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.simlab import small_lab
from twin.cli.main import main
from twin.intent.inputs import parse_model
from twin.lab.directory import Lab
from twin.scenario import plan
from twin.scenario.model import Scenario

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "examples" / "scenarios"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_lab(tmp_path_factory.mktemp("lab") / "small")


def scale(lab: Path, scenario: dict[str, Any]) -> float:
    return plan.time_scale(Lab.open(lab), parse_model(Scenario, scenario, "test"))


RING = {"at": 0, "kind": "all_reduce", "message": 4_000_000, "iterations": 6}


def test_auto_keeps_simulated_time_and_maps_live_seconds(lab: Path) -> None:
    bound = plan.analytical(
        Lab.open(lab), parse_model(Scenario, {"traffic": [RING]}, "t").traffic[0]
    )
    assert bound is not None
    done = 6 * bound["bound_s"]
    # A fault 1 ms into a ring the intent lets take 4 x its bound: already simulated time.
    native = {
        "traffic": [RING],
        "faults": [{"at": 0.001, "fault": "link-down", "link": "leaf1:spine1"}],
    }
    assert scale(lab, native) == 1.0
    # Faults 3 s and 6 s into a 10 s phase: live seconds, the phase's 10 s its bound.
    live = {
        "traffic": [{**RING, "duration": 10}],
        "faults": [{"at": 3, "fault": "link-down", "link": "leaf1:spine1"},
                   {"at": 6, "fault": "link-up", "link": "leaf1:spine1"}],
    }  # fmt: skip
    assert scale(lab, live) == pytest.approx(done / 10)
    # A number is taken as it is.
    assert scale(lab, {**live, "sim": {"time_scale": 1}}) == 1.0


@pytest.mark.parametrize("name", ["uplink-failure", "leaf-reboot"])
def test_the_example_scenarios_faults_are_crossed_on_the_simulator(
    lab: Path, tmp_path: Path, name: str
) -> None:
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "twin.cli.main", "run", "--backend", "sim", "--no-static"]
    done = subprocess.run(
        [*argv, "--out", str(out), str(lab), str(SCENARIOS / f"{name}.yaml")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode in (0, 1), done.stderr[-2000:]
    run = json.loads((out / "run.json").read_text())
    (phase,) = [p for p in run["phases"] if p["flows"]]
    assert run["faults"]
    for fault in run["faults"]:  # each fired while the collective still ran
        assert phase["start"] <= fault["began"] <= phase["end"], (fault, phase)
    results = json.loads((out / "report.json").read_text())["results"]
    (convergence,) = [
        r for r in results if (r["validator"], r["scope"]) == ("failover", "convergence")
    ]
    assert convergence["status"] == "pass" and "crossed fault1" in convergence["reason"], (
        convergence
    )
    assert json.loads((out / "sim.json").read_text())["time_scale"] < 0.001


def test_the_incast_example_plays_in_milliseconds_and_still_drives_dcqcn(
    lab: Path, tmp_path: Path
) -> None:
    """examples/scenarios/incast.yaml (no collective: `auto` would play its 5 live seconds as
    5 s of line-rate incast, 50 s of CPU on a 38-server fabric) is played as 50 ms, in which
    the incast still congests the receiver: every sender's queue pairs are ECN-marked and cut
    by CNPs, with no lossless drop."""
    out = tmp_path / "run"
    argv = ["run", str(lab), str(SCENARIOS / "incast.yaml"), "--backend", "sim", "--no-static"]
    assert main([*argv, "--out", str(out)]) == 0
    sim = json.loads((out / "sim.json").read_text())
    assert sim["simulated_s"] <= 0.06
    assert sim["core_cpu_s"] > 0 and sim["packet_hops"] > 0  # what a hop costs the core
    flows = json.loads((out / "flows.json").read_text())
    assert len(flows) == 12 and {f["src"] for f in flows} == {"server1", "server2", "server3"}
    for flow in flows:
        assert flow["cnps"] > 0 and flow["ecn_received"].get("3", 0) > 0, flow
        assert flow["lost"] == 0, flow
