"""`twin report RUN_DIR`: rebuild a run's reports from its saved observations."""

from __future__ import annotations

import argparse
from pathlib import Path

from twin.verdict import report, verdict

HELP = "rebuild the reports (JSON, JUnit, Markdown, plots) of a run from its observations"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument("run_dir", type=Path, help="a run directory (LAB/runs/<time>)")
    p.add_argument(
        "--no-static",
        action="store_true",
        help="judge only the scenario's validators (default: the static validators too)",
    )


def run(args: argparse.Namespace) -> int:
    """Validate the saved observations again and rewrite the reports."""
    code, results = verdict.report_run(args.run_dir, static=not args.no_static)
    print(f"{report.counts(results)}; reports in {args.run_dir}")
    return code
