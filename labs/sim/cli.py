"""The command line: run an experiment file, write the JSON outputs, print a summary."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from labs.sim.build import ExperimentError
from labs.sim.engine import simulate
from labs.sim.loader import load
from labs.sim.native import EngineUnavailable


def parser(prog: str = "python -m labs.sim") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, description="Run a packet-level simulation of an experiment file."
    )
    p.add_argument("experiment", type=Path, help="experiment YAML (see docs/simulator.md)")
    p.add_argument("-o", "--output", type=Path, help="write the results as JSON here")
    p.add_argument("--seed", type=int, help="random seed (default: the file's seed, else 1)")
    p.add_argument("-q", "--quiet", action="store_true", help="print no summary")
    return p


def main(argv: list[str] | None = None, prog: str = "python -m labs.sim") -> int:
    """Parse, run, write JSON, print a summary; 0 on success, 1 on a deadlock, 2 on an error."""
    args = parser(prog).parse_args(argv)
    try:
        exp, file_seed = load(args.experiment)
        seed = args.seed if args.seed is not None else file_seed if file_seed is not None else 1
        started = time.perf_counter()
        result = simulate(exp, seed)
        wall = time.perf_counter() - started
    except (ExperimentError, EngineUnavailable, OSError) as exc:
        print(f"sim: {exc}", file=sys.stderr)
        return 2
    if args.output is not None:
        args.output.write_text(result.to_json())
    if not args.quiet:
        print(result.summary())
        print(
            f"wall {wall:.2f} s ({result.packet_hops / max(wall, 1e-9) / 1e6:.2f} M packet hops/s)"
        )
    return 1 if result.deadlocked else 0
