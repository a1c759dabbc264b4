"""The log of a `twin` command: `-v` shows its steps, `--debug` every command and netlink batch a
backend runs with its duration and exit code, `--log-file PATH` keeps everything and refuses a
symbolic link."""

from __future__ import annotations

import logging
import os
import re
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

from labs import cmdlog
from tests.conftest import lab_name, twin_cli, write_lab
from traffic.nsproc import NetnsChild
from twin.cli.main import verb_of
from twin.pytest_plugin import Twin

MS = r"in \d+\.\d ms"


def test_a_command_is_logged_with_its_exit_code_and_duration(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="labs.cmdlog")
    assert cmdlog.run(["sh", "-c", "exit 3"]).returncode == 3
    assert cmdlog.run(["true"]).returncode == 0
    lines = [r.getMessage() for r in caplog.records if r.name == "labs.cmdlog"]
    assert re.fullmatch(rf"sh -c 'exit 3': exit 3 {MS}", lines[0]), lines
    assert re.fullmatch(rf"true: exit 0 {MS}", lines[1]), lines


def test_a_command_that_cannot_start_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="labs.cmdlog")
    with pytest.raises(FileNotFoundError):
        cmdlog.run(["/nonexistent/tool", "x"])
    assert re.fullmatch(
        r"/nonexistent/tool x: not run \(No such file or directory\) after \d+\.\d ms",
        caplog.records[-1].getMessage(),
    )


def test_a_netlink_batch_is_logged_done_or_failed(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="labs.cmdlog")
    with cmdlog.netlink("ns1: 2 links"):
        pass
    with pytest.raises(OSError), cmdlog.netlink("ns1: routes"):
        raise OSError(22, "Invalid argument")
    first, second = (r.getMessage() for r in caplog.records)
    assert re.fullmatch(rf"netlink ns1: 2 links: done {MS}", first)
    assert re.fullmatch(
        rf"netlink ns1: routes: failed \(\[Errno 22\] Invalid argument\) {MS}", second
    )


def _hello(conn: Connection) -> None:
    conn.send(("hello", os.getpid()))


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (setns)")
def test_a_forked_namespace_child_is_logged_with_its_exit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="traffic.nsproc")
    child = NetnsChild("/proc/self/ns/net", _hello, ())
    pid = child.expect("hello", timeout_s=30)
    child.close()
    forked, ended = (r.getMessage() for r in caplog.records if r.name == "traffic.nsproc")
    assert re.fullmatch(rf"_hello in /proc/self/ns/net: forked, pid {pid}, {MS}", forked)
    assert re.fullmatch(r"_hello in /proc/self/ns/net: exit 0 after \d+\.\d{3} s", ended)


def test_the_verb_is_found_after_the_log_files_path() -> None:
    assert verb_of(["--log-file", "deploy", "show", "lab"]) == "show"
    assert verb_of(["--debug", "-v", "run"]) == "run"
    assert verb_of(["--version"]) is None


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    return write_lab(tmp_path / "lab", lab_name("log"), leaves=2)


def test_verbose_shows_the_verb_on_stderr_and_no_debug(lab: Path) -> None:
    done = twin_cli("-v", "show", str(lab))
    assert done.returncode == 0, done.stderr
    assert re.search(r"INFO twin\.cli\.logs: twin -v show ", done.stderr)
    assert re.search(r"INFO twin\.cli\.logs: twin show: exit 0 in \d+\.\d{3} s", done.stderr)
    assert "DEBUG" not in done.stderr
    deployed = twin_cli("-v", "deploy", str(lab), "--backend", "fake")
    try:
        assert deployed.returncode == 0, deployed.stderr
        assert deployed.stderr.count("computing the FIBs from the configs") == 1  # printed once
    finally:
        assert twin_cli("destroy", str(lab)).returncode == 0
    quiet = twin_cli("show", str(lab))
    assert quiet.returncode == 0 and "INFO" not in quiet.stderr


def test_log_file_keeps_the_log_and_stderr_stays_quiet(lab: Path, tmp_path: Path) -> None:
    log = tmp_path / "twin.log"
    log.write_text("before\n")
    done = twin_cli("--log-file", str(log), "deploy", str(lab), "--backend", "fake")
    try:
        assert done.returncode == 0, done.stderr
        kept = log.read_text()
        assert kept.startswith("before\n")  # appended
        assert re.search(r"INFO twin\.cli\.logs: twin --log-file \S+ deploy ", kept)
        assert re.search(r"twin deploy: exit 0 in \d+\.\d{3} s", kept)
        assert "INFO" not in done.stderr
        # the progress lines: printed on stderr, kept in the log
        step = "computing the FIBs from the configs"
        assert f"  .. {step}" in done.stderr
        assert re.search(rf"INFO twin\.cli\.verbs\.deploy: {step}", kept)
    finally:
        assert twin_cli("destroy", str(lab)).returncode == 0


def test_log_file_refuses_a_symbolic_link(lab: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("mine\n")
    link = tmp_path / "twin.log"
    link.symlink_to(victim)
    done = twin_cli("--debug", "--log-file", str(link), "show", str(lab))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and str(link) in done.stderr, done.stderr
    assert "link" in done.stderr and done.stdout == ""
    assert victim.read_text() == "mine\n" and link.is_symlink()


def test_debug_logs_each_command_the_netns_backend_runs(small_twin: Twin) -> None:
    path = small_twin.lab.path
    done = twin_cli("--debug", "exec", str(path), "leaf1", "--", "ip", "-br", "link", "show", "lo")
    assert done.returncode == 0, done.stderr
    ns = f"{small_twin.lab.name}.leaf1"
    assert re.search(
        rf"DEBUG labs\.cmdlog: ip netns exec {re.escape(ns)} ip -br link show lo: exit 0 {MS}",
        done.stderr,
    ), done.stderr
    failed = twin_cli("--debug", "exec", str(path), "leaf1", "--", "sh", "-c", "exit 4")
    assert failed.returncode == 4
    assert re.search(rf"ip netns exec {re.escape(ns)} sh -c 'exit 4': exit 4 {MS}", failed.stderr)
