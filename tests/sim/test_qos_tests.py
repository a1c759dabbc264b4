"""`twin qos-test`: every sonic-mgmt test passes on the healthy reference and on the 100G lab,
and fails on the lab broken the way it is meant to catch (simulated time only, no root)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from labs.sim.qostest import suite
from labs.sim.qostest.buffers import unbind_lossless_pg
from labs.sim.qostest.case import FAIL, NOT_OBSERVABLE, PASS, QosTest
from labs.sim.qostest.dut import Dut
from tests.conftest import twin_cli
from tests.simlab import REPO, copy, edit_switches
from twin.intent import fabric as intent
from twin.lab import directory as labdir
from twin.lab.directory import Lab

OBSERVABLE = [t for t in suite.TESTS if not t.unobservable]
HIDDEN = [t for t in suite.TESTS if t.unobservable]


def _generate(name: str, out: Path) -> Path:
    source = REPO / "examples" / name
    labdir.generate(intent.load(source), out, str(source))
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _generate("reference.yaml", tmp_path_factory.mktemp("qos") / "reference")


@pytest.fixture(scope="module")
def lab100g(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _generate("small-100g.yaml", tmp_path_factory.mktemp("qos") / "small100g")


def test_at_least_twenty_observable() -> None:
    assert len(OBSERVABLE) >= 20
    assert len({t.name for t in suite.TESTS}) == len(suite.TESTS)


@pytest.mark.parametrize("test", OBSERVABLE, ids=lambda t: t.name)
def test_passes_on_the_reference(reference: Path, test: QosTest) -> None:
    result = test.judge(Dut.of_lab(Lab.open(reference)), "leaf1")
    assert result.status == PASS, result.failed


@pytest.mark.parametrize("lab", ["reference", "lab100g"])
@pytest.mark.parametrize("test", OBSERVABLE, ids=lambda t: t.name)
def test_fails_on_its_broken_lab(request: pytest.FixtureRequest, lab: str, test: QosTest) -> None:
    path: Path = request.getfixturevalue(lab)
    result = test.judge(Dut.of_lab(Lab.open(path)).variant(test.breaks), "leaf1")
    assert result.status == FAIL, result.figures


@pytest.mark.parametrize("test", OBSERVABLE, ids=lambda t: t.name)
def test_passes_on_the_100g_lab(lab100g: Path, test: QosTest) -> None:
    dut = Dut.of_lab(Lab.open(lab100g))
    assert dut.speed(0) == 100e9
    result = test.judge(dut, "leaf1")
    assert result.status == PASS, result.failed


@pytest.mark.parametrize("test", HIDDEN, ids=lambda t: t.name)
def test_not_observable_says_why(reference: Path, test: QosTest) -> None:
    result = test.judge(Dut.of_lab(Lab.open(reference)), "leaf1")
    assert result.status == NOT_OBSERVABLE and result.reason == test.unobservable


def test_cli_reports_and_broken_lab_on_disk(reference: Path, tmp_path: Path) -> None:
    out = tmp_path / "healthy"
    done = twin_cli("qos-test", str(reference), "pfc_xoff_limit", "dwrr", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "expected 0, seen 0" in done.stdout and "PFCtest" in done.stdout
    data = json.loads((out / "report.json").read_text())
    assert [r["validator"] for r in data["results"]] == ["pfc_xoff_limit", "dwrr"]
    assert (out / "report.md").read_text().startswith("# twin qos-test reference")
    broken = copy(reference, tmp_path / "broken")
    edit_switches(broken, lambda _switch, db: unbind_lossless_pg(db))
    done = twin_cli("qos-test", str(broken), "pfc_xoff_limit", "--out", str(tmp_path / "b"))
    assert done.returncode == 1, done.stderr
    failures = ET.parse(tmp_path / "b" / "junit.xml").getroot().iter("failure")
    assert "trig+m" in next(failures).get("message", "")


def test_unknown_test_is_bad_input(reference: Path) -> None:
    done = twin_cli("qos-test", str(reference), "no_such_test")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "no such test" in done.stderr
