"""`twin generate FABRIC -o DIR [--grow-from LAB]`: design a fabric and write its lab
directory (keeping every assignment of LAB, to grow it)."""

from __future__ import annotations

import argparse
from pathlib import Path

from twin.cli.output import add_json, emit
from twin.design.graph import figures
from twin.intent import fabric as intent
from twin.lab import directory as labdir

HELP = "design a fabric and write its lab directory"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument("fabric", type=Path, help="the intent (fabric.yaml)")
    p.add_argument("-o", "--out", type=Path, required=True, help="lab directory to write")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an existing lab directory (never the working directory or one above it, "
        "never a directory holding anything else)",
    )
    p.add_argument(
        "--grow-from",
        type=Path,
        metavar="LAB",
        help="keep every port, address, AS number, cable and session of this lab directory "
        "and place only the new servers, racks, leaves and spines (docs/design.md, "
        '"Growing a lab")',
    )
    add_json(p)


def run(args: argparse.Namespace) -> int:
    """Generate the lab and print its headline figures."""
    fabric = intent.load(args.fabric)
    d = labdir.generate(
        fabric, args.out, str(args.fabric), force=args.force, grow_from=args.grow_from
    )
    figs = figures(d)
    refusal = labdir.clab_refusal(labdir.Lab.open(args.out))
    text = (
        f"{args.out}: {figs['leaves']} leaves, {figs['spines']} spines, "
        f"{figs['servers']} servers, oversubscription {figs['oversubscription_max']}:1, "
        f"ECMP width {figs['ecmp_width']}"
    ) + (f"\n{args.out}: no containerlab form: {refusal}" if refusal else "")
    data = {"lab": str(args.out), "figures": figs, "clab_refusal": refusal}
    emit(args, data, text)
    return 0
