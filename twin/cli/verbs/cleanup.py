"""`twin cleanup [LAB ...] [--all]`: remove what crashed runs left, found by the lab tag.

Named labs are removed when they are left over, or when named by the lab directory that
deployed them; a live twin named otherwise (by name, or from another lab directory) is refused
unless `--force-owner` is given. Without a name, only labs that are provably left over are
removed: those still deploying or running are listed and kept, unless `--all` is given. Each
lab is cleaned up by the backend its deploy recorded (`Backend.cleanup`).
"""

from __future__ import annotations

import argparse

from labs import lifecycle, registry
from twin.cli.output import add_json, emit
from twin.lab.directory import lab_target

HELP = "remove leftovers of crashed runs (by lab name or lab directory; without one, all leftovers)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument(
        "labs", nargs="*", metavar="LAB", help="lab names or lab directories (default: leftovers)"
    )
    p.add_argument(
        "--all", action="store_true", help="without LAB: also labs still deploying or running"
    )
    p.add_argument(
        "--force-owner",
        action="store_true",
        help="remove a named live twin even if another lab directory (or none) deployed it",
    )
    add_json(p)


def run(args: argparse.Namespace) -> int:
    """Clean up and say what was removed, and what was kept."""
    targets = [lab_target(t) for t in args.labs]
    chosen = [(name, lab.path if lab else None) for name, lab in targets]
    for name, path in chosen:
        lifecycle.check_owner(name, path, args.force_owner)
    kept: dict[str, str] = {}
    lines = []
    if not args.labs:
        for name in lifecycle.labs_left():
            why = lifecycle.status(name)
            if why == "left over" or args.all:
                chosen.append((name, None))
            else:
                kept[name] = why
                lines.append(
                    f"{name}: {why}, kept (twin cleanup {name} --force-owner, or --all, removes it)"
                )
        if not chosen:
            lines.append("nothing to clean up")
    removed = {}
    for name, path in chosen:
        backend = registry.left_by(name, path)
        with backend.locked(name, path, "cleanup"):
            removed[name] = done = backend.cleanup(name, path)
        what = ", ".join(f"{n} {kind}" for kind, n in done.items()) or "nothing was left"
        lines.append(f"{name}: removed {what} ({backend.name})")
    emit(args, {"removed": removed, "kept": kept}, "\n".join(lines))
    return 0
