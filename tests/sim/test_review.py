"""Dynamic change review: `twin diff BASE CAND SCENARIO --backend sim` on the pause-storm
incident, both ways: the fix improves the iteration time and the pauses (exit 0), the
reverse regresses them (exit 1, one JUnit case per regression and nothing else)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.simlab import small_lab
from twin.change import review
from twin.change.incident import build
from twin.cli import main as cli

INCIDENT = REPO / "examples" / "incidents" / "1-pause-storm"
SCENARIO = str(INCIDENT / "scenario.yaml")


@pytest.fixture(scope="module")
def labs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return build(INCIDENT, tmp_path_factory.mktemp("review") / "ps")


def diff(before: Path, after: Path, out: Path, *extra: str) -> int:
    return cli.main(["diff", str(before), str(after), SCENARIO, "--out", str(out), *extra])


def test_the_fix_improves_iterations_and_pauses(
    labs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before, after = labs
    assert diff(before, after, tmp_path / "fwd") == 0
    printed = capsys.readouterr().out
    data = json.loads((tmp_path / "fwd" / "review.json").read_text())
    assert data["regressions"] == [] and data["exit_code"] == 0
    moved = {(f["kind"], f["verdict"]) for f in data["figures"]}
    assert ("iteration_mean", "improvement") in moved and ("pause", "improvement") in moved
    changed = {(c["validator"], c["scope"], c["base"], c["candidate"]) for c in data["dynamic"]}
    assert ("pfc_behaviour", "propagation", "fail", "pass") in changed
    assert ("collective_efficiency", "allreduce (ring, 8 ranks)", "fail", "pass") in changed
    assert "| collective iteration mean (ms) | allreduce |" in printed
    assert "Verdict: no regression." in printed
    junit = ET.parse(tmp_path / "fwd" / "junit.xml").getroot()
    assert junit.findall(".//testcase") == []
    assert (tmp_path / "fwd" / "base" / "report.json").is_file()


def test_the_reverse_is_one_junit_case_per_regression(
    labs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before, after = labs
    junit_path, md = tmp_path / "j.xml", tmp_path / "summary.md"
    code = diff(after, before, tmp_path / "rev", "--junit", str(junit_path), "--markdown", str(md))
    assert code == 1
    data = json.loads((tmp_path / "rev" / "review.json").read_text())
    cases = ET.parse(junit_path).getroot().findall(".//testcase")
    failures = [c.find("failure") for c in cases]
    assert [f.get("message") for f in failures if f is not None] == data["regressions"]
    for case, line in zip(cases, data["regressions"], strict=True):  # what and where, not how
        name = case.get("name") or ""
        assert line.startswith(f"{name}: ")
        assert "->" not in name and len(name) < 80
    regressed = {f["kind"] for f in data["figures"] if f["verdict"] == "regression"}
    assert {"iteration_mean", "iteration_p99", "pause"} <= regressed
    names = " ".join(data["regressions"])
    assert "dynamic pfc_behaviour propagation: pass -> fail" in names
    assert "static pfc_consistency hosts: pass -> fail" in names  # backup marked as RoCE
    assert md.read_text().startswith("## twin diff") and "**regression**" in md.read_text()
    capsys.readouterr()


def test_thresholds_are_settable(labs: tuple[Path, Path], tmp_path: Path) -> None:
    before, after = labs
    loose = [f"--threshold={k}=1e9" for k in review.THRESHOLDS if k.endswith("_min")]
    assert diff(after, before, tmp_path / "loose", *loose) == 1  # the verdicts still flip
    data = json.loads((tmp_path / "loose" / "review.json").read_text())
    assert not any(f["verdict"] == "regression" for f in data["figures"])
    assert data["regressions"]  # verdicts that flipped, no figure
    assert all(r.startswith(("dynamic ", "static ")) for r in data["regressions"])


@pytest.mark.parametrize(
    ("extra", "shown"),
    [
        (["--threshold", "nosuch=1"], "--threshold: nosuch=1: write KEY=VALUE"),
        (["--threshold", "pause_min=lots"], "--threshold: pause_min: must be a number"),
    ],
)
def test_bad_thresholds_are_one_line(
    labs: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    shown: str,
) -> None:
    before, after = labs
    capsys.readouterr()
    assert diff(before, after, tmp_path / "bad", *extra) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and shown in err
    assert not (tmp_path / "bad").exists()


def test_compare_counts_absent_pauses_as_zero() -> None:
    moved = review.compare({}, {("pause", "leaf1:Ethernet0 priority 3"): 2.0}, review.THRESHOLDS)
    assert [(m.base, m.candidate, m.verdict) for m in moved] == [(0.0, 2.0, "regression")]
    assert review.compare({("iteration_mean", "a"): 1.0}, {}, review.THRESHOLDS)[0].verdict == (
        "moved"
    )


def test_a_review_on_the_fake_backend(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same review through the fake backend (its routing model, probe flows pinned through
    each fault): an unchanged lab moves no verdict and no figure past its threshold."""
    lab = small_lab(tmp_path / "small")
    scenario = REPO / "examples" / "scenarios" / "uplink-failure.yaml"
    out = tmp_path / "review"
    argv = ["diff", str(lab), str(lab), str(scenario), "--backend", "fake", "--out", str(out)]
    assert cli.main(argv) == 0
    data = json.loads((out / "review.json").read_text())
    assert data["regressions"] == [] and data["dynamic"] == []
    assert json.loads((out / "base" / "run.json").read_text())["backend"] == "fake"
    assert "### Dynamic verdicts (the scenario on both)" in capsys.readouterr().out
