"""`twin cleanup` removes only what is provably one lab's own, and refuses anything else.

These tests run in-process with the run root moved under the test's temporary directory and
`shutil.rmtree` guarded, so that even a regression cannot remove anything outside it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import lab_name, write_lab

from labs.netns import frr
from twin.cli import main as cli

REAL_RMTREE: Callable[..., Any] = shutil.rmtree


@pytest.fixture
def run_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A run root of our own, holding another lab's run directory that must survive."""
    if os.geteuid() != 0:
        pytest.skip("twin cleanup needs root")
    root = tmp_path / "run" / "twin"
    (root / "other-lab" / "leaf1").mkdir(parents=True)
    (root / "other-lab" / "leaf1" / "zserv.api").write_text("")
    monkeypatch.setattr(frr, "RUN_ROOT", root)

    def guarded(path: Any, *args: Any, **kwargs: Any) -> None:
        assert Path(path).resolve().is_relative_to(tmp_path), f"rmtree({path}) outside the test"
        REAL_RMTREE(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", guarded)
    return root


BAD_TARGETS = ["", ".", "..", "/", "../twin", "a/b", "Bad", "x" * 13, "it-abc\n", "-"]


@pytest.mark.parametrize("target", BAD_TARGETS, ids=repr)
def test_cleanup_refuses_what_is_not_a_lab_name_or_directory(
    target: str,
    run_root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["cleanup", "--", target]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("twin: ")
    assert (run_root / "other-lab" / "leaf1" / "zserv.api").exists()


def test_cleanup_of_a_plain_directory_is_refused_and_leaves_it(
    run_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = tmp_path / "x" / "mylab"
    plain.mkdir(parents=True)
    (plain / "keep").write_text("mine")
    assert cli.main(["cleanup", str(plain)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert (plain / "keep").read_text() == "mine"
    assert (run_root / "other-lab").is_dir()


def test_cleanup_of_a_lab_directory_cleans_that_lab_by_its_name(
    run_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = lab_name()
    (tmp_path / "x").mkdir()
    path = write_lab(tmp_path / "x" / "mylab", name)
    (run_root / name / "leaf1").mkdir(parents=True)
    assert cli.main(["cleanup", str(path)]) == 0
    assert capsys.readouterr().out.startswith(f"{name}: removed 0 namespaces, 0 processes")
    assert (path / "fabric.yaml").is_file() and (path / "configs").is_dir()
    assert not (run_root / name).exists()
    assert (run_root / "other-lab" / "leaf1" / "zserv.api").exists()


def test_a_symlink_in_the_run_root_is_not_followed(run_root: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("mine")
    name = lab_name()
    (run_root / name).symlink_to(victim)
    assert cli.main(["cleanup", name]) == 0
    assert (victim / "keep").read_text() == "mine"


@pytest.mark.parametrize("bad", ["", ".", "..", "/", "a/b", "../other-lab"], ids=repr)
def test_remove_run_dir_refuses_anything_but_a_lab_name(bad: str, run_root: Path) -> None:
    with pytest.raises(ValueError, match="not a lab name"):
        frr.remove_run_dir(bad)
    assert (run_root / "other-lab" / "leaf1").is_dir()
