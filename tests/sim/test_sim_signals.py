"""SIGTERM and SIGINT stop `twin run --backend sim` while the simulator's core runs (a C call
that would otherwise hold the signal's handler back until it returned): one line, exit 128 +
the signal, the run directory marked interrupted, the twin destroyed."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import TWIN, lab_name, write_lab

LONG = {
    "name": "long",
    "traffic": [
        {"name": "backup", "at": 0, "duration": 3600, "kind": "backup"}
        | {"src": "server1", "dst": "server2"}
    ],
    "sim": {"time_scale": 1},
}
"""An hour of line-rate traffic in simulated time: the core would run for days."""


def _cpu(pid: int) -> float:
    """A process's CPU seconds so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_run_inside_the_core(sig: signal.Signals, tmp_path: Path) -> None:
    lab = write_lab(tmp_path / "lab", lab_name("sg"), leaves=2)
    scenario = tmp_path / "long.yaml"
    scenario.write_text(yaml.safe_dump(LONG))
    out = tmp_path / "run"
    argv = [str(TWIN)] if TWIN.exists() else [sys.executable, "-m", "twin.cli.main"]
    args = ["run", str(lab), str(scenario), "--backend", "sim", "--out", str(out)]
    child = subprocess.Popen([*argv, *args], stderr=subprocess.PIPE, text=True)
    try:
        assert child.stderr is not None
        said = []
        for line in child.stderr:  # the core is built right after this line
            said.append(line)
            if "simulating" in line:
                break
        start = _cpu(child.pid)
        while child.poll() is None and _cpu(child.pid) < start + 2.0:  # the core built (in
            time.sleep(0.1)  # far less) and running
        child.send_signal(sig)
        _, rest = child.communicate(timeout=60)  # not the core's days
        err = "".join(said) + rest
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 128 + sig, err
    assert err.splitlines()[-1].startswith(f"twin: stopped by {sig.name}"), err
    assert (out / "interrupted").read_text() == f"interrupted: {sig.name}\n"
    assert not (out / "run.json").exists()
    assert not (lab / "state.json").exists()  # the twin it deployed is destroyed


def test_an_error_in_the_cores_thread_is_raised_in_the_caller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from labs.sim import engine, headroom, native

    def fails(*_: object) -> int:
        raise ctypes.ArgumentError("argument 2: wrong type")

    monkeypatch.setattr(native.library(), "sim_run", fails)
    with pytest.raises(ctypes.ArgumentError, match="argument 2"):
        engine.simulate(headroom.experiment(100e9, 100, 100))
