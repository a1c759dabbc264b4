"""`twin deploy DIR [--backend NAME]`: start a live twin of a lab directory."""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import asdict
from pathlib import Path

from labs import lifecycle
from twin.cli.options import add_backend, backend
from twin.cli.output import add_json, emit
from twin.cli.serve import add_metrics, serve_until_gone
from twin.labdir import Lab

HELP = "start a live twin of a lab directory (default backend netns: namespaces, veths, FRR)"
log = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument("lab", type=Path, help="lab directory (twin generate)")
    p.add_argument(
        "--timeout",
        type=float,
        help="seconds to wait for convergence (default 60, 2 more per switch beyond 12)",
    )
    add_backend(p)
    add_metrics(p)
    add_json(p)


def progress(message: str) -> None:
    """Progress lines on stderr (clearing a progress bar drawn on the same terminal line), and
    in the log at INFO (`--log-file`; not again on stderr)."""
    clear = "\r\033[K" if sys.stderr.isatty() else ""
    print(f"{clear}  .. {message}", file=sys.stderr, flush=True)
    log.info("%s", message, extra={"printed": True})


def run(args: argparse.Namespace) -> int:
    """Deploy and print what converged."""
    lab = Lab.open(args.lab)
    chosen = backend(args, lab)
    with lifecycle.locked(lab.name, "deploy"):
        up = chosen.deploy(lab, progress, timeout=args.timeout)
    links = up.details.get("links")
    text = (
        f"{lab.name}: {up.nodes} nodes"
        + (f", {links} links" if links is not None else "")
        + f", {up.sessions} BGP sessions Established, converged in {up.seconds} s ({up.backend})"
        + (f"\n{lab.name}: {up.details['rdma']}" if "rdma" in up.details else "")
    )
    emit(args, {"lab": lab.name, **asdict(up)}, text)
    if args.metrics:
        serve_until_gone(args.metrics, lab, chosen, progress, args.metrics_flavour)
    return 0
