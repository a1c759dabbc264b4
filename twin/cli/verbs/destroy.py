"""`twin destroy DIR`: remove a lab's twin (processes, namespaces, run directories)."""

from __future__ import annotations

import argparse
from pathlib import Path

from labs.netns import lifecycle as netns
from twin.labdir import Lab

HELP = "remove a lab's running twin and everything it created"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument("lab", type=Path, help="lab directory")


def run(args: argparse.Namespace) -> int:
    """Destroy and say what was removed."""
    lab = Lab.open(args.lab)
    removed = netns.destroy(lab)
    print(
        f"{lab.name}: removed {removed['namespaces']} namespaces, {removed['processes']} processes"
    )
    return 0
