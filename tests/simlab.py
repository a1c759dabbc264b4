"""Helpers of the sim backend tests: a small lab directory, config edits, and a scenario
played in simulated time (no root, no processes)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from labs import registry
from labs.backend import Played
from labs.sim.backend import run
from twin import jsonio
from twin.intent import fabric as intent
from twin.intent.inputs import parse_model
from twin.lab import directory as labdir
from twin.lab.directory import Lab
from twin.scenario import plan, player
from twin.scenario.model import Scenario
from twin.verdict import verdict
from validators.result import Result

REPO = Path(__file__).resolve().parent.parent
Db = dict[str, Any]


def small_lab(out: Path) -> Path:
    """examples/small.yaml generated into `out`."""
    source = REPO / "examples" / "small.yaml"
    labdir.generate(intent.load(source), out, str(source))
    return out


def copy(lab: Path, out: Path) -> Path:
    """A copy of a lab directory, to edit."""
    shutil.copytree(lab, out)
    return out


def edit_switches(lab: Path, change: Callable[[str, Db], None]) -> None:
    """Apply `change(switch, config_db)` to every switch's config_db.json."""
    for path in sorted((lab / "configs").glob("*/config_db.json")):
        db = json.loads(path.read_text())
        change(path.parent.name, db)
        path.write_text(json.dumps(db, indent=2))


def small_xoff(_: str, db: Db) -> None:
    """An `edit_switches` change: every lossless profile's headroom (xoff) down to 1 KB, far
    below what its cables need."""
    for profile in db["BUFFER_PROFILE"].values():
        if "xoff" in profile:
            profile.update(xoff="1024", size=str(1024 + 18432))


def edit_hosts(lab: Path, change: Callable[[str, Db], None]) -> None:
    """Apply `change(server, host)` to every server's host.json."""
    for path in sorted((lab / "configs").glob("*/host.json")):
        host = json.loads(path.read_text())
        change(path.parent.name, host)
        path.write_text(json.dumps(host, indent=2))


def play(lab: Path, scenario: dict[str, Any]) -> Played:
    """Simulate a scenario (a parsed scenario.yaml) on a lab directory."""
    opened = Lab.open(lab)
    parsed = parse_model(Scenario, {"settle": 0, **scenario}, "test")
    return run(opened, plan.timeline(opened, parsed))


def total(played: Played, counter: str, prio: int | None = None) -> float:
    """A pfc.json counter summed over ports (and one priority)."""
    rows = [r for r in played.extra["pfc"] if prio is None or r["priority"] == prio]
    if counter.startswith("drops."):
        return float(sum(r["drops"][counter.removeprefix("drops.")] for r in rows))
    return float(sum(r[counter] for r in rows))


def incast(kind: str = "storage", dscp: int | None = 26, duration: float = 0.003) -> dict[str, Any]:
    """Three servers send to server4 at line rate for `duration` seconds (open loop, whatever
    the class: nothing backs them off)."""
    phase: dict[str, Any] = {
        "at": 0, "duration": duration, "kind": "incast", "src": ["server1", "server2", "server3"],
        "dst": "server4", "class": kind, "qps": 4,
    }  # fmt: skip
    if dscp is not None:
        phase["dscp"] = dscp
    return {"name": "incast", "traffic": [phase], "sim": {"lossy_transport": "open"}}


def validate(lab: Path, scenario: dict[str, Any]) -> dict[str, Result]:
    """Play a scenario through the player on the sim backend and validate the run: each
    result of the validators it names by `validator/scope` (not the invariants the verdict
    adds to every run: tests/unit/test_verdict.py judges those)."""
    opened = Lab.open(lab)
    parsed = parse_model(Scenario, {"settle": 0, **scenario}, "test")
    backend = registry.get("sim")
    if not backend.running(opened):
        backend.deploy(opened)
    run_dir = player.play(opened, parsed, backend)
    _, results = verdict.report_run(run_dir)
    return {f"{r.validator}/{r.scope}": r for r in results if r.validator in parsed.validate_}


def small_pool(_: str, db: Db) -> None:
    """An `edit_switches` change: the lossless ingress pool down to 1 MB, so that an incast's
    priority groups reach XOFF and pause."""
    db["BUFFER_POOL"]["ingress_lossless_pool"]["size"] = "1000000"


def paused_incast(out: Path, faults: list[dict[str, Any]], checks: dict[str, Any]) -> Path:
    """The small lab with `small_pool` in `out`, a lossless incast played on it with these
    faults and validators; the run directory."""
    path = small_lab(out)
    edit_switches(path, small_pool)
    validate(path, {**incast("roce", duration=0.002), "faults": faults, "validate": checks})
    (run,) = (path / "runs").iterdir()
    return run


LINK_DOWN = {"at": 0.0005, "fault": "link-down", "link": "leaf1:spine1"}


def beside_incast(
    how: str, collective: dict[str, Any], fault: dict[str, Any] = LINK_DOWN
) -> dict[str, Any]:
    """A collective phase over every server (2 queue pairs, 2,000,003 bytes, then `collective`)
    beside an incast into one of its ranks, under a fault: made in the core or as table rows
    (`sim.collectives`: `how`)."""
    phase = {"at": 0, "servers": "all", "qps": 2, "message": 2_000_003, **collective}
    burst = {
        "at": 0.0002, "duration": 0.001, "kind": "incast", "src": ["server1", "server2"],
        "dst": "server4", "class": "roce", "qps": 1,
    }  # fmt: skip
    return {
        "name": "collective",
        "traffic": [phase, burst],
        "faults": [fault],
        "sim": {"time_scale": 1, "collectives": how},
    }


def observations(played: Played) -> dict[str, Any]:
    """What a run observed, but for what it cost and how many flows its core held; its
    queue series as queues.json holds them (the simulator keeps them as arrays)."""
    sim = {k: v for k, v in played.extra["sim"].items() if k not in ("wall_s", "core_cpu_s")}
    sim["experiment"] = {k: v for k, v in sim["experiment"].items() if k != "flows"}
    return {
        "flows": played.flows,
        "phases": played.phases,
        "iterations": played.extra["iterations"],
        "pfc": played.extra["pfc"],
        "queues": jsonio.copied(played.extra["queues"]),
        "counters": played.counters,
        "events": played.events,
        "sim": sim,
    }
