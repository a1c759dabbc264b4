"""`twin drill LAB [SCENARIO] --faults SET`: the scenario played once per fault of a fault set,
and the faults ranked worst first (twin.drill.cases, docs/drills.md)."""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from labs import lifecycle, registry
from labs.backend import Progress
from twin import safeio
from twin.cli import output
from twin.cli.options import add_reports
from twin.cli.verbs.deploy import progress
from twin.drill import cases as drill
from twin.drill import run as drillrun
from twin.drill.report import Drill, summary
from twin.errors import InputError
from twin.intent.inputs import strict_yaml
from twin.lab import outdir
from twin.lab.directory import Lab
from twin.scenario import model as scenarios

if TYPE_CHECKING:
    from distributed.security import Security

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
        "random:K[xN] (N different draws of K links at once), or FILE.yaml",
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
        "after the other; each fault given back with the scenario's recovery",
    )
    p.add_argument(
        "--workers", type=int, default=2, help="sim: worker processes of the drill's own cluster"
    )
    p.add_argument(
        "--scheduler",
        metavar="tls://HOST:PORT",
        help="sim: a Dask scheduler to use instead, over TLS only (with --tls-ca, --tls-cert, "
        "--tls-key: docs/drills.md)",
    )
    p.add_argument("--tls-ca", type=Path, metavar="PEM", help="--scheduler: the cluster's CA")
    p.add_argument("--tls-cert", type=Path, metavar="PEM", help="--scheduler: our certificate")
    p.add_argument("--tls-key", type=Path, metavar="PEM", help="--scheduler: its key (0600)")
    p.add_argument(
        "--runs",
        action="store_true",
        help=f"sim: also write each case's run directory to OUT/{RUNS}/CASE (cases are "
        "judged in memory; `twin report` takes these)",
    )
    p.add_argument(
        "--trust-lab-dir",
        action="store_true",
        help="as root, drill a lab directory another user owns or can write",
    )
    add_reports(p, "report directory (default LAB/drills/TIME-SET)", "also write the JUnit here")
    output.add_json(p)


def run(args: argparse.Namespace) -> int:
    """Play every case, write the reports, print the worst; exit 1 when a fault makes things
    worse than the baseline, or the baseline fails."""
    lab = Lab.open(args.lab)
    lifecycle.check_lab_dir(lab.path, args.trust_lab_dir)
    data = strict_yaml(args.scenario)
    scenarios.load(args.scenario, lab)  # refused in one line before anything runs
    cases = drill.fault_sets(lab, args.faults, args.seed)
    at = drill.default_at(data) if args.at is None else args.at
    if not 0 <= at <= scenarios.MAX_TIME:
        raise InputError("--at", str(at), f"must be from 0 to {scenarios.MAX_TIME:g} s")
    when = drill.timing(data, at, live=args.backend != "sim")
    if not 1 <= args.workers <= 64:
        raise InputError("--workers", str(args.workers), "must be from 1 to 64")
    scheduler = None
    if args.scheduler:
        security = _security(args)
        scheduler = (args.scheduler, security)
    name = args.faults.replace("/", "_").replace(":", "-")
    out = args.out or lab.path / "drills" / f"{datetime.now():%Y%m%d-%H%M%S}-{Path(name).stem}"
    outdir.check(out)
    if args.junit:
        outdir.check_file(args.junit, "--junit")
    safeio.mkdir(out)  # never through a link where another user can plant one
    back = "" if when.back is None else f", given back at t={when.back:g} s"
    progress(f"{len(cases)} faults on {lab.name}, each at t={at:g} s{back} ({args.backend})")
    start = time.monotonic()
    if args.backend == "sim":
        where = args.scheduler or f"a private LocalCluster of {args.workers} worker processes"
        progress(f"on Dask over TLS: {where}; each case kept in {out / CASES} as it ends")
        runs = out / RUNS if args.runs else None
        outcomes = drillrun.on_dask(
            lab,
            data,
            cases,
            when,
            args.workers,
            scheduler,
            _every(len(cases) + 1),
            out / CASES,
            runs,
        )
    else:
        backend = registry.of(lab, args.backend)
        outcomes = drillrun.serial(lab, data, cases, when, backend, progress)
    seconds = time.monotonic() - start
    title = f"twin drill {lab.name} --faults {args.faults} ({args.backend})"
    done = Drill(title, outcomes[0], outcomes[1:])
    done.write(out)
    if args.junit:
        safeio.write(args.junit, done.junit())
    output.emit(args, done.to_json(), summary(done))
    rate = len(cases) / seconds * 60
    print(
        f"\n{len(cases)} faults in {seconds:.0f} s ({rate:.1f} faults/minute); reports in {out}",
        file=sys.stderr if args.json else sys.stdout,
    )
    return done.exit_code


CASES = "cases.jsonl"
"""In the report directory: each simulator case's outcome, appended as it ends."""
RUNS = "runs"
"""In the report directory, with `--runs`: each simulator case's run directory (`runs/CASE`,
the baseline 0000)."""


def _security(args: argparse.Namespace) -> Security:
    """The TLS of `--scheduler` (one line when it is not TLS or lacks its credentials)."""
    from twin.drill import cluster as drillcluster

    return drillcluster.external(args.scheduler, args.tls_ca, args.tls_cert, args.tls_key)


def _every(total: int) -> Progress:
    """Progress shown every tenth of the way (and at the end)."""
    step = max(1, total // 10)

    def show(message: str) -> None:
        done = int(message.split("/")[0])
        if done % step == 0 or done == total:
            progress(message)
        sys.stderr.flush()

    return show
