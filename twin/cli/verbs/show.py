"""`twin show DIR`: a lab's figures, nodes, links and addresses."""

from __future__ import annotations

import argparse
from pathlib import Path

from twin.cli import text as show
from twin.cli.output import add_json, emit
from twin.labdir import Lab

HELP = "print a lab's figures, nodes, links and addresses"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument("lab", type=Path, help="lab directory")
    add_json(p)


def run(args: argparse.Namespace) -> int:
    """Print the lab."""
    lab = Lab.open(args.lab)
    if args.json:
        g = lab.graph
        nodes = [{"node": n, **attrs} for n, attrs in g.nodes(data=True)]
        links = [dict(e) for _, _, e in g.edges(data=True)]
        emit(args, {"lab": lab.name, "figures": lab.figures, "nodes": nodes, "links": links}, "")
        return 0
    print(show.render(lab), end="")
    return 0
