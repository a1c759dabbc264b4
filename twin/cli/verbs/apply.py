"""`twin apply LAB CHANGE.yaml -o NEW`: a change as a file (the incidents' edit format:
config_db.json, frr.conf and host.json edits by file, table and key, and intent edits) applied
to a copy of a lab, for a change review (`twin diff LAB NEW`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from twin.change import incident
from twin.cli.output import add_json, emit

HELP = "apply a change file (config and intent edits) to a copy of a lab: a new lab"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument("lab", type=Path, help="lab directory to start from (left unchanged)")
    p.add_argument("change", type=Path, help="change.yaml (format: examples/incidents/README.md)")
    p.add_argument(
        "-o", "--out", type=Path, required=True, help="the new lab directory (must not exist)"
    )
    add_json(p)


def run(args: argparse.Namespace) -> int:
    """Write the new lab; exit 0, or 2 when the change does not apply (nothing written)."""
    out = incident.apply_to(args.lab, args.change, args.out)
    text = f"{out}: {args.lab} with {args.change} applied (twin diff {args.lab} {out})"
    emit(args, {"lab": out, "base": args.lab, "change": args.change}, text)
    return 0
