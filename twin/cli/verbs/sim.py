"""`twin sim run EXPERIMENT.yaml [-o OUT.json] [--seed N]`: a packet-level simulation of an
experiment file (docs/simulator.md), and `python -m labs.sim`, which shares its arguments and
`execute`. The simulator is imported only when the verb runs: this glue sits above it."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from twin import safeio
from twin.errors import TwinError, one_line

HELP = "run a packet-level simulation of an experiment file (labs.sim)"


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of a run (also `python -m labs.sim`'s): file, JSON output, seed, quiet."""
    p.add_argument("experiment", type=Path, help="experiment YAML (see docs/simulator.md)")
    p.add_argument("-o", "--output", type=Path, help="write the results as JSON here")
    p.add_argument("--seed", type=int, help="random seed (default: the file's, else 1)")
    p.add_argument("-q", "--quiet", action="store_true", help="print no summary")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb: `run` and the experiment's."""
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    add_run_arguments(
        actions.add_parser(
            "run",
            help="simulate an experiment file; exit 1 on a deadlock",
            description="Simulate an experiment file, print a summary, write the results as "
            "JSON; exit 0, 1 when a deadlock was detected, 2 on bad input or a missing C core.",
        )
    )


def run(args: argparse.Namespace) -> int:
    """Simulate; errors are TwinError or OSError, which the CLI prints as one line."""
    return execute(args)


def execute(args: argparse.Namespace) -> int:
    """Run, write JSON, print a summary; 0, or 1 on a deadlock. Bad input, a missing core or
    an unwritable output raise TwinError or OSError before anything is written."""
    from labs.sim.build import ExperimentError
    from labs.sim.engine import simulate
    from labs.sim.loader import load

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
    """`python -m labs.sim`: parse and execute; 0 on success, 1 on a deadlock, 2 on an error
    (one line)."""
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
