"""`twin incident NAME OUT`: an incident of examples/incidents as two labs, OUT/before (the
change that caused it) and OUT/after (with its fix), to run and compare."""

from __future__ import annotations

import argparse
from pathlib import Path

from twin import incident
from twin.cli.output import add_json, emit

HELP = "write an incident's labs before and after its fix (pause-storm, micro-bursts, ...)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument("name", help="an incident of examples/incidents (pause-storm) or its directory")
    p.add_argument("out", type=Path, help="directory to write before/ and after/ into (new)")
    add_json(p)


def run(args: argparse.Namespace) -> int:
    """Write both labs and say how to run them."""
    where = incident.find(args.name)
    before, after = incident.build(where, args.out)
    scenario = where / "scenario.yaml"
    text = (
        f"{before}\n{after}\n"
        f"\ntwin run {before} {scenario} --backend sim   # the incident\n"
        f"twin run {after} {scenario} --backend sim    # with the fix\n"
        f"twin diff {before} {after} {scenario} --backend sim"
    )
    emit(args, {"before": before, "after": after, "scenario": scenario}, text)
    return 0
