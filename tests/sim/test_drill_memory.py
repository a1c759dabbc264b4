"""A drill's cases judged in memory on a lab built once (`twin.drill.worker.Unfaulted`) give
the verdicts, loss windows and iteration means of the same cases played the written way
(`drillrun.run_case`: the scenario file written, the lab checked and read again, the run
directory written and read back), whatever the fault; and a case's run directory, kept with
`--runs`, is one `twin report` takes."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pytest

from labs import registry
from tests.conftest import REPO
from tests.simlab import small_lab
from twin.cli import main as cli
from twin.cli.verbs.drill import DEFAULT_SCENARIO
from twin.drill import cases as drill
from twin.drill import run as drillrun
from twin.drill.cases import Case, When
from twin.drill.worker import Unfaulted
from twin.intent import fabric as intent
from twin.intent.inputs import strict_yaml
from twin.lab import directory as labdir
from twin.lab.directory import Lab


def _single_homed(out: Path) -> Path:
    source = REPO / "examples" / "incidents" / "3-deadlock" / "fabric.yaml"
    labdir.generate(intent.load(source), out, str(source))
    return out


def _cases(lab: Lab) -> list[Case]:
    """No fault, a fabric link, a server link, a switch, two links at once, a flap."""
    links = drill.fault_sets(lab, "links:fabric")
    servers = drill.fault_sets(lab, "server-links")
    flap = Case(
        "flap",
        ({"fault": "link-flap", "link": links[1].faults[0]["link"], "count": 2, "period": 0.0002},),
    )
    return [
        drillrun.BASELINE,
        links[0],
        servers[0],
        drill.fault_sets(lab, "switches")[0],
        *drill.fault_sets(lab, "random:2x1", seed=3),
        flap,
    ]


def _compared(done: drill.Outcome) -> dict[str, Any]:
    return asdict(replace(done, seconds=0.0, cpu=0.0))


@pytest.mark.parametrize("make", [small_lab, _single_homed], ids=["small", "single-homed"])
@pytest.mark.parametrize("back", [None, 0.0004], ids=["held", "given-back"])
def test_in_memory_verdicts_are_the_written_runs(
    make: Any, back: float | None, tmp_path: Path
) -> None:
    lab = Lab.open(make(tmp_path / "lab"))
    scenario = strict_yaml(DEFAULT_SCENARIO)
    when = When(0.0005, None if back is None else 0.0005 + back)
    sim = registry.get("sim")
    sim.deploy(lab)
    try:
        unfaulted = Unfaulted.build(lab, scenario)
        outcomes = []
        for case in _cases(lab):
            written, _ = drillrun.run_case(lab, scenario, case, when, sim)
            held, _ = unfaulted.play(case, when)
            assert _compared(held) == _compared(written), case.label
            outcomes.append(held)
    finally:
        sim.destroy(lab)
    failing = [o for o in outcomes if o.failing]
    assert all(o.results and o.error is None for o in outcomes)
    if make is _single_homed and back is None:  # a server's only link cut for good
        assert any(o.unfinished for o in failing)  # its collective cannot finish


def test_kept_runs_are_run_directories(tmp_path: Path) -> None:
    lab = small_lab(tmp_path / "lab")
    out = tmp_path / "drill"
    argv = ["drill", str(lab), "--faults", "links:fabric", "--out", str(out), "--runs"]
    assert cli.main([*argv, "--workers", "1"]) == 0
    runs = sorted((out / "runs").iterdir())
    assert [r.name for r in runs] == [f"{i:04d}" for i in range(9)]
    assert cli.main(["report", str(runs[1]), "--no-static", "--json"]) == 0
    kept = json.loads((runs[1] / "run.json").read_text())
    assert Path(kept["lab_dir"]) == lab.resolve()
    assert (runs[1] / "scenario.yaml").is_file() and (runs[1] / "flows.json").is_file()
