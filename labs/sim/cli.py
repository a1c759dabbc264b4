"""The command line: run an experiment file, write the JSON outputs, print a summary.

``python -m labs.sim`` and ``twin sim run`` share their arguments (`twin.cli.verbs.sim`) and
`execute`.
"""

from __future__ import annotations

import argparse
import sys
import time

from labs.sim.build import ExperimentError
from labs.sim.engine import simulate
from labs.sim.loader import load
from twin import safeio
from twin.cli.verbs.sim import add_run_arguments
from twin.errors import TwinError, one_line


def execute(args: argparse.Namespace) -> int:
    """Run, write JSON, print a summary; 0, or 1 on a deadlock. Bad input, a missing core or
    an unwritable output raise TwinError or OSError before anything is written."""
    if args.output is not None and args.output.is_dir():
        raise TwinError(f"{args.output}: is a directory, not a JSON file to write")
    exp, file_seed = load(args.experiment)
    seed = args.seed if args.seed is not None else file_seed if file_seed is not None else 1
    started = time.perf_counter()
    try:
        result = simulate(exp, seed)
    except ExperimentError as exc:  # found while building: name the file, as load does
        raise ExperimentError(f"{args.experiment}: {exc}") from None
    wall = time.perf_counter() - started
    if args.output is not None:
        safeio.write(args.output, result.to_json())
    if not args.quiet:
        print(result.summary())
        print(
            f"wall {wall:.2f} s ({result.packet_hops / max(wall, 1e-9) / 1e6:.2f} M packet hops/s)"
        )
    return 1 if result.deadlocked else 0


def main(argv: list[str] | None = None, prog: str = "python -m labs.sim") -> int:
    """Parse and execute; 0 on success, 1 on a deadlock, 2 on an error (one line)."""
    p = argparse.ArgumentParser(
        prog=prog, description="Run a packet-level simulation of an experiment file."
    )
    add_run_arguments(p)
    args = p.parse_args(argv)
    try:
        return execute(args)
    except TwinError as exc:
        print(f"sim: {exc}", file=sys.stderr)
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"sim: {one_line(where + (exc.strerror or str(exc)))}", file=sys.stderr)
    return 2
