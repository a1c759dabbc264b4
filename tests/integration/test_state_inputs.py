"""A lab directory's `state.json` that twin did not write is refused in one line, never followed.

The state file names the namespaces and pids destroy acts on, so one planted or broken (a
link to another file, a FIFO, not JSON, other keys or types) is refused by every verb that
reads it: exit code 2, one line naming the file, the file it may point to left untouched.
Each case was a traceback (or a read through the link) before.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import pytest

from labs import state
from tests.conftest import lab_name, write_lab
from twin.cli import main as cli
from twin.errors import LabError

Plant = Callable[[Path, Path], object]


def _write(text: str) -> Plant:
    return lambda path, victim: path.write_text(text)


def _state(**changed: object) -> Plant:
    def plant(path: Path, victim: Path) -> None:
        record = json.loads((victim.parent / "good.json").read_text())
        path.write_text(json.dumps({**record, **changed}))

    return plant


CASES: dict[str, Plant] = {
    "a link to another file": lambda path, victim: path.symlink_to(victim),
    "a link to a state file of the lab": lambda path, victim: path.symlink_to(
        victim.parent / "good.json"
    ),
    "a FIFO": lambda path, victim: os.mkfifo(path),
    "a directory": lambda path, victim: path.mkdir(),
    "not JSON": _write("{"),
    "a list": _write("[1, 2]"),
    "null": _write("null"),
    "an unknown key": _state(extra=1),
    "a key missing": lambda path, victim: path.write_text(json.dumps({"lab": "x"})),
    "pids a list": _state(pids=[1, 2]),
    "a pid a string": _state(pids={"leaf1": {"zebra": "1"}}),
    "a pid negative": _state(pids={"leaf1": {"zebra": -1}}),
    "namespaces a string": _state(namespaces="abc"),
    "lab a number": _state(lab=5),
    "started a string": _state(started="now"),
    "too large": _write(" " * (state.MAX_BYTES + 1) + "{}"),
}


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    """A generated lab directory, beside it a victim file and a state file of the lab as twin
    writes it (`good.json`)."""
    name = lab_name()
    path = write_lab(tmp_path / "lab", name)
    (tmp_path / "victim").write_text("mine\n")
    (tmp_path / "good.json").write_text(json.dumps(asdict(state.State(name, "netns"))))
    return path


def test_a_state_file_twin_wrote_loads(lab: Path) -> None:
    state.State("x", "netns", namespaces=["x.leaf1"], pids={"leaf1": {"zebra": 7}}).save(lab)
    loaded = state.load(lab)
    assert loaded is not None and loaded.pids == {"leaf1": {"zebra": 7}}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_a_planted_state_file_is_refused(lab: Path, case: str) -> None:
    victim = lab.parent / "victim"
    CASES[case](lab / "state.json", victim)
    with pytest.raises(LabError, match=r"state\.json: not a state file written by twin") as err:
        state.load(lab)
    assert "\n" not in str(err.value)
    assert victim.read_text() == "mine\n"


@pytest.mark.parametrize("verb", ["destroy", "inspect"])
@pytest.mark.parametrize("case", ["a link to another file", "a FIFO", "pids a list"])
def test_verbs_refuse_a_planted_state_file_in_one_line(
    lab: Path, case: str, verb: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if os.geteuid() != 0:
        pytest.skip("the netns verbs check for root first")
    victim = lab.parent / "victim"
    CASES[case](lab / "state.json", victim)
    assert cli.main([verb, str(lab)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{lab / 'state.json'}: " in err, err
    assert victim.read_text() == "mine\n"
