"""`twin sim run EXPERIMENT.yaml [-o OUT.json] [--seed N]`: a packet-level simulation of an
experiment file (docs/simulator.md). The simulator is imported only when the verb runs."""

from __future__ import annotations

import argparse
from pathlib import Path

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
    from labs.sim.cli import execute

    return execute(args)
