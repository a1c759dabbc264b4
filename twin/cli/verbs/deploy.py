"""`twin deploy DIR [--backend NAME]`: start a live twin of a lab directory.

Exit 0: the twin runs and has converged. Exit 1: the twin runs (left up, `twin destroy DIR`)
but had not converged when the deploy stopped waiting (`--timeout`); what it lacked is
printed. Exit 2: bad input, nothing started.
"""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import asdict
from pathlib import Path

from labs.backend import Deployed
from twin.cli.options import add_backend, backend
from twin.cli.output import add_json, emit
from twin.cli.serve import add_metrics, metrics, until_gone
from twin.lab.directory import Lab

HELP = "start a live twin of a lab directory (default backend netns: namespaces, veths, FRR)"
log = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument("lab", type=Path, help="lab directory (twin generate)")
    p.add_argument(
        "--timeout",
        type=float,
        help="seconds to wait for convergence (default 60, 2 more per switch beyond 12); "
        "a twin not converged by then is left running and the exit code is 1",
    )
    add_backend(p)
    add_metrics(p)
    add_json(p)


def progress(message: str) -> None:
    """Progress lines on stderr, each in one write (clearing a progress bar drawn on the same
    terminal line), and in the log at INFO (`--log-file`; not again on stderr)."""
    clear = "\r\033[K" if sys.stderr.isatty() else ""
    sys.stderr.write(f"{clear}  .. {message}\n")  # one write: the timeline's phases print at once
    sys.stderr.flush()
    log.info("%s", message, extra={"printed": True})


def run(args: argparse.Namespace) -> int:
    """Deploy and print what converged."""
    lab = Lab.open(args.lab)
    chosen = backend(args, lab)
    # a port it cannot take: nothing starts
    with metrics(args.metrics, lab, chosen, progress, args.metrics_flavour):
        with chosen.locked(lab.name, lab.path, "deploy"):
            up = chosen.deploy(lab, progress, timeout=args.timeout)
        _print(args, lab, up)
        if args.metrics:
            until_gone(lab, chosen, progress)
    return 1 if up.unconverged else 0


def _print(args: argparse.Namespace, lab: Lab, up: Deployed) -> None:
    """What the twin reached: converged, or left running with what it lacked."""
    links = up.details.get("links")
    text = f"{lab.name}: {up.nodes} nodes" + (f", {links} links" if links is not None else "")
    if up.unconverged:
        text += (
            f", {up.sessions} BGP sessions ({up.backend}): left running, not converged "
            f"(twin destroy {lab.path})\n{up.lacking()}"
        )
    else:
        text += (
            f", {up.sessions} BGP sessions Established, converged in {up.seconds} s ({up.backend})"
        )
    if "rdma" in up.details:
        text += f"\n{lab.name}: {up.details['rdma']}"
    emit(args, {"lab": lab.name, **asdict(up)}, text)
