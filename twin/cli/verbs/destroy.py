"""`twin destroy DIR`: remove a lab's twin and everything it created."""

from __future__ import annotations

import argparse
from pathlib import Path

from twin.cli.options import add_backend, backend
from twin.cli.output import add_json, emit
from twin.lab.directory import Lab

HELP = "remove a lab's running twin and everything it created"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument("lab", type=Path, help="lab directory")
    add_backend(p)
    add_json(p)


def run(args: argparse.Namespace) -> int:
    """Destroy and say what was removed."""
    lab = Lab.open(args.lab)
    chosen = backend(args, lab)
    with chosen.locked(lab.name, lab.path, "destroy"):
        removed = chosen.destroy(lab)
    text = f"{lab.name}: removed " + ", ".join(f"{n} {what}" for what, n in removed.items())
    emit(args, {"lab": lab.name, "removed": removed}, text)
    return 0
