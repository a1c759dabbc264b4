"""`twin export RUN --format sonic-db -o DIR`: a run's counters in SONiC's own formats."""

from __future__ import annotations

import argparse
from pathlib import Path

from twin.lab import outdir

HELP = "export a run's counters as each switch's COUNTERS_DB dumps (sonic-db-dump -y)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument("run_dir", type=Path, help="a run directory")
    p.add_argument("--format", choices=("sonic-db",), default="sonic-db", help="the format")
    p.add_argument("-o", "--out", type=Path, required=True, help="directory to write")
    p.add_argument(
        "--epoch",
        type=float,
        help="where a simulated run's time 0 is put, in seconds since 1970 (default 1.8e9)",
    )


def run(args: argparse.Namespace) -> int:
    """Write DIR/<switch>/COUNTERS_DB_1.json and _2.json."""
    from twin.scenario.observations import Observations
    from twin.telemetry import export
    from twin.verdict.verdict import lab_of

    outdir.check(args.out)
    lab = lab_of(args.run_dir, Observations.open(args.run_dir))
    epoch = export.EPOCH if args.epoch is None else args.epoch
    written = export.write(args.run_dir, lab, args.out, epoch)
    print(f"{len(written)} switches, 2 COUNTERS_DB snapshots each, in {args.out}")
    return 0
