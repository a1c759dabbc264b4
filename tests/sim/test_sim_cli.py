"""`python -m labs.sim`: JSON output, summary, exit codes, and one line when the core is missing."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from labs.sim import native
from twin.cli.main import main as twin_main
from twin.cli.verbs import sim as cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"


def test_run_writes_json_and_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.json"
    assert cli.main([str(EXAMPLES / "pfc_incast_8.yaml"), "-o", str(out), "--seed", "3"]) == 0
    data = json.loads(out.read_text())
    assert data["seed"] == 3 and data["experiment"] == "pfc-incast-8"
    assert {f["name"] for f in data["flows"]} == {f"f{i}" for i in range(1, 9)}
    printed = capsys.readouterr().out
    assert "8/8 flows completed" in printed and "drops: lossless 0" in printed


def test_deadlock_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([str(EXAMPLES / "routing_loop_6g.yaml"), "-q"]) == 1
    assert capsys.readouterr().out == ""


def test_bad_experiment_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("switches: [{name: sw, buffer_bytes: lots}]\n")
    assert cli.main([str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "switches[0].buffer_bytes" in err


def test_missing_core_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def missing(name: str) -> object:
        raise ImportError(f"No module named {name!r}")

    native.library.cache_clear()
    monkeypatch.setattr(importlib, "import_module", missing)
    try:
        assert cli.main([str(EXAMPLES / "pfc_incast_8.yaml")]) == 2
    finally:
        monkeypatch.undo()
        native.library.cache_clear()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "C core is not built" in err and "setup.sh" in err


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_twin_sim_run_takes_every_example(name: str, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    code = twin_main(["sim", "run", str(EXAMPLES / name), "-q", "-o", str(out)])
    data = json.loads(out.read_text())
    assert code == (1 if data["deadlocked"] else 0)
    assert data["deadlocked"] == (name in ("routing_loop_6g.yaml", "ring_three_flows.yaml"))


def test_twin_sim_refuses_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("duration: soon\nswitches: []\n")
    assert twin_main(["sim", "run", str(bad)]) == 2
    assert twin_main(["sim", "run", str(tmp_path / "missing.yaml")]) == 2
    assert twin_main(["sim", "run", str(EXAMPLES / "pfc_incast_8.yaml"), "-o", str(tmp_path)]) == 2
    real = importlib.import_module

    def no_core(name: str) -> object:
        if name.endswith("_core"):
            raise ImportError(f"No module named {name!r}")
        return real(name)

    native.library.cache_clear()
    monkeypatch.setattr(importlib, "import_module", no_core)
    try:
        assert twin_main(["sim", "run", str(EXAMPLES / "pfc_incast_8.yaml")]) == 2
    finally:
        monkeypatch.undo()
        native.library.cache_clear()
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 4 and all(line.startswith("twin: ") for line in lines), lines
    assert f"{bad}: duration:" in lines[0] and "missing.yaml" in lines[1]
    assert "is a directory" in lines[2] and "C core" in lines[3]
    assert not list(tmp_path.glob("*.json"))
