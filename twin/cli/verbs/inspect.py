"""`twin inspect DIR [--json]`: nodes, BGP sessions and links of a running twin."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from twin.cli.options import add_backend, running
from twin.cli.text import table
from twin.labdir import Lab

HELP = "show a running twin: nodes, BGP sessions, links and their state"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument("lab", type=Path, help="lab directory")
    p.add_argument("--json", action="store_true", help="JSON instead of tables")
    add_backend(p)


def run(args: argparse.Namespace) -> int:
    """Print the twin's state."""
    lab = Lab.open(args.lab)
    status = running(args, lab).status(lab)
    if args.json:
        print(json.dumps(asdict(status), indent=2))
        return 0
    roles = {n: str(lab.graph.nodes[n]["role"]) for n in status.nodes}
    tables = [
        table(
            [[n, roles[n], state] for n, state in status.nodes.items()],
            ["node", "role", "state"],
        ),
        table(
            [[s.node, s.peer, s.name, s.state, str(s.prefixes)] for s in status.sessions],
            ["node", "peer", "name", "state", "prefixes"],
        ),
        table(
            [[k.a, k.a_port, k.b, k.b_port, "up" if k.up else "down"] for k in status.links],
            ["a", "port", "b", "port", "state"],
        ),
    ]
    print(f"{lab.name} on {status.backend}\n")
    print("\n\n".join("\n".join(t) for t in tables))
    return 0
