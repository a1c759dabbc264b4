"""`twin diff BASE CANDIDATE [SCENARIO]`: what a change alters in the configs and the static
verdicts it flips; with a scenario, the scenario played on both labs (`--backend`, default
sim) and the dynamic verdicts and figures that moved (`twin.change.review`, docs/review.md)."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from labs import registry as backends
from twin import safeio
from twin.change import review
from twin.cli.options import add_reports
from twin.cli.output import add_json, emit
from twin.cli.verbs.deploy import progress
from twin.cli.verbs.validate import add_selection, selection
from twin.lab import outdir
from twin.lab.diff import differences, lab_configs
from twin.lab.directory import Lab
from twin.outputs import report
from twin.scenario import model as scenarios
from twin.scenario import player
from twin.verdict import verdict
from validators import registry
from validators.result import Result

HELP = (
    "review a change: config differences, static verdicts, and with a scenario the dynamic "
    "verdicts and figures that moved"
)
EPILOG = f"""regression thresholds (--threshold KEY=VALUE; a figure regresses when it grows by more
than KIND_pct percent of the base's value and by more than KIND_min):
  {", ".join(f"{k}={v:g}" for k, v in review.THRESHOLDS.items())}
exit codes: 0 no regression, 1 a regression (a verdict that now fails, a figure past its
threshold), 2 bad input, 3 internal error"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.epilog = EPILOG
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("base", type=Path, help="lab directory before the change")
    p.add_argument("candidate", type=Path, help="lab directory with the change")
    p.add_argument(
        "scenario", type=Path, nargs="?", help="scenario.yaml to play on both (dynamic review)"
    )
    add_selection(p)
    p.add_argument(
        "--backend",
        choices=("sim", "fake", "netns"),
        default="sim",
        help="where the scenario is played (default sim)",
    )
    p.add_argument(
        "--threshold",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a regression threshold, e.g. iteration_mean_pct=5 (repeatable; list below)",
    )
    add_reports(
        p,
        "write diff.md, review.json, junit.xml (one case per regression) and both runs here",
        "write the JUnit XML (one case per regression, nothing else) here",
    )
    p.add_argument("--markdown", type=Path, help="write the Markdown summary here")
    add_json(p)


def play(lab: Lab, scenario: Path, backend: str, out: Path) -> list[Result]:
    """The scenario played on the lab (deployed for it, then destroyed), judged; its run
    directory is `out`."""
    chosen = backends.of(lab, backend)
    loaded = scenarios.load(scenario, lab, frames=not chosen.computed)
    deployed = not chosen.running(lab)
    if deployed:
        chosen.deploy(lab, progress)
    try:
        progress(f"playing {loaded.name} on {lab.name} ({lab.path})")
        player.play(lab, loaded, chosen, progress=progress, out=out)
    finally:
        if deployed:
            chosen.destroy(lab)
    return verdict.report_run(out)[1]


def run(args: argparse.Namespace) -> int:
    """Print the review; exit 1 when the candidate regresses."""
    base, candidate = Lab.open(args.base), Lab.open(args.candidate)
    chosen, given = selection(args)
    limits = review.thresholds(args.threshold)
    for path, option in ((args.junit, "--junit"), (args.markdown, "--markdown")):
        if path:
            outdir.check_file(path, option)
    if args.scenario:
        for lab in (base, candidate):  # both refused before anything plays
            frames = not backends.of(lab, args.backend).computed
            scenarios.load(args.scenario, lab, frames=frames)
    out = outdir.create(args.out) if args.out else None
    static = report.changes(
        registry.run_static(base, chosen, given), registry.run_static(candidate, chosen, given)
    )
    dynamic: list[report.Change] = []
    moved: list[review.Moved] = []
    if args.scenario:
        with tempfile.TemporaryDirectory(prefix="twin-diff-") as scratch:
            runs = out or Path(scratch)
            side = {"base": base, "candidate": candidate}
            results = {
                n: play(lab, args.scenario, args.backend, runs / n) for n, lab in side.items()
            }
            dynamic = report.changes(results["base"], results["candidate"])
            dynamic = [c for c in dynamic if registry.get(c.validator).kind == "dynamic"]
            moved = review.compare(
                review.figures(runs / "base", results["base"]),
                review.figures(runs / "candidate", results["candidate"]),
                limits,
            )
    title = f"twin diff {args.base} {args.candidate}" + (
        f" {args.scenario} ({args.backend})" if args.scenario else ""
    )
    configs = differences(lab_configs(base), lab_configs(candidate), ("in base", "in candidate"))
    done = review.Review(title, configs, static, dynamic, moved, bool(args.scenario))
    text = done.markdown()
    emit(args, done.to_json(), text.rstrip("\n"))
    if out:
        safeio.write(out / "diff.md", text)
        safeio.write(out / "junit.xml", done.junit())
        safeio.write(out / "review.json", json.dumps(done.to_json(), indent=2) + "\n")
    if args.junit:
        safeio.write(args.junit, done.junit())
    if args.markdown:
        safeio.write(args.markdown, text)
    return done.exit_code
