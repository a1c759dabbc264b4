"""`twin show DIR`: a lab's figures, nodes, links and addresses."""

from __future__ import annotations

import argparse
from pathlib import Path

from twin.cli import text as show
from twin.labdir import Lab

HELP = "print a lab's figures, nodes, links and addresses"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument("lab", type=Path, help="lab directory")


def run(args: argparse.Namespace) -> int:
    """Print the lab."""
    print(show.render(Lab.open(args.lab)), end="")
    return 0
