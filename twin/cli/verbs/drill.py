"""`twin drill LAB [SCENARIO] --faults SET`: the scenario played once per fault of a fault set,
and the faults ranked worst first (twin.drill, docs/drills.md)."""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from datetime import datetime
from pathlib import Path

from labs import registry
from labs.backend import Progress
from twin import drill, drillrun, outdir
from twin.cli.options import add_reports
from twin.cli.verbs.deploy import progress
from twin.drillreport import Drill, summary
from twin.errors import InputError
from twin.intent.inputs import strict_yaml
from twin.labdir import Lab
from twin.scenario import model as scenarios

HELP = "failure drill: a scenario played once per fault (every link, switch, ...), ranked"
DEFAULT_SCENARIO = Path(__file__).resolve().parents[2] / "defaults" / "drill-scenario.yaml"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument("lab", type=Path, help="lab directory")
    p.add_argument(
        "scenario",
        type=Path,
        nargs="?",
        default=DEFAULT_SCENARIO,
        help="scenario.yaml whose faults the drill replaces (default: a ring All-Reduce "
        "across every server, for the simulator)",
    )
    p.add_argument(
        "--faults",
        required=True,
        metavar="SET",
        help="links, links:KIND (fabric, server, peerlink), server-links, switches, "
        "random:K[xN] (N draws of K links at once), or FILE.yaml",
    )
    p.add_argument("--seed", type=int, default=0, help="random:K draws (default 0)")
    p.add_argument(
        "--at", type=float, help="when each fault fires, s (default: a quarter into the traffic)"
    )
    p.add_argument(
        "--backend",
        choices=("sim", "fake", "netns"),
        default="sim",
        help="sim (default): cases in parallel on Dask; fake, netns: one twin, one case "
        "after the other, restored after each",
    )
    p.add_argument(
        "--workers", type=int, default=2, help="sim: worker processes of the LocalCluster"
    )
    p.add_argument("--scheduler", help="sim: tcp://HOST:PORT of a Dask scheduler to use instead")
    add_reports(p, "report directory (default LAB/drills/TIME-SET)", "also write the JUnit here")


def run(args: argparse.Namespace) -> int:
    """Play every case, write the reports, print the worst; exit 1 when a fault fails a
    validator."""
    lab = Lab.open(args.lab)
    data = strict_yaml(args.scenario)
    scenarios.load(args.scenario, lab)  # refused in one line before anything runs
    cases = drill.fault_sets(lab, args.faults, args.seed)
    at = drill.default_at(data) if args.at is None else args.at
    if not 0 <= at <= scenarios.MAX_TIME:
        raise InputError("--at", str(at), f"must be from 0 to {scenarios.MAX_TIME:g} s")
    if not 1 <= args.workers <= 64:
        raise InputError("--workers", str(args.workers), "must be from 1 to 64")
    name = args.faults.replace("/", "_").replace(":", "-")
    out = args.out or lab.path / "drills" / f"{datetime.now():%Y%m%d-%H%M%S}-{Path(name).stem}"
    outdir.check(out)
    if args.junit:
        outdir.check_file(args.junit, "--junit")
    progress(f"{len(cases)} faults on {lab.name}, each at t={at:g} s ({args.backend})")
    start = time.monotonic()
    if args.backend == "sim":
        where = args.scheduler or f"a LocalCluster of {args.workers} worker processes"
        progress(f"on Dask: {where}")
        outcomes = drillrun.on_dask(
            lab, data, cases, at, args.workers, args.scheduler, _every(len(cases) + 1)
        )
    else:
        outcomes = drillrun.serial(lab, data, cases, at, registry.of(lab, args.backend), progress)
    seconds = time.monotonic() - start
    title = f"twin drill {lab.name} --faults {args.faults} ({args.backend})"
    done = Drill(title, outcomes[0], outcomes[1:])
    outdir.create(out)
    done.write(out)
    if args.junit:
        shutil.copyfile(out / "junit.xml", args.junit)
    print(summary(done))
    rate = len(cases) / seconds * 60
    print(f"\n{len(cases)} faults in {seconds:.0f} s ({rate:.1f} faults/minute); reports in {out}")
    return done.exit_code


def _every(total: int) -> Progress:
    """Progress shown every tenth of the way (and at the end)."""
    step = max(1, total // 10)

    def show(message: str) -> None:
        done = int(message.split("/")[0])
        if done % step == 0 or done == total:
            progress(message)
        sys.stderr.flush()

    return show
