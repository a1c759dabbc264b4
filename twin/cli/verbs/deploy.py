"""`twin deploy DIR`: start a live twin of a lab directory on the netns backend."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from labs.netns import lifecycle as netns
from twin.labdir import Lab

HELP = "start a live twin of a lab directory (netns backend: namespaces, veths, FRR)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument("lab", type=Path, help="lab directory (twin generate)")
    p.add_argument(
        "--timeout",
        type=float,
        help="seconds to wait for convergence (default 60, 2 more per switch beyond 12)",
    )


def progress(message: str) -> None:
    """Progress lines on stderr (clearing a progress bar drawn on the same terminal line)."""
    clear = "\r\033[K" if sys.stderr.isatty() else ""
    print(f"{clear}  .. {message}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    """Deploy and print what converged."""
    lab = Lab.open(args.lab)
    figs = netns.deploy(lab, timeout=args.timeout, progress=progress)
    print(
        f"{lab.name}: {figs['nodes']} nodes, {figs['links']} links, {figs['bgp_sessions']} BGP "
        f"sessions Established, full ECMP in {figs['converged_s']} s"
    )
    print(f"{lab.name}: {figs['rdma']}")
    return 0
