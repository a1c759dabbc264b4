"""The same experiment and seed give byte-identical JSON; another seed gives another run."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

from labs.sim import load, simulate

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "sim"


def test_same_seed_same_bytes() -> None:
    exp, _ = load(EXAMPLES / "dcqcn_incast_2.yaml")
    short = dataclasses.replace(exp, duration=0.01)
    first = simulate(short, 7).to_json()
    second = simulate(short, 7).to_json()
    assert first == second
    other = simulate(short, 8).to_json()
    assert other != first


def test_the_cores_cpu_is_measured_and_not_compared() -> None:
    """`Result.core_cpu`, the core's run's CPU, is part of the process's and differs from run
    to run: two runs of a seed are equal whatever theirs, and their JSON leaves it out."""
    exp, _ = load(EXAMPLES / "dcqcn_incast_2.yaml")
    short = dataclasses.replace(exp, duration=0.01)
    before = time.process_time()
    first = simulate(short, 7)
    assert 0 < first.core_cpu <= time.process_time() - before
    second = dataclasses.replace(simulate(short, 7), core_cpu=first.core_cpu + 1)
    assert first == second and first.to_json() == second.to_json()
    assert '"core_cpu"' not in first.to_json()


def test_same_bytes_across_processes(tmp_path: Path) -> None:
    outs = []
    for hash_seed in ("1", "2"):
        out = tmp_path / f"out{hash_seed}.json"
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(REPO)}
        command = [sys.executable, "-m", "labs.sim", str(EXAMPLES / "pfc_incast_8.yaml")]
        subprocess.run([*command, "-q", "-o", str(out)], env=env, check=True)
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] and b'"pause_sent"' in outs[0]
