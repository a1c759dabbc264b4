"""`twin cleanup` removes only what is provably one lab's own, and refuses anything else.

These tests run in-process with the run root moved under the test's temporary directory and
`shutil.rmtree` guarded, so that even a regression cannot remove anything outside it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from labs import lifecycle, state
from labs.netns import frr
from tests.conftest import lab_name, write_lab
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
    monkeypatch.setattr(lifecycle, "RUN_ROOT", root)

    def guarded(path: Any, *args: Any, dir_fd: int | None = None, **kwargs: Any) -> None:
        where = Path(f"/proc/self/fd/{dir_fd}", path) if dir_fd is not None else Path(path)
        assert where.resolve().is_relative_to(tmp_path), f"rmtree({path}) outside the test"
        REAL_RMTREE(path, *args, dir_fd=dir_fd, **kwargs)

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


def _lab_with_state(
    tmp_path: Path, folder: str, status: str, deploying: bool = False
) -> tuple[str, Path]:
    """A lab directory whose state file says `status`, and its run directory claimed by a
    deploy (the record cleanup reads: the lab directory and the deploying process, this one
    when `deploying`, else one that has ended)."""
    name = lab_name()
    path = write_lab(tmp_path / folder, name)
    state.State(name, "netns", status=status).save(path)
    lifecycle.claim(name, path)
    if not deploying:
        run_dir = frr.lab_run_dir(name)
        record = json.loads((run_dir / lifecycle.OWNER).read_text())
        (run_dir / lifecycle.OWNER).write_text(json.dumps({**record, "pid": _dead_pid()}))
    return name, path


def test_cleanup_by_name_removes_the_state_file(
    run_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name, path = _lab_with_state(tmp_path, "lab", "deploying", True)
    assert cli.main(["cleanup", name]) == 2  # live: by name only when forced
    assert cli.main(["cleanup", name, "--force-owner"]) == 0
    assert not (path / "state.json").exists() and not (run_root / name).exists()
    # So the lab directory can be generated again.
    assert cli.main(["generate", str(path / "fabric.yaml"), "-o", str(path), "--force"]) == 0


def test_cleanup_by_directory_removes_the_state_file(run_root: Path, tmp_path: Path) -> None:
    name = lab_name()
    path = write_lab(tmp_path / "lab", name)
    state.State(name, "netns").save(path)
    assert cli.main(["cleanup", str(path)]) == 0
    assert not (path / "state.json").exists()


def test_cleanup_leaves_a_state_file_of_another_lab(run_root: Path, tmp_path: Path) -> None:
    name, path = _lab_with_state(tmp_path, "lab", "deploying")
    state.State("someone-else", "netns").save(path)  # the directory was reused since
    assert cli.main(["cleanup", name]) == 0
    assert (path / "state.json").exists()


@pytest.fixture
def tagged_sleeper() -> Iterator[Callable[[str], subprocess.Popen[bytes]]]:
    """Start `sleep` tagged with a lab's name (a daemon of a running lab, for cleanup)."""
    started: list[subprocess.Popen[bytes]] = []

    def start(name: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(["sleep", "60"], env={"TWIN_LAB": name})
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


def test_unnamed_cleanup_takes_only_provable_leftovers(
    run_root: Path,
    tmp_path: Path,
    tagged_sleeper: Callable[[str], subprocess.Popen[bytes]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Confined to this test's run root: `labs_left` lists only the labs planted here.
    running, running_dir = _lab_with_state(tmp_path, "running", "running")
    daemon = tagged_sleeper(running)
    crashed, crashed_dir = _lab_with_state(tmp_path, "crashed", "running")  # no process left
    killed, killed_dir = _lab_with_state(tmp_path, "killed", "deploying")
    deploying, deploying_dir = _lab_with_state(tmp_path, "deploying", "deploying", True)
    assert cli.main(["cleanup"]) == 0
    out = capsys.readouterr().out
    for gone, path in ((crashed, crashed_dir), (killed, killed_dir)):
        assert f"{gone}: removed " in out
        assert not (run_root / gone).exists() and not (path / "state.json").exists()
    for kept, path in ((running, running_dir), (deploying, deploying_dir)):
        assert f"{kept}: {path.name}, kept" in out
        assert (run_root / kept).is_dir() and (path / "state.json").exists()
    assert "--all" in out
    assert daemon.poll() is None
    assert cli.main(["cleanup", "--all"]) == 0
    assert daemon.wait(timeout=10) is not None
    assert not (run_root / running).exists() and not (running_dir / "state.json").exists()


def test_unnamed_cleanup_keeps_a_live_lab_whose_state_file_is_gone(
    run_root: Path,
    tmp_path: Path,
    tagged_sleeper: Callable[[str], subprocess.Popen[bytes]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Its deploy has ended and its lab directory was moved: its daemons still run.
    moved, moved_dir = _lab_with_state(tmp_path, "moved", "running")
    daemon = tagged_sleeper(moved)
    moved_dir.rename(tmp_path / "elsewhere")
    assert cli.main(["cleanup"]) == 0
    assert f"{moved}: unknown, kept" in capsys.readouterr().out
    assert daemon.poll() is None and (run_root / moved).is_dir()
    assert cli.main(["cleanup", moved]) == 0
    assert daemon.wait(timeout=10) is not None and not (run_root / moved).exists()


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid
