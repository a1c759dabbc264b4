"""`twin compare RUN PRODUCTION`: a twin's run beside production's, with a verdict."""

from __future__ import annotations

import argparse
from pathlib import Path

from twin.cli.output import add_json, add_table, emit, results_table
from twin.lab import outdir
from twin.outputs import report

HELP = "compare a run with production telemetry (twin import): pauses, ECN marks, drops"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument("run_dir", type=Path, help="a twin's run directory")
    p.add_argument("production", type=Path, help="a production run directory (twin import)")
    p.add_argument(
        "--threshold", type=float, default=0.8, help="overlap each category needs (default 0.8)"
    )
    p.add_argument(
        "--rank",
        type=float,
        default=0.5,
        help="rank correlation of pause frames per port needed (default 0.5)",
    )
    p.add_argument("--out", type=Path, help="report directory (default RUN/compare)")
    add_table(p)
    add_json(p)


def run(args: argparse.Namespace) -> int:
    """Compare, print the table, write JSON, JUnit and Markdown; exit 1 below a threshold."""
    from twin.scenario.observations import Observations
    from twin.telemetry.compare import compare
    from validators.dynamic.production_agreement import production_run

    out = args.out or args.run_dir / "compare"
    outdir.check(out)
    twin_run = Observations.open(args.run_dir)
    results = compare(twin_run, production_run(str(args.production)), args.threshold, args.rank)
    written = report.write(results, out, f"twin compare {args.run_dir.name} {args.production.name}")
    text = f"{results_table(args, results)}\n\n{report.counts(results)}; reports in {out}"
    emit(args, written, text)
    return int(written["exit_code"])
