"""`twin cleanup [LAB ...] [--all]`: remove what crashed runs left, found by the lab tag.

Named labs (by name or lab directory) are removed whatever their state. Without a name, only
labs that are provably left over are: those still deploying or running are listed and kept,
unless `--all` is given.
"""

from __future__ import annotations

import argparse

from labs.netns import cleanup
from labs.netns import lifecycle as netns
from twin.cli.output import add_json, emit
from twin.labdir import lab_target

HELP = "remove leftovers of crashed runs (by lab name or lab directory; without one, all leftovers)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument(
        "labs", nargs="*", metavar="LAB", help="lab names or lab directories (default: leftovers)"
    )
    p.add_argument(
        "--all", action="store_true", help="without LAB: also labs still deploying or running"
    )
    add_json(p)


def run(args: argparse.Namespace) -> int:
    """Clean up and say what was removed, and what was kept."""
    netns.check_root()
    targets = [lab_target(t) for t in args.labs]
    chosen = [(name, lab.path if lab else None) for name, lab in targets]
    kept: dict[str, str] = {}
    lines = []
    if not args.labs:
        for name in cleanup.labs_left():
            why = cleanup.status(name)
            if why == "left over" or args.all:
                chosen.append((name, None))
            else:
                kept[name] = why
                lines.append(f"{name}: {why}, kept (twin cleanup {name}, or --all, removes it)")
        if not chosen:
            lines.append("nothing to clean up")
    removed = {}
    for name, path in chosen:
        removed[name] = done = cleanup.cleanup(name, path)
        lines.append(
            f"{name}: removed {done['namespaces']} namespaces, {done['processes']} processes"
        )
    emit(args, {"removed": removed, "kept": kept}, "\n".join(lines))
    return 0
