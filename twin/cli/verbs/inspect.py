"""`twin inspect DIR [--json]`: nodes, BGP sessions and links of a running twin."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from labs.netns import lifecycle as netns
from twin.cli.text import table
from twin.errors import LabError
from twin.labdir import Lab

HELP = "show a running twin: nodes, BGP sessions, links and their state"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument("lab", type=Path, help="lab directory")
    p.add_argument("--json", action="store_true", help="JSON instead of tables")


def run(args: argparse.Namespace) -> int:
    """Print the twin's state."""
    lab = Lab.open(args.lab)
    if not netns.is_running(lab):
        raise LabError(f"lab {lab.name} is not running (twin deploy {lab.path})")
    data: dict[str, Any] = netns.inspect(lab)
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    print(
        "\n".join(
            table(
                [[n["node"], n["role"], n["netns"], n["state"]] for n in data["nodes"]],
                ["node", "role", "namespace", "state"],
            )
        )
    )
    print()
    print(
        "\n".join(
            table(
                [
                    [s["node"], s["peer"], s["name"], s["state"], str(s["prefixes"])]
                    for s in data["bgp"]
                ],
                ["node", "peer", "name", "state", "prefixes"],
            )
        )
    )
    print()
    print(
        "\n".join(
            table(
                [[lk["a"], lk["b"], lk["kind"], lk["state"]] for lk in data["links"]],
                ["a", "b", "kind", "state"],
            )
        )
    )
    return 0
