"""Options several verbs share."""

from __future__ import annotations

import argparse
from pathlib import Path

from labs import registry
from labs.backend import Backend
from twin.errors import LabError
from twin.labdir import Lab


def add_backend(p: argparse.ArgumentParser) -> None:
    """`--backend NAME` (default: the one the lab's twin runs on, else netns)."""
    p.add_argument(
        "--backend",
        choices=sorted(registry.BACKENDS),
        help=f"backend (default: the lab's running one, else {registry.DEFAULT})",
    )


def backend(args: argparse.Namespace, lab: Lab) -> Backend:
    """The backend a verb acts through."""
    return registry.of(lab, args.backend)


def running(args: argparse.Namespace, lab: Lab) -> Backend:
    """The backend of the lab's running twin; one line when none runs."""
    chosen = backend(args, lab)
    if not chosen.running(lab):
        raise LabError(f"lab {lab.name} is not running (twin deploy {lab.path})")
    return chosen


def add_reports(p: argparse.ArgumentParser, out: str, junit: str) -> None:
    """`--out DIR` (created fresh, refused if it exists and is not empty) and `--junit PATH`."""
    p.add_argument(
        "--out", type=Path, help=f"{out} (created; refused if it exists and is not empty)"
    )
    p.add_argument("--junit", type=Path, help=junit)
