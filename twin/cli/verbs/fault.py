"""`twin fault DIR VERB ...`: inject a fault into a running twin and log what follows."""

from __future__ import annotations

import argparse
import functools
import json
import time
from pathlib import Path

from labs.backend import Fault
from twin.cli.options import add_backend, running
from twin.intent.inputs import parse_model
from twin.lab.directory import Lab
from twin.scenario import model as scenarios

LIMIT_S = 15.0  # watch at most this long after the fault
DELAY = "ms the link drops frames before its ends see it down (detection plus FIB programming)"
HELP = "inject a fault (link, node, daemon, loss, rate) and log the state changes it causes"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument("lab", type=Path, help="lab directory")
    add_backend(p)
    watch_for = argparse.ArgumentParser(add_help=False)
    watch_for.add_argument(
        "--watch",
        type=float,
        default=1.5,
        metavar="SECONDS",
        help=f"watch the state changes the fault causes until none came for SECONDS "
        f"(default 1.5; at most {LIMIT_S:g} s in all)",
    )
    watch_for.add_argument("--json", action="store_true", help="the fault and changes as JSON")
    verbs = p.add_subparsers(dest="fault", required=True, metavar="FAULT")
    add = functools.partial(verbs.add_parser, parents=[watch_for])
    down = add("link-down", help="take a link down")
    down.add_argument("link", help="NODE:PORT or NODE:PEER")
    down.add_argument("--delay-ms", type=float, default=0.0, help=DELAY)
    for name, what in (
        ("link-up", "bring a link up"),
        ("clear", "remove loss and rate limits from a link"),
    ):
        add(name, help=what).add_argument("link", help="NODE:PORT or NODE:PEER")
    flap = add("link-flap", help="take a link down and up repeatedly")
    flap.add_argument("link")
    flap.add_argument("--period", type=float, default=1.0, help="seconds down, then up")
    flap.add_argument("--count", type=int, default=3)
    flap.add_argument("--delay-ms", type=float, default=0.0, help=DELAY)
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


GIVEN = ("link", "node", "daemon", "percent", "mbit", "period", "count", "delay_ms")
"""The fault's arguments, bounded and typed as a scenario's fault is."""


def _fault(args: argparse.Namespace) -> Fault:
    """The fault the command line asks for, refused in one line beyond a scenario's bounds
    (a period that is not finite, a daemon FRR does not run, a flap that never ends)."""
    given = {k: getattr(args, k) for k in GIVEN if getattr(args, k, None) is not None}
    parse_model(scenarios.Fault, {"at": 0, "fault": args.fault, **given}, f"fault {args.fault}")
    return Fault(
        kind=args.fault,
        link=getattr(args, "link", None),
        node=getattr(args, "node", None),
        daemon=getattr(args, "daemon", None),
        percent=getattr(args, "percent", None),
        mbit=getattr(args, "mbit", None),
        period=getattr(args, "period", 1.0),
        count=getattr(args, "count", 1),
        delay_ms=getattr(args, "delay_ms", 0.0),
    )


def run(args: argparse.Namespace) -> int:
    """Inject, watch until no change came for --watch seconds, print the fault and each
    change seen."""
    lab = Lab.open(args.lab)
    backend = running(args, lab)
    with backend.observer(lab).watch() as seen:
        done = backend.fault(lab, _fault(args))
        start = last = time.monotonic()
        count = 0
        while time.monotonic() - last < args.watch and time.monotonic() - start < LIMIT_S:
            time.sleep(0.1)
            if len(seen) != count:
                count, last = len(seen), time.monotonic()
    if args.json:
        print(json.dumps({"fault": done, "changes": seen}, indent=2, default=str))
        return 0
    print(
        f"{args.fault}: "
        + ", ".join(f"{k}={v}" for k, v in done.items() if k not in ("t", "event"))
    )
    for change in seen:
        detail = ", ".join(f"{k}={v}" for k, v in change.items() if k not in ("t", "event"))
        print(f"  +{change['t'] - done['t']:7.3f}s  {change['event']:5}  {detail}")
    return 0
