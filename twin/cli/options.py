"""Options several verbs share."""

from __future__ import annotations

import argparse
from pathlib import Path

from labs import lifecycle, registry
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
    p.add_argument(
        "--force-owner",
        action="store_true",
        help="act on the lab's running twin even if another lab directory deployed it",
    )
    p.add_argument(
        "--trust-lab-dir",
        action="store_true",
        help="as root, act on a lab directory another user owns or can write",
    )


def backend(args: argparse.Namespace, lab: Lab) -> Backend:
    """The backend a verb acts through; refused when a twin of the lab's name runs from
    another lab directory (unless --force-owner), or, as root, on a lab directory another
    user owns or can write (unless --trust-lab-dir)."""
    lifecycle.check_lab_dir(lab.path, args.trust_lab_dir)
    lifecycle.check_owner(lab.name, lab.path, args.force_owner)
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
