"""Root never follows a link the frr user could have planted in a switch's run directory.

The daemons run as user frr and own their run directory, so whatever is there may be a
symlink to any file. These tests plant such links (to a root-owned file) and check that
starting the daemons and saving their logs leave the target untouched. Nothing is started
(`Popen` is replaced by a stand-in that stops `start` where the daemon would be spawned),
except in the last test: a real zebra in a namespace of its own, restarted after user frr
planted its links.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from labs import lifecycle
from labs.netns import frr
from tests.conftest import lab_name
from twin.errors import LabError

CONF = "frr defaults datacenter\nhostname leaf1\nrouter bgp 65001\n"


class Spawned(Exception):
    """Raised where a daemon would have been started."""


@pytest.fixture
def setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path, Path]]:
    """(lab, frr-owned run directory of leaf1, a root-owned victim file)."""

    def spawn(*args: Any, **kwargs: Any) -> None:
        raise Spawned

    monkeypatch.setattr(subprocess, "Popen", spawn)
    monkeypatch.setattr(frr, "inside", lambda netns: contextlib.nullcontext())
    yield _frr_run_dir(tmp_path, monkeypatch)


def _frr_run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path, Path]:
    """(lab, frr-owned run directory of leaf1 under a run root in `tmp_path`, a root-owned
    victim file there)."""
    if os.geteuid() != 0:
        pytest.skip("needs root (chown to frr)")
    try:
        pwd.getpwnam("frr")
    except KeyError:
        pytest.skip("needs the frr user")
    monkeypatch.setattr(lifecycle, "RUN_ROOT", tmp_path / "run")
    tmp_path.chmod(0o755)
    lab = lab_name()
    rundir = frr.run_dir(lab, "leaf1")
    rundir.mkdir(parents=True)
    os.chown(rundir, pwd.getpwnam("frr").pw_uid, pwd.getpwnam("frr").pw_gid)
    victim = tmp_path / "victim"
    victim.write_text("mine\n")
    victim.chmod(0o600)
    return lab, rundir, victim


def _untouched(victim: Path) -> bool:
    stat = victim.stat()
    return victim.read_text() == "mine\n" and (stat.st_uid, stat.st_gid) == (0, 0)


@pytest.mark.parametrize("planted", ["frr.conf", "zebra.startup.conf", "zebra.out.log"])
def test_start_does_not_follow_a_planted_symlink(
    setting: tuple[str, Path, Path], tmp_path: Path, planted: str
) -> None:
    lab, rundir, victim = setting
    (rundir / planted).symlink_to(victim)
    source = tmp_path / "frr.conf"
    source.write_text(CONF)
    with pytest.raises((Spawned, LabError)):
        frr.start(lab, "leaf1", "nowhere", source)
    assert _untouched(victim)


def test_start_refuses_a_planted_symlink_at_the_daemon_output(
    setting: tuple[str, Path, Path], tmp_path: Path
) -> None:
    lab, rundir, victim = setting
    (rundir / "zebra.out.log").symlink_to(victim)
    source = tmp_path / "frr.conf"
    source.write_text(CONF)
    with pytest.raises(LabError, match=r"zebra\.out\.log: a link or not a regular file"):
        frr.start(lab, "leaf1", "nowhere", source)


def test_the_config_daemons_read_is_in_a_directory_frr_cannot_write(
    setting: tuple[str, Path, Path], tmp_path: Path
) -> None:
    lab, _, _ = setting
    source = tmp_path / "frr.conf"
    source.write_text(CONF)
    with pytest.raises(Spawned):
        frr.start(lab, "leaf1", "nowhere", source)
    conf = frr.conf_dir(lab, "leaf1")
    for path in [conf, conf.parent, conf / "frr.conf", conf / "zebra.startup.conf"]:
        stat = path.lstat()
        assert stat.st_uid == 0 and not stat.st_mode & 0o027, path  # as the lab directory
        assert stat.st_gid == grp.getgrnam("frr").gr_gid, path  # the daemons read them
    assert (conf / "frr.conf").read_text() == CONF


def test_save_logs_moves_regular_files_only(
    setting: tuple[str, Path, Path], tmp_path: Path
) -> None:
    lab, rundir, victim = setting
    (rundir / "bgpd.log").symlink_to(victim)
    (rundir / "zebra.log").write_text("zebra\n")
    dest = tmp_path / "lab" / "logs"
    frr.save_logs(lab, dest)
    assert (dest / "leaf1" / "zebra.log").read_text() == "zebra\n"
    assert not (dest / "leaf1" / "bgpd.log").exists()
    assert not (dest / "leaf1" / "bgpd.log").is_symlink()
    assert _untouched(victim)


def test_a_log_swapped_for_a_link_after_it_was_listed_is_not_read(
    setting: tuple[str, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lab, rundir, victim = setting
    (rundir / "bgpd.log").symlink_to(victim)
    # What a check made before the swap saw: a regular file.
    regular = os.stat(victim)
    monkeypatch.setattr(Path, "lstat", lambda self: regular)
    dest = tmp_path / "lab" / "logs"
    frr.save_logs(lab, dest)
    saved = dest / "leaf1" / "bgpd.log"
    assert not saved.is_symlink() and not (saved.exists() and saved.read_text() == "mine\n")
    assert _untouched(victim)


@pytest.mark.parametrize("planted", ["a link", "a FIFO"])
def test_the_event_log_is_read_only_as_a_regular_file(
    setting: tuple[str, Path, Path], planted: str
) -> None:
    _, rundir, victim = setting
    log = rundir / frr.EVENT_LOG
    if planted == "a link":
        log.symlink_to(victim)
    else:
        os.mkfifo(log)
    assert frr.read_log(log, 0) == ([], 0)  # neither read through nor waited on
    log.unlink()
    log.write_text("one\ntwo\n")
    assert frr.read_log(log, 0) == (["one\n", "two\n"], 8)
    assert frr.read_log(log, 4) == (["two\n"], 8)


def test_a_restarted_daemon_never_writes_through_a_link_user_frr_planted(
    shared_tmp: Path, monkeypatch: pytest.MonkeyPatch, netns: str
) -> None:
    """User frr plants links to a root-only file at the names its daemons log to, then the
    daemon is (re)started as `daemon-restart` does: the file is left as it was."""
    lab, rundir, victim = _frr_run_dir(shared_tmp, monkeypatch)
    for name in ("zebra.log", frr.EVENT_LOG):
        link = str(rundir / name)
        subprocess.run(["runuser", "-u", "frr", "--", "ln", "-s", str(victim), link], check=True)
    source = shared_tmp / "frr.conf"
    source.write_text(CONF)
    pids = frr.start(lab, "leaf1", netns, source, only=["zebra"])
    try:
        log = (rundir / "zebra.out.log").read_text()
        assert victim.read_text() == "mine\n", log
    finally:
        for pid in pids.values():
            os.kill(pid, signal.SIGTERM)
            os.waitpid(pid, 0)
        frr.remove_tmp(list(pids.values()))
