"""The main job's hybrid run: the control plane live (netns: real FRR, ECMP, failover), the
data plane in the packet simulator (sim: buffers, PFC, ECN, DCQCN), one run directory.

After the live run, the simulator plays the same scenario with its times multiplied by
`sim.time_scale` (seconds of the live run become milliseconds of 400G traffic), applying the
FIB snapshots the live twin took instead of computing its own. A snapshot is placed on the
scenario's own clock: the one after fault N at the fault's `at` plus the time from when the
live twin had done the fault to the snapshot (a loaded machine plays its timeline late and
its faults slowly; the simulator does neither), `start` at 0, `end` at the end, all scaled. What
it observes is added to the live run's directory: its own files (`pfc.json`, `queues.json`,
`iterations.json`, `sim.json`, and `sim_flows.json`: its per-flow records), its events
(pause storms, watchdog actions, deadlocks, lossless drops) on the live run's clock
(`t`: the live time the simulated instant stands for; `sim_t`: simulated seconds), and its
capabilities in run.json, so one set of validators judges both.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from labs.backend import Progress
from labs.lifecycle import Managed
from twin.lab.directory import Lab
from twin.scenario import observations, plan
from twin.scenario.model import Scenario
from twin.scenario.observations import Observations
from twin.scenario.records import SCHEMA, Event, RunRecord

OWN_EVENTS = (
    "pause_storm",
    "watchdog_detect",
    "watchdog_restore",
    "storm_start",
    "storm_end",
    "lossless_drop",
    "deadlock",
)
"""The simulator's events that the live run cannot have logged."""


def _on_scenario_clock(obs: Observations, scenario: Scenario) -> list[tuple[str, float]]:
    """Each FIB snapshot's label and time (seconds) on the scenario's clock."""
    nominal = sorted(f.at for f in scenario.faults)
    taken = obs.run.get("fibs", {})
    fired = {f["index"]: f for f in obs.run["faults"]}
    after = obs.run["fib_faults"]
    out = []
    for label in obs.fib_labels():
        if label == "start":
            out.append((label, 0.0))
        elif label == "end":
            out.append((label, scenario.duration))
        elif label in after:
            i = after[label]
            out.append((label, nominal[i] + float(taken[label]) - float(fired[i]["t"])))
    return sorted(out, key=lambda x: x[1])


def add_data_plane(
    run_dir: Path, lab: Lab, scenario: Scenario, sim: Managed, progress: Progress
) -> None:
    """Simulate the data plane of a live run from its FIB snapshots; add it to the run."""
    obs = Observations.open(run_dir)
    started = float(obs.run["started"])
    k = plan.time_scale(lab, scenario)
    fibs = [(at * k, label, obs.fib(label)) for label, at in _on_scenario_clock(obs, scenario)]
    timeline = dataclasses.replace(plan.timeline(lab, scenario), fibs=fibs or None)
    progress(f"data plane: {len(fibs)} FIB snapshots of the live twin, time x {k:g}")
    played = sim.play(lab, timeline, progress)
    own: list[Event] = [
        {**e, "t": started + e["t"] / k, "sim_t": e["t"], "backend": sim.name}
        for e in played.events
        if e["event"] in OWN_EVENTS
    ]
    run: RunRecord = {
        **obs.run,
        "schema": SCHEMA,
        "backend": f"{obs.run['backend']}+{sim.name}",
        "capabilities": sorted(set(obs.run["capabilities"]) | sim.capabilities),
        "data_plane": {
            "backend": sim.name,
            "time_scale": k,
            "fibs": [label for _, label, _ in fibs],
        },
    }
    observations.add(run_dir, run, {**played.extra, "sim_flows": played.flows}, own)
