"""The main job's hybrid run without root: the fake backend stands in for the live twin (its
FIB snapshots at the faults), the simulator plays the data plane with them, one verdict."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.simlab import small_lab
from twin.scenario.records import SCHEMA
from validators import registry

REPO = Path(__file__).resolve().parents[2]
SCENARIO: dict[str, Any] = {
    "name": "hybrid",
    "settle": 1,
    "traffic": [
        {"name": "allreduce", "at": 0, "duration": 8, "kind": "all_reduce", "servers": "all",
         "qps": 2, "pps": 25, "message": 4000000, "iterations": 8},
    ],
    "faults": [
        {"at": 2, "fault": "link-down", "link": "leaf1:spine1"},
        {"at": 4, "fault": "link-down", "link": "server2:nic0"},
        {"at": 6, "fault": "link-up", "link": "server2:nic0"},
    ],
    "sim": {"time_scale": 0.0001},
    "validate": {"pfc_behaviour": {}, "ecn_behaviour": {}, "no_deadlock": {},
                 "collective_efficiency": {}, "deadlock_observed": {}},
}  # fmt: skip
DATA_PLANE = ["pfc_behaviour", "ecn_behaviour", "no_deadlock", "collective_efficiency"]
"""The rows the main job's table adds from the simulator."""


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    lab = small_lab(tmp_path_factory.mktemp("lab") / "small")
    scenario = lab.parent / "scenario.yaml"
    scenario.write_text(yaml.safe_dump(SCENARIO))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "twin.cli.main", "run", "--backend", "fake", "--sim"]
    done = subprocess.run([*argv, str(lab), str(scenario)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    (lab.parent / "stdout.txt").write_text(done.stdout)
    return sorted((lab / "runs").iterdir())[-1]


def test_one_run_holds_both_planes(run_dir: Path) -> None:
    run = json.loads((run_dir / "run.json").read_text())
    assert run["backend"] == "fake+sim" and run["schema"] == SCHEMA
    assert run["fib_faults"] == {"fault1-link-down": 0, "fault2-link-down": 1, "fault3-link-up": 2}
    assert {"fib", "pfc", "queues", "iterations"} <= set(run["capabilities"])
    times = json.loads((run_dir / "iterations.json").read_text())["allreduce"]["times_s"]
    assert len(times) == 8 and all(t is not None for t in times)
    report = json.loads((run_dir / "report.json").read_text())["results"]
    static = {v.name for v in registry.available("static")}  # one verdict: the static ones too
    invariants = set(registry.INVARIANTS)  # judged on every run
    assert {r["validator"] for r in report} == set(SCENARIO["validate"]) | static | invariants
    assert all(r["status"] != "fail" for r in report)


def test_the_table_has_the_data_plane_rows(run_dir: Path) -> None:
    printed = (run_dir.parents[2] / "stdout.txt").read_text().splitlines()
    for name in DATA_PLANE:
        rows = [line.split() for line in printed if line.startswith(f"{name} ")]
        assert any("pass" in row for row in rows), (name, printed)
        assert not any("fail" in row for row in rows), (name, printed)


def test_the_main_job_judges_the_data_plane() -> None:
    default = yaml.safe_load((REPO / "twin" / "defaults" / "default-scenario.yaml").read_text())
    assert set(DATA_PLANE) <= set(default["validate"])
    assert default["sim"]["time_scale"] < 1  # seconds of the live run as ms of 400G traffic


def test_the_live_fibs_apply_on_the_scenario_clock(run_dir: Path) -> None:
    applied = json.loads((run_dir / "sim.json").read_text())["fibs"]
    labels = [label for _, label in applied]
    assert labels[:4] == ["start", "fault1-link-down", "fault2-link-down", "fault3-link-up"]
    # the fake snapshots half a second after each fault: 2.5 s of the scenario, x 0.0001
    assert applied[1][0] == pytest.approx(0.00025)
