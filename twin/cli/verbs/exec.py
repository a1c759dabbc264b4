"""`twin exec DIR NODE -- CMD ...`: run a command in a node of a running twin."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from twin.cli.options import add_backend, running
from twin.errors import LabError
from twin.labdir import Lab

HELP = "run a command in a node (vtysh on a switch reaches its FRR)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument("lab", type=Path, help="lab directory")
    add_backend(p)
    p.add_argument("node", help="node name, e.g. leaf1 or server3")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")


def run(args: argparse.Namespace) -> int:
    """Run the command and pass its output and exit code through."""
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise LabError("twin exec: give a command after --")
    lab = Lab.open(args.lab)
    if args.node not in lab.graph.nodes:
        raise LabError(f"lab {lab.name} has no node {args.node}")
    done = running(args, lab).exec(lab, args.node, command)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    return done.returncode
