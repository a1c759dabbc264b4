"""Options several verbs share."""

from __future__ import annotations

import argparse
from pathlib import Path

from labs import lifecycle, registry
from labs.lifecycle import Managed
from twin.lab.directory import Lab


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


def backend(args: argparse.Namespace, lab: Lab) -> Managed:
    """The backend a verb acts through, in its lifecycle (which refuses acting on a twin of
    the lab's name that another lab directory deployed, unless --force-owner); refused, as
    root, on a lab directory another user owns or can write (unless --trust-lab-dir)."""
    lifecycle.check_lab_dir(lab.path, args.trust_lab_dir)
    return registry.of(lab, args.backend, args.force_owner)


def running(args: argparse.Namespace, lab: Lab) -> Managed:
    """The backend of the lab directory's running twin; one line when none runs (naming the
    lab directory that deployed a twin of its name, if another did)."""
    chosen = backend(args, lab)
    chosen.live(lab)
    return chosen


def add_reports(p: argparse.ArgumentParser, out: str, junit: str) -> None:
    """`--out DIR` (created fresh, refused if it exists and is not empty) and `--junit PATH`."""
    p.add_argument(
        "--out", type=Path, help=f"{out} (created; refused if it exists and is not empty)"
    )
    p.add_argument("--junit", type=Path, help=junit)
