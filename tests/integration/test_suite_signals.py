"""A test session stopped by SIGTERM (a CI timeout) or SIGINT, even one started in the
background with SIGINT ignored, still tears its fixtures down (tests/conftest.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO

SESSION = """
import time
from pathlib import Path

import pytest

MARKS = Path(__file__).parent


@pytest.fixture(scope="session")
def held():
    yield
    (MARKS / "torn-down").write_text("yes")


def test_waits(held):
    (MARKS / "started").write_text("yes")
    time.sleep(120)
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_session_tears_its_fixtures_down(tmp_path: Path, signum: int) -> None:
    (tmp_path / "test_held.py").write_text(SESSION)
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider"]
    # as `cmd &` in a script starts it: SIGINT ignored
    proc = subprocess.Popen(
        [*argv, str(tmp_path / "test_held.py")],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        for _ in range(600):  # until the test runs (at most a minute)
            if (tmp_path / "started").exists() or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert (tmp_path / "started").exists(), proc.communicate()[0]
        proc.send_signal(signum)
        out = proc.communicate(timeout=60)[0].decode()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert (tmp_path / "torn-down").exists(), out


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_forked_child_dies_of_the_signal_and_leaves_the_session_alone(signum: int) -> None:
    """pyroute2 forks a helper per namespace socket and ends it with SIGTERM: the child must
    die of it, not raise into a copy of the session (whose teardown removed the namespaces of
    the twins still in use)."""
    ready, done = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(ready)
            os.close(done)
            time.sleep(60)
        finally:
            os._exit(7)
    os.close(done)
    os.read(ready, 1)  # returns when the child has closed its end: its handlers are in place
    os.close(ready)
    os.kill(pid, signum)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == -signum
