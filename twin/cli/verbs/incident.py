"""`twin incident NAME OUT`: an incident of examples/incidents as two labs, OUT/before (the
change that caused it) and OUT/after (with its fix), to run and compare.

`twin incident --from PRODUCTION SCENARIO OUT`: a reproduction from production telemetry (a
run directory `twin import` wrote): OUT/start.json and start.md (the lab, the ports and
priorities that paused, marked ECN or dropped, the traffic classes seen), OUT/reproduce.yaml
(SCENARIO with `production_agreement` against PRODUCTION in its verdict) played on the lab
into OUT/run, as `twin run --no-static` does (check the lab with `twin validate`); its exit
status is the run's."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from twin import safeio
from twin.change import incident
from twin.cli.output import add_json, emit
from twin.lab import outdir

REPRODUCE = "reproduce.yaml"
"""The scenario with production_agreement added, in OUT."""
HELP = "write an incident's labs before and after its fix, or reproduce one from production"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument(
        "name",
        help="an incident of examples/incidents (pause-storm) or its directory; with --from, "
        "the scenario to play",
    )
    p.add_argument("out", type=Path, help="directory to write into (new)")
    p.add_argument(
        "--from",
        dest="production",
        type=Path,
        help="a production run directory (twin import): reproduce it with the scenario NAME",
    )
    p.add_argument(
        "--backend", default="sim", help="with --from: the backend to play on (default sim)"
    )
    p.add_argument("--threshold", type=float, default=0.8, help="with --from: overlap needed")
    p.add_argument("--rank", type=float, default=0.5, help="with --from: rank correlation needed")
    add_json(p)  # the labs' form only


def run(args: argparse.Namespace) -> int:
    """Write both labs and say how to run them, or reproduce production's incident."""
    if args.production is not None:
        return _reproduce(args)
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


def _reproduce(args: argparse.Namespace) -> int:
    from twin.cli.main import main
    from twin.telemetry import reproduce
    from validators.dynamic.production_agreement import production_run

    production = production_run(str(args.production))
    point = reproduce.start(production)
    scenario = reproduce.scenario(Path(args.name), args.production, args.threshold, args.rank)
    outdir.check(args.out)
    args.out.mkdir(parents=True)
    safeio.write(args.out / "start.json", json.dumps(point, indent=2).encode())
    safeio.write(args.out / "start.md", reproduce.markdown(point).encode())
    safeio.write(args.out / REPRODUCE, scenario.encode())
    print(reproduce.markdown(point))
    played = args.out / "run"
    command = ["run", point["lab"], str(args.out / REPRODUCE), "--out", str(played)]
    code = main([*command, "--backend", args.backend, "--no-static"])
    report = played / "report.json"
    if report.is_file():
        results = json.loads(report.read_text())["results"]
        (agreement,) = (r for r in results if r["scope"] == "agreement")
        print(f"\nproduction_agreement: {agreement['status']}, {agreement['reason']}")
    return code
