"""Play a scenario on a running twin through its backend and save what the run recorded as
observations (the files `twin.scenario.observations` reads; docs/observations.md).

The scenario becomes a timeline (`twin.scenario.plan`), the backend plays it (`play`: on the
wall clock or in simulated time) and returns one `Played` record, saved here unchanged in
meaning whichever backend produced it.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from labs.backend import Played, Progress, quiet
from labs.lifecycle import Managed
from twin import safeio
from twin.errors import LabError
from twin.lab import outdir
from twin.lab.directory import Lab
from twin.scenario import model as scenarios
from twin.scenario import observations, plan
from twin.scenario.model import Scenario
from twin.scenario.records import SCHEMA, PhaseRecord, RunRecord
from twin.version import stamp

INTERRUPTED = "interrupted"
"""In a run directory whose run was stopped by a signal: which one."""


def save(out: Path, lab: Lab, scenario: Scenario, backend: Managed, played: Played) -> None:
    """Write a played run's observations into its run directory."""
    run = record(out, lab, scenario, backend, played)
    observations.save(out, run, played, lab.path / "fabric.yaml")


def record(out: Path, lab: Lab, scenario: Scenario, backend: Managed, played: Played) -> RunRecord:
    """A played run's run.json, for its run directory `out`."""
    phases: list[PhaseRecord] = [
        {**p, "analytical": plan.analytical(lab, scenario.traffic[p["index"]])}
        for p in played.phases
    ]
    run: RunRecord = {
        "schema": SCHEMA,
        "lab": lab.name,
        "lab_dir": str(lab.path.resolve()),
        "lab_from_run": os.path.relpath(lab.path.resolve(), out.resolve()),
        "backend": backend.name,
        "capabilities": sorted(backend.capabilities),
        "scenario": scenario.name,
        "started": played.started,
        "ended": played.ended,
        "fault_margin": played.fault_margin,
        "phases": phases,
        "faults": played.faults,
        "fibs": {label: t for label, (t, _) in played.fibs.items()},
        "fib_faults": observations.snapshot_faults(played.faults, played.fibs),
        "servers": lab.nodes("server"),
        "uplinks": plan.uplinks(lab),
        "stamp": stamp(backend.name),
    }
    return run


def play(
    lab: Lab,
    scenario: Scenario,
    backend: Managed,
    progress: Progress = quiet,
    out: Path | None = None,
) -> Path:
    """Run the scenario on the lab's running twin; returns the run directory: `out` (created
    fresh), else LAB/runs/TIMESTAMP-SCENARIO."""
    if not backend.running(lab):
        raise LabError(f"lab {lab.name} is not running on {backend.name} (twin deploy {lab.path})")
    if out is None:
        out = lab.path / "runs" / f"{datetime.now():%Y%m%d-%H%M%S-%f}-{scenario.name}"
        safeio.mkdir(out)
    else:
        outdir.create(out)
    observations.save_scenario(out, scenarios.dump(scenario))
    try:
        played = backend.play(lab, plan.timeline(lab, scenario, files=out), progress)
    except KeyboardInterrupt as stop:  # a signal (`twin.cli.signals`) or Ctrl-C
        safeio.write(out / INTERRUPTED, f"interrupted: {stop}\n")
        raise
    save(out, lab, scenario, backend, played)
    return out
