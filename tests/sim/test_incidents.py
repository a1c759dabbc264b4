"""The incidents of examples/incidents: each fails before its fix and passes after, through
`twin run --backend sim`, and `twin diff` shows what the fix changed (no root needed)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from twin.change.incident import build

REPO = Path(__file__).resolve().parents[2]
INCIDENTS = sorted(p for p in (REPO / "examples" / "incidents").iterdir() if p.is_dir())


def twin(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "twin.cli.main", *args], capture_output=True, text=True, env=env
    )


def last_run(lab: Path) -> Path:
    return sorted((lab / "runs").iterdir())[-1]


SHOWN = {
    "1-pause-storm": ("pfc_behaviour/propagation", "dscp_marking"),
    "2-micro-bursts": ("pfc_behaviour/lossless drops", "| headroom | fabric | fail | pass |"),
    "3-deadlock": ("no_deadlock/run", "| deadlock | priority 3, 1-link failures | fail | pass |"),
    "4-pfc-storm": (
        "pfc_watchdog_behaviour/storm server6:nic0 -> leaf3:Ethernet8",
        "| pfc_watchdog | fabric | fail | pass |",
    ),
}
"""Per incident: the dynamic verdict that fails before its fix, and what `twin diff` shows."""


def failed(lab: Path) -> set[str]:
    report = json.loads((last_run(lab) / "report.json").read_text())["results"]
    return {f"{r['validator']}/{r['scope']}" for r in report if r["status"] == "fail"}


@pytest.mark.parametrize("incident", INCIDENTS, ids=lambda p: p.name)
def test_fails_before_the_fix_and_passes_after(incident: Path, tmp_path: Path) -> None:
    before, after = build(incident, tmp_path)
    scenario = str(incident / "scenario.yaml")
    verdict, shown = SHOWN[incident.name]
    broken = twin("run", "--backend", "sim", str(before), scenario)
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert verdict in failed(before), broken.stdout
    # the whole verdict, static validators included (the single-homed deadlock fabric's
    # `fib_reachability` under single-link failures too)
    fixed = twin("run", "--backend", "sim", str(after), scenario)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert not failed(after)
    diff = twin("diff", str(before), str(after))
    assert diff.returncode == 0 and "config difference" in diff.stdout, diff.stdout + diff.stderr
    assert shown in diff.stdout, diff.stdout


def test_pause_storm_fix_cuts_iteration_spread(tmp_path: Path) -> None:
    incident = REPO / "examples" / "incidents" / "1-pause-storm"
    before, after = build(incident, tmp_path)
    spread = []
    for lab in (before, after):
        twin("run", "--backend", "sim", "--no-static", str(lab), str(incident / "scenario.yaml"))
        times = json.loads((last_run(lab) / "iterations.json").read_text())["allreduce"]["times_s"]
        spread.append(statistics.pstdev(times))
    assert spread[1] < 0.3 * spread[0]
    # the All-Reduce flows whose senders the storm paused, though their receivers were not
    # where it began (leaf3's port to server6, the backup's target)
    report = json.loads((last_run(before) / "report.json").read_text())["results"]
    by_scope = {(r["validator"], r["scope"]): r for r in report}
    named = {f["message"] for f in by_scope[("pfc_behaviour", "propagation")]["findings"]}
    victims = {
        f"victim flow {pair} (allreduce)" for pair in ("server3->server7", "server4->server8")
    }
    assert victims <= named, named
    assert not any("->server6" in message for message in named)


def test_deadlock_is_the_cycle_the_static_check_predicted(tmp_path: Path) -> None:
    incident = REPO / "examples" / "incidents" / "3-deadlock"
    before, _ = build(incident, tmp_path)
    twin("run", "--backend", "sim", "--no-static", str(before), str(incident / "scenario.yaml"))
    report = json.loads((last_run(before) / "report.json").read_text())["results"]
    by_scope = {(r["validator"], r["scope"]): r for r in report}
    assert by_scope[("no_deadlock", "run")]["status"] == "fail"
    assert by_scope[("no_deadlock", "agreement")]["status"] == "pass"
    static = by_scope[("deadlock", "priority 3, 1-link failures")]
    ring = "leaf1:Ethernet16:3 -> spine2:Ethernet0:3 -> leaf2:Ethernet24:3 -> spine1:Ethernet8:3"
    assert ring in by_scope[("no_deadlock", "run")]["reason"]
    assert any(ring in f["message"] for f in static["findings"])
