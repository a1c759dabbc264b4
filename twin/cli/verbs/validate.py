"""`twin validate DIR`: run the static validators on a lab's configs and write the reports."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import yaml

from twin.cli.output import add_json, add_table, emit, results_table
from twin.errors import InputError
from twin.lab import check as labcheck
from twin.lab.directory import Lab
from twin.outputs import report
from validators import registry
from validators.registry import Validator

HELP = "run the static validators on a lab's configs; write JSON, JUnit and Markdown reports"


def add_selection(p: argparse.ArgumentParser) -> None:
    """Which validators run, with which thresholds (shared with `twin diff`)."""
    p.add_argument("--only", nargs="+", metavar="NAME", help="run only these validators")
    p.add_argument(
        "--failures",
        type=int,
        choices=(0, 1, 2),
        help="links failed at once in the deadlock and fib_reachability checks: 0 none, "
        "1 each (default), 2 each pair",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME.KEY=VALUE",
        help="a validator threshold, e.g. ecn_thresholds.rtt_us=8 (repeatable)",
    )


def selection(args: argparse.Namespace) -> tuple[list[Validator], dict[str, dict[str, Any]]]:
    """The chosen validators and the thresholds given for them."""
    chosen = registry.select("static", args.only)
    given: dict[str, dict[str, Any]] = {}
    for text in args.set:
        key, eq, value = text.partition("=")
        name, dot, threshold = key.partition(".")
        if not (eq and dot and threshold):
            raise InputError("--set", text, "write NAME.KEY=VALUE")
        registry.select("static", [name])
        given.setdefault(name, {})[threshold] = yaml.safe_load(value)
    if args.failures is not None:
        for name in ("deadlock", "fib_reachability"):
            given.setdefault(name, {})["failures"] = args.failures
    return chosen, given


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument("lab", type=Path, help="lab directory")
    add_selection(p)
    p.add_argument("--out", type=Path, help="report directory (default DIR/validate)")
    add_table(p)
    add_json(p)


def run(args: argparse.Namespace) -> int:
    """Validate, print the summary, write the reports; exit 1 when a validator failed."""
    lab = Lab.open(args.lab)
    labcheck.check(lab)
    chosen, given = selection(args)
    results = registry.run_static(lab, chosen, given)
    out = args.out or lab.path / "validate"
    written = report.write(results, out, f"twin validate {lab.name}")
    text = f"{results_table(args, results)}\n\n{report.counts(results)}; reports in {out}"
    emit(args, written, text)
    return int(written["exit_code"])
