"""`daemons`: a routing daemon that died during a run fails the verdict, naming the switch,
the daemon and when, unless a fault on the timeline killed it (the observations are written
here; tests/integration/test_lab_safety_live.py kills zebra under a live run)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import lab_name, write_lab
from twin.lab.directory import Lab
from twin.scenario.observations import Observations
from validators import registry
from validators.result import Result, Status

STARTED = 1000.0


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    return Lab.open(write_lab(tmp_path_factory.mktemp("daemons") / "lab", lab_name()))


def judge(
    lab: Lab,
    tmp_path: Path,
    events: list[dict[str, Any]],
    faults: list[dict[str, Any]] = [],  # noqa: B006 - never changed
    capabilities: tuple[str, ...] = ("daemons", "bgp"),
) -> Result:
    run = {
        "lab": lab.name,
        "lab_dir": str(lab.path),
        "backend": "netns",
        "scenario": "daemons",
        "capabilities": list(capabilities),
        "started": STARTED,
        "ended": STARTED + 60,
        "phases": [],
        "faults": faults,
    }
    (tmp_path / "run.json").write_text(json.dumps(run))
    lines = "".join(json.dumps(e) + "\n" for e in events)
    (tmp_path / "events.jsonl").write_text(lines)
    (result,) = registry.run_dynamic(
        lab, Observations.open(tmp_path), [registry.get("daemons")], {}
    )
    return result


WATCHED = {"t": STARTED, "event": "daemons", "watched": 12, "interval": 0.25}
ZEBRA = {"t": STARTED + 12.5, "event": "daemon", "node": "leaf1", "daemon": "zebra", "pid": 42}


def test_all_daemons_alive_passes_with_what_was_watched(lab: Lab, tmp_path: Path) -> None:
    result = judge(lab, tmp_path, [WATCHED])
    assert result.status is Status.PASS and result.figures["watched"] == 12


def test_a_daemon_that_died_fails_naming_switch_daemon_and_time(lab: Lab, tmp_path: Path) -> None:
    result = judge(lab, tmp_path, [WATCHED, {**ZEBRA, "state": "died"}])
    assert result.status is Status.FAIL
    assert "leaf1" in result.reason and "zebra" in result.reason and "+12.5 s" in result.reason


@pytest.mark.parametrize(
    "fault",
    [
        {"fault": "daemon-kill", "node": "leaf1", "daemon": "zebra"},
        {"fault": "node-down", "node": "leaf1"},
    ],
)
def test_a_daemon_a_fault_killed_passes(lab: Lab, tmp_path: Path, fault: dict[str, Any]) -> None:
    faults = [{**fault, "index": 0, "t": STARTED + 12.4, "began": STARTED + 12.4, "event": "fault"}]
    result = judge(lab, tmp_path, [WATCHED, {**ZEBRA, "state": "died"}], faults)
    assert result.status is Status.PASS and result.figures["died"] == 1


@pytest.mark.parametrize(
    "fault",
    [
        {"fault": "daemon-kill", "node": "leaf1", "daemon": "bgpd"},  # another daemon
        {"fault": "daemon-kill", "node": "leaf2", "daemon": "zebra"},  # another switch
    ],
)
def test_a_fault_elsewhere_explains_nothing(
    lab: Lab, tmp_path: Path, fault: dict[str, Any]
) -> None:
    faults = [{**fault, "index": 0, "t": STARTED + 12.4, "began": STARTED + 12.4, "event": "fault"}]
    result = judge(lab, tmp_path, [WATCHED, {**ZEBRA, "state": "died"}], faults)
    assert result.status is Status.FAIL


def test_no_watch_is_not_observable(lab: Lab, tmp_path: Path) -> None:
    assert judge(lab, tmp_path, []).status is Status.NOT_OBSERVABLE
    without = judge(lab, tmp_path, [WATCHED], capabilities=("bgp",))
    assert without.status is Status.NOT_OBSERVABLE and "daemons" in without.reason
