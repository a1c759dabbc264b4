"""`twin run --out DIR --junit PATH`: the run directory where CI wants it, refused when it
holds something; default run directories named after their scenario; long reasons wrapped."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.simlab import small_lab
from twin.cli import main as cli
from twin.intent import fabric as intent
from twin.lab import directory as labdir
from twin.lab.directory import Lab
from twin.verdict import verdict
from validators.result import Result, Status

SCENARIO = """\
name: short-allreduce
traffic:
  - {name: allreduce, at: 0, kind: all_reduce, servers: all, qps: 1, message: 1000000}
validate:
  collective_efficiency: {}
  lossless_isolation: {}
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_lab(tmp_path_factory.mktemp("run-out") / "lab")


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(SCENARIO)
    return path


def test_out_and_junit(
    lab: Path, scenario: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, junit = tmp_path / "ci" / "run", tmp_path / "junit.xml"
    args = ["run", str(lab), str(scenario), "--backend", "sim", "--out", str(out)]
    code = cli.main([*args, "--junit", str(junit)])
    assert code in (0, 1)
    assert (out / "report.json").is_file() and (out / "run.json").is_file()
    assert junit.read_text() == (out / "junit.xml").read_text()
    assert "<testcase" in junit.read_text()
    assert f"reports in {out}/report.md" in capsys.readouterr().out


def test_out_not_empty_is_refused_before_anything_runs(
    lab: Path, scenario: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "full"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    before = sorted((lab / "runs").iterdir()) if (lab / "runs").exists() else []
    capsys.readouterr()
    code = cli.main(["run", str(lab), str(scenario), "--backend", "sim", "--out", str(out)])
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--out: exists and is not empty" in err
    assert sorted(out.iterdir()) == [out / "keep.txt"]
    after = sorted((lab / "runs").iterdir()) if (lab / "runs").exists() else []
    assert after == before


def test_default_run_directory_carries_the_scenario_name(lab: Path, scenario: Path) -> None:
    assert cli.main(["run", str(lab), str(scenario), "--backend", "sim"]) in (0, 1)
    newest = max((lab / "runs").iterdir())
    assert newest.name.endswith("-short-allreduce")


def test_reasons_wrap_unless_wide(
    lab: Path, scenario: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)  # a terminal 100 columns wide
    cli.main(["run", str(lab), str(scenario), "--backend", "sim"])
    narrow = capsys.readouterr().out.splitlines()
    cli.main(["run", str(lab), str(scenario), "--backend", "sim", "--wide"])
    wide = capsys.readouterr().out.splitlines()
    table = narrow[: narrow.index("")]
    assert max(len(line) for line in table) <= 100
    reason = next(line for line in wide if line.startswith("collective_efficiency"))
    tail = reason.split()[-1]
    assert len(reason) > 100 and any(line.strip().endswith(tail) for line in table)


def test_static_validators_judged_beside_the_play_give_the_same_verdict(
    lab: Path, scenario: Path, tmp_path: Path
) -> None:
    """The sim's play is a computation, so `twin run` judges the static validators beside it;
    `twin report` judges them afresh: the same results, in the same order."""
    out = tmp_path / "run"
    cli.main(["run", str(lab), str(scenario), "--backend", "sim", "--out", str(out)])
    during = json.loads((out / "report.json").read_text())["results"]
    assert {"yang", "deadlock", "pfc_consistency"} <= {r["validator"] for r in during}
    cli.main(["report", str(out)])
    assert json.loads((out / "report.json").read_text())["results"] == during


def test_static_results_judged_ahead_are_the_ones_reported(
    lab: Path, scenario: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    cli.main(["run", str(lab), str(scenario), "--backend", "sim", "--out", str(out)])
    ahead = verdict.judge_static(Lab.open(lab), {}, static=True)
    assert "yang" in ahead and "collective_efficiency" not in ahead  # static ones only
    ahead["yang"] = [Result("yang", "fabric", Status.FAIL, "judged ahead")]
    _, results = verdict.report_run(out, static=True, judged=ahead)
    assert [r.reason for r in results if r.validator == "yang"] == ["judged ahead"]


def test_a_run_and_its_lab_copied_elsewhere_are_reported_from_any_directory(
    scenario: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a CI job leaves them (`twin run labs/x S --out review/x`, relative paths), then
    downloaded as one artifact elsewhere and reported from /: the lab is found beside the
    run; with the lab moved away too, one line names where it was looked for."""
    job = tmp_path / "job"
    fabric = tmp_path / "fabric.yaml"  # its own lab name: no lock shared with another test
    fabric.write_text((REPO / "examples" / "small.yaml").read_text().replace("small", "carried"))
    labdir.generate(intent.load(fabric), job / "labs" / "small", str(fabric))
    monkeypatch.chdir(job)
    argv = ["run", "labs/small", str(scenario), "--backend", "sim", "--out", "review/small"]
    assert cli.main(argv) in (0, 1)
    before = json.loads(Path("review/small/report.json").read_text())["results"]
    artifact = tmp_path / "downloaded" / "artifact"
    shutil.copytree(job, artifact)
    shutil.rmtree(job)
    monkeypatch.chdir("/")
    assert cli.main(["report", str(artifact / "review" / "small")]) in (0, 1)
    after = json.loads((artifact / "review" / "small" / "report.json").read_text())["results"]
    assert after == before
    shutil.move(artifact / "labs", tmp_path / "elsewhere")
    assert cli.main(["report", str(artifact / "review" / "small")]) == 2
