"""`--json` of the verbs that print data: the same facts as their text, for scripts."""

from __future__ import annotations

import argparse
import json
from typing import Any


def add_json(p: argparse.ArgumentParser) -> None:
    """`--json`."""
    p.add_argument("--json", action="store_true", help="print the result as JSON, not text")


def emit(args: argparse.Namespace, data: Any, text: str) -> None:
    """Print `data` as JSON when --json was given, else `text`."""
    print(json.dumps(data, indent=2, default=str) if args.json else text)
