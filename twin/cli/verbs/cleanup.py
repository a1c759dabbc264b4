"""`twin cleanup [LAB ...]`: remove what crashed runs left, found by the lab tag."""

from __future__ import annotations

import argparse

from labs.netns import cleanup
from labs.netns import lifecycle as netns

HELP = "remove leftovers of crashed runs (by lab name; all labs with leftovers by default)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument("labs", nargs="*", metavar="LAB", help="lab names (default: every lab found)")


def run(args: argparse.Namespace) -> int:
    """Clean up and say what was removed."""
    netns.check_root()
    names = args.labs or cleanup.labs_left()
    if not names:
        print("nothing to clean up")
    for name in names:
        removed = cleanup.cleanup(name)
        print(
            f"{name}: removed {removed['namespaces']} namespaces, {removed['processes']} processes"
        )
    return 0
