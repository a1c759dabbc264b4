"""How the verbs print: `--json` (the same facts as their text, for scripts), and one table
style for results (aligned text, its reasons wrapped to a terminal's width; `--wide` one line
per result; `--markdown` a Markdown table, to paste into a review)."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from validators.result import Result

HEADER = ["validator", "scope", "status", "reason"]


def add_json(p: argparse.ArgumentParser) -> None:
    """`--json`."""
    p.add_argument("--json", action="store_true", help="print the result as JSON, not text")


def emit(args: argparse.Namespace, data: Any, text: str) -> None:
    """Print `data` as JSON when --json was given, else `text`."""
    print(json.dumps(data, indent=2, default=str) if args.json else text)


def add_table(p: argparse.ArgumentParser) -> None:
    """`--wide` and `--markdown`: how a results table is printed."""
    style = p.add_mutually_exclusive_group()
    style.add_argument(
        "--wide",
        action="store_true",
        help="one line per result (the default when the output is not a terminal; on one, "
        "reasons wrap to its width)",
    )
    style.add_argument(
        "--markdown", action="store_true", help="the results as a Markdown table (for a review)"
    )


def results_table(args: argparse.Namespace, results: Sequence[Result]) -> str:
    """Results as the verbs print them: aligned text, or Markdown with `--markdown`."""
    from twin.cli.text import wrapped_table
    from twin.outputs import report

    if args.markdown:
        return report.table(results)
    rows = [[r.validator, r.scope, r.status.value, r.reason] for r in results]
    wrap = sys.stdout.isatty() and not args.wide
    width = shutil.get_terminal_size().columns if wrap else None
    return "\n".join(line.rstrip() for line in wrapped_table(rows, HEADER, width))
