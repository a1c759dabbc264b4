"""One command opens its lab once, checks it once and hands it down: the backend, the plan,
the validators and the verdict share it and one `Wiring` of it (`twin.model.wiring.shared`),
instead of each opening, checking and wiring the lab again (issue 37)."""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.simlab import small_lab
from twin.cli import main as cli
from twin.lab import check as labcheck
from twin.lab.directory import RACY_NS, Lab
from twin.model import wiring

SCENARIO = """\
name: once
traffic:
  - {name: allreduce, at: 0, duration: 4, kind: all_reduce, servers: all, qps: 1, pps: 10}
faults:
  - {at: 1, fault: link-down, link: "uplink of leaf1"}
  - {at: 2, fault: link-up, link: "uplink of leaf1"}
validate:
  failover: {}
  lossless_isolation: {}
  fib_agreement: {}
  no_deadlock: {}
"""


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    """The small lab, its files an hour old (not just written: what is read from them may be
    kept, `twin.lab.directory.RACY_NS`)."""
    path = small_lab(tmp_path / "lab")
    old = time.time_ns() - 1800 * 10**9 - RACY_NS
    for here, dirs, files in os.walk(path):
        for name in dirs + files:
            os.utime(Path(here, name), ns=(old, old))
    return path


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """How often a command opens a lab, checks its files for real and builds a Wiring."""
    counts: Counter[str] = Counter()
    opened, design, built = Lab.open.__func__, labcheck._design, wiring.Wiring.__init__  # type: ignore[attr-defined]

    def open_(cls: type[Lab], path: Path) -> Lab:
        counts["opened"] += 1
        lab: Lab = opened(cls, path)
        return lab

    def check(lab: Lab) -> Any:
        counts["checked"] += 1
        return design(lab)

    def build(self: wiring.Wiring, lab: Lab) -> None:
        counts["wired"] += 1
        built(self, lab)

    monkeypatch.setattr(Lab, "open", classmethod(open_))
    monkeypatch.setattr(labcheck, "_design", check)
    monkeypatch.setattr(wiring.Wiring, "__init__", build)
    yield counts


@pytest.mark.parametrize("backend", ["fake", "sim"])
def test_a_run_opens_checks_and_wires_its_lab_once(
    lab: Path, tmp_path: Path, counted: Counter[str], backend: str
) -> None:
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(SCENARIO)
    args = ["run", str(lab), str(scenario), "--backend", backend, "--out", str(tmp_path / "r")]
    assert cli.main([*args, *(["--sim"] if backend == "fake" else [])]) in (0, 1)
    assert (tmp_path / "r" / "report.json").is_file()
    assert counted == {"opened": 1, "checked": 1, "wired": 1}


def test_deploy_and_validate_check_and_wire_their_lab_once(
    lab: Path, counted: Counter[str]
) -> None:
    assert cli.main(["deploy", str(lab), "--backend", "fake"]) == 0
    assert counted == {"opened": 1, "checked": 1, "wired": 1}
    counted.clear()
    assert cli.main(["destroy", str(lab)]) == 0
    counted.clear()
    assert cli.main(["validate", str(lab), "--out", str(lab.parent / "v")]) in (0, 1)
    assert counted == {"opened": 1, "checked": 1, "wired": 1}


def test_an_edited_lab_is_checked_and_wired_again(lab: Path, counted: Counter[str]) -> None:
    """What is kept follows the files: a config edited after the check is checked and wired
    again on the same opened lab."""
    opened = Lab.open(lab)
    labcheck.check(opened, live=True)
    labcheck.check(opened)
    first = wiring.shared(opened)
    assert wiring.shared(opened) is first
    assert counted == {"opened": 1, "checked": 1, "wired": 1}
    path = lab / "configs" / "leaf1" / "config_db.json"
    path.write_text(path.read_text() + "\n")
    os.utime(path, ns=(time.time_ns() - 2 * RACY_NS,) * 2)
    labcheck.check(opened)
    assert wiring.shared(opened) is not first
    assert counted == {"opened": 1, "checked": 2, "wired": 2}
