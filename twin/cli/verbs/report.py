"""`twin report RUN_DIR`: rebuild a run's reports from its saved observations."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from twin.cli.output import add_json, emit
from twin.cli.serve import add_flavour, epoch
from twin.outputs import report
from twin.verdict import verdict

HELP = "rebuild the reports (JSON, JUnit, Markdown, plots) of a run from its observations"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument("run_dir", type=Path, help="a run directory (LAB/runs/<time>)")
    p.add_argument(
        "--no-static",
        action="store_true",
        help="judge only the scenario's validators (default: the static validators too)",
    )
    p.add_argument(
        "--openmetrics",
        metavar="FILE",
        help="also export the run's observations and verdict in the OpenMetrics text format "
        "to FILE ('-': stdout; docs/metrics.md)",
    )
    add_flavour(p)
    p.add_argument(
        "--epoch",
        type=epoch,
        metavar="WHEN",
        help="where a simulator run's time 0 is put in the export: seconds since 1970 or an "
        "ISO 8601 date and time (default: when the run's run.json was written)",
    )
    add_json(p)


def run(args: argparse.Namespace) -> int:
    """Validate the saved observations again and rewrite the reports."""
    code, results = verdict.report_run(args.run_dir, static=not args.no_static)
    summary = f"{report.counts(results)}; reports in {args.run_dir}"
    if args.openmetrics:
        from twin.outputs import metrics
        from twin.scenario.observations import Observations

        obs = Observations.open(args.run_dir)
        snap = metrics.of_run(obs, verdict.lab_of(args.run_dir, obs), args.epoch)
        data = metrics.openmetrics(snap, args.metrics_flavour)
        if args.openmetrics == "-":
            sys.stdout.buffer.write(data)
            print(summary, file=sys.stderr)
            return code
        metrics.write(Path(args.openmetrics), data)
        summary += f"; OpenMetrics in {args.openmetrics}"
    emit(args, json.loads((args.run_dir / "report.json").read_text()), summary)
    return code
