"""The workers traffic forks into a lab's namespace carry the lab's tag and die with their parent.

A sender or receiver worker is forked (not exec'd) into a namespace `<lab>.<node>`. If the
process that forked it is killed (SIGKILL: no clean-up runs), the worker must not stay behind
in the namespace, and while it lives `twin cleanup <lab>` must find it by its tag.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from labs.netns import netlink
from tests.conftest import alive, lab_name, twin_cli

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="creating network namespaces needs root"),
]

# A parent that forks one worker into the namespace, says the worker's pid, and waits.
PARENT = """
import sys, time
from traffic.nsproc import NetnsChild

def wait(conn):
    conn.recv()

child = NetnsChild(sys.argv[1], wait, ())
print(child.process.pid, flush=True)
time.sleep(120)
"""


@pytest.fixture
def lab_netns() -> Iterator[tuple[str, str]]:
    """(lab, its namespace `<lab>.server1`), removed afterwards."""
    lab = lab_name()
    name = f"{lab}.server1"
    netlink.create(name)
    try:
        yield lab, name
    finally:
        if name in netlink.namespaces():
            netlink.remove(name)


def test_a_forked_worker_is_tagged_and_dies_with_its_parent(lab_netns: tuple[str, str]) -> None:
    lab, name = lab_netns
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, name], stdout=subprocess.PIPE, text=True, env=env
    )
    worker = 0
    try:
        assert parent.stdout is not None
        worker = int(parent.stdout.readline())
        deadline = time.monotonic() + 10
        environ = b""
        while f"TWIN_LAB={lab}".encode() not in environ.split(b"\0"):
            assert time.monotonic() < deadline, f"worker environment: {environ!r}"
            environ = Path(f"/proc/{worker}/environ").read_bytes()
            time.sleep(0.05)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 10
        while alive(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(worker)
    finally:
        parent.kill()
        parent.wait()
        if worker and alive(worker):
            os.kill(worker, signal.SIGKILL)


def test_cleanup_ends_an_untagged_process_living_in_the_labs_namespace(
    lab_netns: tuple[str, str],
) -> None:
    lab, name = lab_netns
    env = {k: v for k, v in os.environ.items() if k != "TWIN_LAB"}
    stray = subprocess.Popen(["ip", "netns", "exec", name, "sleep", "60"], env=env)
    try:
        deadline = time.monotonic() + 10
        while (
            Path(f"/proc/{stray.pid}/ns/net").stat().st_ino
            != Path(f"/var/run/netns/{name}").stat().st_ino
        ):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        done = twin_cli("cleanup", lab)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"{lab}: removed 1 namespaces, 1 processes"), done.stdout
        assert stray.wait(timeout=10) != 0
        assert name not in netlink.namespaces()
    finally:
        if stray.poll() is None:
            stray.kill()
            stray.wait()
