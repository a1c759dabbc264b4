"""Exit codes of every verb, as `twin --help` documents them: 0 all good, 1 a verdict failed
or a regression (the verbs that judge), 2 bad input in one line, 3 an internal error in one
line (never a traceback alone). One case each per verb."""

from __future__ import annotations

import importlib
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.simlab import edit_switches, small_lab, small_xoff
from twin.change.incident import build
from twin.cli import main as cli

PAUSE_STORM = REPO / "examples" / "incidents" / "1-pause-storm"


@pytest.fixture(scope="module")
def labs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A good small lab, one whose headroom is broken, and the pause-storm incident's."""
    root = tmp_path_factory.mktemp("codes")
    good = small_lab(root / "good")
    broken = Path(shutil.copytree(good, root / "broken"))
    edit_switches(broken, small_xoff)
    before, after = build(PAUSE_STORM, root / "ps")
    change = root / "change.yaml"
    change.write_text("configs/leaf1/config_db.json:\n  - {delete: PFC_WD.Ethernet0}\n")
    faults = root / "faults.yaml"
    faults.write_text("- {name: peer link, faults: [{fault: link-down, link: 'leaf1:leaf2'}]}\n")
    return {
        "good": good, "broken": broken, "before": before, "after": after, "root": root,
        "change": change, "faults": faults,
    }  # fmt: skip


@pytest.fixture
def fake_twin(labs: dict[str, Path]) -> Iterator[Path]:
    """The good lab running on the fake backend (destroyed after)."""
    lab = labs["good"]
    assert cli.main(["deploy", str(lab), "--backend", "fake"]) == 0
    yield lab
    cli.main(["destroy", str(lab)])


def good_cases(labs: dict[str, Path], tmp: Path) -> dict[str, list[str]]:
    good, scenario = str(labs["good"]), str(PAUSE_STORM / "scenario.yaml")
    return {
        "schema": ["schema"],
        "generate": ["generate", str(REPO / "examples" / "small.yaml"), "-o", str(tmp / "gen")],
        "show": ["show", good],
        "validate": ["validate", good, "--out", str(tmp / "validate")],
        "diff": ["diff", good, good],
        "apply": ["apply", good, str(labs["change"]), "-o", str(tmp / "applied")],
        "incident": ["incident", "pause-storm", str(tmp / "incident")],
        "run": ["run", str(labs["after"]), scenario, "--backend", "sim", "--out", str(tmp / "r")],
        "drill": ["drill", good, "--faults", str(labs["faults"]), "--workers", "1", "--out",
                  str(tmp / "drill")],
        "cleanup": ["cleanup", good],
    }  # fmt: skip


@pytest.mark.parametrize(
    "verb",
    ["schema", "generate", "show", "validate", "diff", "apply", "incident", "run", "drill",
     "cleanup"],
)  # fmt: skip
def test_zero_when_all_is_good(verb: str, labs: dict[str, Path], tmp_path: Path) -> None:
    assert cli.main(good_cases(labs, tmp_path)[verb]) == 0


def test_zero_for_the_verbs_of_a_running_twin(fake_twin: Path) -> None:
    lab = str(fake_twin)
    assert cli.main(["inspect", lab]) == 0
    assert cli.main(["fault", lab, "link-down", "leaf1:spine1"]) == 0
    assert cli.main(["fault", lab, "link-up", "leaf1:spine1"]) == 0
    assert cli.main(["destroy", lab]) == 0
    assert cli.main(["deploy", lab, "--backend", "fake"]) == 0


def test_one_when_a_verdict_fails_or_regresses(labs: dict[str, Path], tmp_path: Path) -> None:
    scenario = str(PAUSE_STORM / "scenario.yaml")
    good, broken = str(labs["good"]), str(labs["broken"])
    assert cli.main(["validate", broken, "--out", str(tmp_path / "v")]) == 1
    assert cli.main(["diff", good, broken]) == 1
    run = tmp_path / "run"
    assert (
        cli.main(["run", str(labs["before"]), scenario, "--backend", "sim", "--out", str(run)]) == 1
    )
    assert cli.main(["report", str(run)]) == 1
    single = labs["root"] / "single"
    source = REPO / "examples" / "incidents" / "3-deadlock" / "fabric.yaml"
    if not single.exists():
        assert cli.main(["generate", str(source), "-o", str(single)]) == 0
    cut = tmp_path / "cut.yaml"
    cut.write_text(
        "- {name: cut, faults: [{fault: link-down, link: 'server link of servers[0]'}]}\n"
    )
    drill = ["drill", str(single), "--faults", str(cut), "--workers", "1"]
    assert cli.main([*drill, "--out", str(tmp_path / "d")]) == 1


NOWHERE = "/nonexistent/twin-lab"
BAD = {
    "apply": ["apply", NOWHERE, NOWHERE, "-o", "/nonexistent/out"],
    "cleanup": ["cleanup", "Not A Lab!"],
    "compare": ["compare", NOWHERE, NOWHERE],
    "completion": ["completion", "no-such-shell"],
    "deploy": ["deploy", NOWHERE],
    "destroy": ["destroy", NOWHERE],
    "diff": ["diff", NOWHERE, NOWHERE],
    "drill": ["drill", NOWHERE, "--faults", "links"],
    "exec": ["exec", NOWHERE, "leaf1", "--", "true"],
    "export": ["export", NOWHERE, "-o", "/nonexistent/out"],
    "fault": ["fault", NOWHERE, "link-down", "leaf1:spine1"],
    "generate": ["generate", NOWHERE, "-o", "/nonexistent/out"],
    "graph": ["graph", NOWHERE],
    "import": ["import", "leaf1=/nonexistent/dump.json", "--lab", NOWHERE, "-o", "/nonexistent/o"],
    "incident": ["incident", "no-such-incident", "/nonexistent/out"],
    "inspect": ["inspect", NOWHERE],
    "qos-test": ["qos-test", NOWHERE],
    "report": ["report", NOWHERE],
    "run": ["run", NOWHERE],
    "schema": ["schema", "--no-such-option"],
    "show": ["show", NOWHERE],
    "sim": ["sim", "run", "/nonexistent/experiment.yaml"],
    "validate": ["validate", NOWHERE],
}


ARGPARSE_ONLY = {"schema": ["schema"], "completion": ["completion", "bash"]}
"""Verbs whose only bad input is an option argparse refuses; how each runs well."""


@pytest.mark.parametrize("verb", sorted(BAD))
def test_two_for_bad_input_in_one_line(verb: str, capsys: pytest.CaptureFixture[str]) -> None:
    if verb in ARGPARSE_ONLY:  # takes no input: only a wrong option, which argparse refuses
        with pytest.raises(SystemExit) as stopped:
            cli.main(BAD[verb])
        assert stopped.value.code == 2
        return
    assert cli.main(BAD[verb]) == 2
    err = capsys.readouterr().err
    assert err.startswith("twin: ") and err.count("\n") == 1, err


def test_the_verb_list_is_covered() -> None:
    assert set(BAD) == set(cli.VERBS)


@pytest.mark.parametrize("verb", sorted(cli.VERBS))
def test_three_for_an_internal_error(
    verb: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    module = importlib.import_module(cli.module_of(verb))

    def broken(_: object) -> int:
        raise KeyError("surprise")

    monkeypatch.setattr(module, "run", broken)
    argv = ARGPARSE_ONLY.get(verb, BAD[verb])
    assert cli.main(argv) == 3
    err = capsys.readouterr().err
    assert err == f"twin: internal error in twin {verb}: KeyError: 'surprise'\n"


def test_help_documents_the_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    shown = capsys.readouterr().out
    for line in ("0  all good", "1  a verdict failed", "2  bad input", "3  internal error"):
        assert line in shown
