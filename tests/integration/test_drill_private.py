"""A drill as root is private to root, tried by a real second local user: its Dask cluster
answers no connection without the drill's certificate (nor serves HTTP), and the links
that user plants where the drill writes its report are never followed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import TWIN, lab_name, twin_cli, write_lab

ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a second local user)")
SITE = next(Path(sys.prefix, "lib").glob("python3*/site-packages"))
SYSTEM_PYTHON = Path("/usr/bin/python3")

ATTACK = r"""
import asyncio, json, os, sys
from distributed.comm import connect
from distributed.security import Security

async def answered(address, args):
    try:
        comm = await connect(address, timeout=5, **args)
        await comm.write({"op": "identity"})
        reply = await asyncio.wait_for(comm.read(), 5)
        await comm.close()
        return f"answered {str(reply)[:60]}"
    except Exception as exc:
        return f"refused ({type(exc).__name__})"

async def http(port):
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
        writer.write(b"GET /health HTTP/1.0\r\n\r\n")
        reply = await asyncio.wait_for(reader.read(64), 5)
        writer.close()
        return "serves HTTP" if reply.startswith(b"HTTP/") else "no HTTP"
    except (OSError, asyncio.TimeoutError):
        return "no HTTP"

async def main():
    own = Security.temporary().get_connection_args("client")  # a certificate of its own
    ports = json.loads(sys.argv[1])
    tries = [
        t
        for port in ports
        for t in (
            answered(f"tcp://127.0.0.1:{port}", {}),
            answered(f"tls://127.0.0.1:{port}", own),
            http(port),
        )
    ]
    done = await asyncio.gather(*tries)  # all at once: over before the drill is
    out = {port: done[3 * i : 3 * i + 3] for i, port in enumerate(ports)}
    print(json.dumps({"uid": os.getuid(), "ports": out}))

asyncio.run(main())
"""


FAILED = ["refused", "refused", "no"]
"""Each port: plain TCP refused, TLS with another certificate refused, no HTTP."""


def _listening(pid: int) -> set[int]:
    """The TCP ports a process and its children listen on."""
    pids = {pid} | {c.pid for c in psutil.Process(pid).children(recursive=True)}
    return {
        c.laddr.port
        for c in psutil.net_connections("tcp")
        if c.status == psutil.CONN_LISTEN and c.pid in pids
    }


def _attack(ports: set[int], user: str | None) -> dict[str, object]:
    """The attack script, as `user` (the system's Python with this environment's packages)
    or as root (this interpreter)."""
    argv = [sys.executable, "-c", ATTACK, json.dumps(sorted(ports))]
    env = {**os.environ, "PYTHONPATH": str(SITE)}
    if user:
        argv = ["runuser", "-u", user, "--", str(SYSTEM_PYTHON), *argv[1:]]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env, cwd="/")
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


@ROOT
@pytest.mark.skipif(not SYSTEM_PYTHON.exists(), reason="no /usr/bin/python3 for the user")
def test_another_user_cannot_reach_a_drills_cluster(tmp_path: Path, other_user: str) -> None:
    """While a drill runs, a second user connects to every port the drill listens on, in
    plain TCP and in TLS with a certificate of its own, and asks for HTTP: every attempt is
    refused, and so is root's without the drill's certificate. The drill then finishes."""
    lab = write_lab(tmp_path / "lab", lab_name("dp"))
    out = tmp_path / "drill"
    twin = [str(TWIN)] if TWIN.exists() else [sys.executable, "-m", "twin.cli.main"]
    argv = [*twin, "drill", str(lab), "--faults", "random:3x600", "--out", str(out)]
    drill = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        ports: set[int] = set()
        while len(ports) < 5 and time.monotonic() < deadline and drill.poll() is None:
            time.sleep(0.5)
            ports = _listening(drill.pid)
        time.sleep(1.0)
        ports = _listening(drill.pid)
        for user in (other_user, None):
            seen = _attack(ports, user)
            assert seen["uid"] != 0 if user else seen["uid"] == 0
            tried = dict(seen["ports"])  # type: ignore[call-overload]
            met = {p: t for p, t in tried.items() if [w.split()[0] for w in t] != FAILED}
            assert not met, (user or "root", met)
        assert len(ports) == 5, ports  # the scheduler, two nannies, two workers: no HTTP
        assert drill.poll() is None  # the ports were the live drill's all along
    finally:
        if drill.poll() is None:
            drill.send_signal(signal.SIGINT)
        drill.communicate(timeout=120)


SWAPPER = r"""
import os, sys, time
target, victim = sys.argv[1], sys.argv[2]
deadline = time.monotonic() + float(sys.argv[3])
swaps = 0
while time.monotonic() < deadline:
    try:
        if os.path.isdir(target) and not os.path.islink(target):
            os.rename(target, f"{target}.{swaps}")
            os.symlink(victim, target)
            swaps += 1
    except OSError:
        pass
    time.sleep(0.001)
print(swaps)
"""


@ROOT
def test_links_planted_at_the_drill_directory_are_never_followed(other_user: str) -> None:
    """A lab directory another user owns: a drill as root is refused unless trusted; trusted,
    that user keeps replacing the drill's report directory, once made, with a link to a
    root-only directory: nothing lands there, and the drill ends in one
    line (exit 2), never through the link."""
    shared_tmp = Path(tempfile.mkdtemp(prefix="twt-"))  # pytest's are root's only
    shared_tmp.chmod(0o755)
    try:
        _plant_links_while_a_drill_runs(shared_tmp, other_user)
    finally:
        shutil.rmtree(shared_tmp)


def _plant_links_while_a_drill_runs(shared_tmp: Path, other_user: str) -> None:
    lab = write_lab(shared_tmp / "lab", lab_name("dl"))
    (lab / "drills").mkdir()
    subprocess.run(["chown", "-R", other_user, str(lab)], check=True)
    secret = shared_tmp / "secret"
    secret.mkdir(mode=0o700)
    out = lab / "drills" / "d"
    drill = ["drill", str(lab), "--faults", "links:fabric", "--out", str(out)]
    refused = twin_cli(*drill)
    assert refused.returncode == 2 and "--trust-lab-dir" in refused.stderr, refused.stderr
    as_user = ["runuser", "-u", other_user, "--", str(SYSTEM_PYTHON), "-c", SWAPPER]
    swapper = subprocess.Popen(
        [*as_user, str(out), str(secret), "60"],
        stdout=subprocess.PIPE,
        text=True,
        cwd="/",
    )
    try:
        time.sleep(0.5)
        done = twin_cli(*drill, "--trust-lab-dir", timeout=300)
    finally:
        swapper.kill()
        swaps = swapper.communicate()[0]
    assert list(secret.iterdir()) == [], swaps
    assert done.returncode == 2 and int(swaps) > 0, (done.stderr, swaps)
    said = [line for line in done.stderr.splitlines() if not line.startswith("  .. ")]
    assert len(said) == 1 and said[0].startswith("twin: "), done.stderr
