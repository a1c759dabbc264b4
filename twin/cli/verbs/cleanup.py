"""`twin cleanup [LAB ...]`: remove what crashed runs left, found by the lab tag."""

from __future__ import annotations

import argparse

from labs.netns import cleanup
from labs.netns import lifecycle as netns
from twin.labdir import lab_target

HELP = "remove leftovers of crashed runs (by lab name or lab directory; by default all labs found)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument(
        "labs",
        nargs="*",
        metavar="LAB",
        help="lab names or lab directories (default: every lab found)",
    )


def run(args: argparse.Namespace) -> int:
    """Clean up and say what was removed."""
    netns.check_root()
    names = [lab_target(t)[0] for t in args.labs] if args.labs else cleanup.labs_left()
    if not names:
        print("nothing to clean up")
    for name in names:
        removed = cleanup.cleanup(name)
        print(
            f"{name}: removed {removed['namespaces']} namespaces, {removed['processes']} processes"
        )
    return 0
