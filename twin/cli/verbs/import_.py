"""`twin import SOURCE... --lab LAB -o DIR`: production telemetry as a run of kind production."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from twin.cli.output import add_json, emit
from twin.lab import check as labcheck
from twin.lab import outdir
from twin.lab.directory import Lab

HELP = "import production telemetry (COUNTERS_DB dumps, techsupport, gNMI, Prometheus) as a run"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument(
        "sources",
        nargs="+",
        metavar="SOURCE",
        help="SWITCH=FILE[,FILE] (sonic-db-dump -n COUNTERS_DB -y files, gnmic or pygnmi "
        "answers, exporter scrapes: first and second), a directory holding "
        "COUNTERS_DB_<n>.json (named after the switch, or sonic_dump_<host>_<time>), a show "
        "techsupport archive, or a Prometheus range query or scrape of several switches "
        "(their `switch` label) (docs/telemetry.md)",
    )
    p.add_argument("--lab", type=Path, required=True, help="the lab of the fabric they came from")
    p.add_argument("-o", "--out", type=Path, required=True, help="the run directory to write")
    add_json(p)


def run(args: argparse.Namespace) -> int:
    """Read every source, check it against the lab, write the run directory."""
    from twin.telemetry import production, sources

    lab = Lab.open(args.lab)
    labcheck.check(lab)
    outdir.check(args.out)
    switches = sources.read(args.sources, lab)
    production.write(lab, switches, args.out, list(args.sources))
    record = json.loads((args.out / "run.json").read_text())
    rows = json.loads((args.out / "pfc.json").read_text())
    window = record["ended"] - record["started"]
    totals = "" if record["differenced"] else " (totals: one snapshot)"
    resets = f", {len(record['resets'])} counter resets" if record["resets"] else ""
    text = (
        f"{len(switches)} switches, {len(rows)} port-priorities with activity over "
        f"{window:.1f} s{totals}{resets}; run in {args.out}"
    )
    emit(args, {"run": str(args.out), **{k: record[k] for k in ("windows", "resets")}}, text)
    return 0
