"""`twin fault DIR VERB ...`: inject a fault into a running twin and log what follows."""

from __future__ import annotations

import argparse
import functools
from pathlib import Path
from typing import Any

from labs.netns.faults import Faults
from labs.netns.monitor import watch
from twin.labdir import Lab

HELP = "inject a fault (link, node, daemon, loss, rate) and log the state changes it causes"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument("lab", type=Path, help="lab directory")
    watch_for = argparse.ArgumentParser(add_help=False)
    watch_for.add_argument(
        "--quiet", type=float, default=1.5, help="watch until nothing changed for this many seconds"
    )
    verbs = p.add_subparsers(dest="fault", required=True, metavar="FAULT")
    add = functools.partial(verbs.add_parser, parents=[watch_for])
    for name, what in (
        ("link-down", "take a link down"),
        ("link-up", "bring a link up"),
        ("clear", "remove loss and rate limits from a link"),
    ):
        add(name, help=what).add_argument("link", help="NODE:PORT or NODE:PEER")
    flap = add("link-flap", help="take a link down and up repeatedly")
    flap.add_argument("link")
    flap.add_argument("--period", type=float, default=1.0, help="seconds down, then up")
    flap.add_argument("--count", type=int, default=3)
    for name, what in (("node-down", "power a node off"), ("node-up", "power a node on")):
        add(name, help=what).add_argument("node")
    for name, what in (
        ("daemon-kill", "kill an FRR daemon"),
        ("daemon-restart", "restart a switch's FRR daemons"),
    ):
        sub = add(name, help=what)
        sub.add_argument("node")
        sub.add_argument("daemon", nargs="?", default="bgpd")
    loss = add("loss", help="drop a percentage of frames on a link")
    loss.add_argument("link")
    loss.add_argument("percent", type=float)
    rate = add("rate", help="shape a link to a rate")
    rate.add_argument("link")
    rate.add_argument("mbit", type=float, help="Mb/s")


def _action(f: Faults, args: argparse.Namespace) -> dict[str, Any]:
    match args.fault:
        case "link-down" | "link-up":
            return f.link(args.link, up=args.fault == "link-up")
        case "link-flap":
            return f.flap(args.link, args.period, args.count)
        case "node-down" | "node-up":
            return f.node(args.node, up=args.fault == "node-up")
        case "daemon-kill" | "daemon-restart":
            return f.daemon(args.node, args.daemon, up=args.fault == "daemon-restart")
        case "loss":
            return f.loss(args.link, args.percent)
        case "rate":
            return f.rate(args.link, args.mbit)
        case _:
            return f.clear(args.link)


def run(args: argparse.Namespace) -> int:
    """Inject, watch until quiet, print the fault and each change seen."""
    lab = Lab.open(args.lab)
    faults = Faults(lab)
    done: list[dict[str, Any]] = []
    try:
        seen = watch(lab, lambda: done.append(_action(faults, args)), quiet=args.quiet)
    finally:
        faults.close()
    start = done[0]["t"] if done else 0.0
    print(
        f"{args.fault}: "
        + ", ".join(f"{k}={v}" for k, v in done[0].items() if k not in ("t", "event"))
    )
    for change in seen:
        detail = ", ".join(f"{k}={v}" for k, v in change.items() if k not in ("t", "event"))
        print(f"  +{change['t'] - start:7.3f}s  {change['event']:5}  {detail}")
    return 0
