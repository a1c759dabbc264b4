"""No verb writes through a symbolic link planted in a lab directory or a run directory.

Twin runs as root and writes into the lab directory (state, event log, logs, validation
reports, runs), so a link there (a lab directory received from someone else) would have root
append to or overwrite any file. A lab or run directory holding a link is refused in one line
naming it, exit code 2, before anything is written; the file it points to is left untouched.
Before, `twin deploy --backend fake` appended its event to the link's target.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from twin.cli import main as cli
from twin.lab import directory


@pytest.fixture
def lab(played_lab: Path, tmp_path: Path) -> Path:
    """A copy of the played lab, a victim file beside it."""
    (tmp_path / "victim").write_text("mine\n")
    return Path(shutil.copytree(played_lab, tmp_path / "lab", symlinks=True))


def _run_dir(lab: Path) -> Path:
    return next((lab / "runs").iterdir())


PLANTS: dict[str, Callable[[Path], Path]] = {
    "events.jsonl": lambda lab: lab / "events.jsonl",
    "failures.json": lambda lab: lab / "failures.json",
    "a log folder": lambda lab: lab / "logs" / "leaf1",
    "a validation report": lambda lab: lab / "validate" / "report.md",
    "a run's report": lambda lab: _run_dir(lab) / "report.md",
}


def _plant(lab: Path, case: str) -> Path:
    link = PLANTS[case](lab)
    if link.exists():
        shutil.rmtree(link) if link.is_dir() else link.unlink()
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(lab.parent / "victim")
    return link


@pytest.mark.parametrize("case", PLANTS, ids=list(PLANTS))
@pytest.mark.parametrize(
    "verb", [["deploy", "--backend", "fake"], ["validate"], ["show"]], ids=lambda v: v[0]
)
def test_a_lab_directory_holding_a_link_is_refused(
    lab: Path, case: str, verb: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    link = _plant(lab, case)
    assert cli.main([verb[0], str(lab), *verb[1:]]) == 2
    err = capsys.readouterr().err
    assert err == f"twin: {link}: a symbolic link (twin writes here and follows no link)\n"
    assert (lab.parent / "victim").read_text() == "mine\n"
    assert not (lab / "state.json").exists()


def test_a_run_directory_holding_a_link_is_refused_by_report(
    lab: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run_dir(lab)
    moved = lab.parent / "run"
    run.rename(moved)  # a run directory copied out of its lab
    link = moved / "report.json"
    link.unlink()
    link.symlink_to(lab.parent / "victim")
    assert cli.main(["report", str(moved)]) == 2
    assert capsys.readouterr().err.startswith(f"twin: {link}: a symbolic link")
    assert (lab.parent / "victim").read_text() == "mine\n"


def test_the_played_lab_has_no_link_and_reports_again(
    lab: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["report", str(_run_dir(lab))]) in (0, 1)
    assert cli.main(["show", str(lab)]) == 0


def test_every_link_under_a_folder_is_found_in_os_walk_order(tmp_path: Path) -> None:
    """Links to a folder, a file, nothing and a parent (a loop), nested, and one to a folder
    listed after a file: found as os.walk lists them (in each folder the links to folders
    first), none followed; a folder that is not there holds none."""
    top = tmp_path / "runs"
    (top / "a" / "b" / "c").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (top / "a" / "file").write_text("x")
    (top / "a" / "0dangling").symlink_to(tmp_path / "nothing")
    (top / "a" / "zfolder").symlink_to(tmp_path / "elsewhere")
    (top / "a" / "b" / "tofile").symlink_to(top / "a" / "file")
    (top / "a" / "b" / "c" / "loop").symlink_to(top / "a")
    (top / "first").symlink_to(tmp_path / "elsewhere")
    walked = [
        Path(here, name)
        for here, folders, files in os.walk(top)
        for name in folders + files
        if Path(here, name).is_symlink()
    ]
    assert len(walked) == 5 and walked[1:3] == [top / "a" / "zfolder", top / "a" / "0dangling"]
    assert directory._links_under(str(top)) == walked
    assert directory._links_under(str(tmp_path / "missing")) == []
