"""`twin diff BASE CANDIDATE`: what a change alters in the configs and the static verdicts it
flips, for a change review."""

from __future__ import annotations

import argparse
from pathlib import Path

from twin.cli.verbs.validate import add_selection, selection
from twin.labdiff import differences, lab_configs
from twin.labdir import Lab
from twin.verdict import report
from validators import registry

HELP = "show the config differences between two labs and each static verdict that changed"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument("base", type=Path, help="lab directory before the change")
    p.add_argument("candidate", type=Path, help="lab directory with the change")
    add_selection(p)
    p.add_argument("--out", type=Path, help="write diff.md and the candidate's reports here")


def config_changes(base: Lab, candidate: Lab) -> str:
    """The config differences from base to candidate as a Markdown list."""
    found = differences(lab_configs(base), lab_configs(candidate), ("in base", "in candidate"))
    if not found:
        return "no config changed"
    many = "s" if len(found) > 1 else ""
    return "\n".join([f"{len(found)} config difference{many}:", *(f"- {f}" for f in found)])


def run(args: argparse.Namespace) -> int:
    """Print the config changes and the changed verdicts; exit 1 when the candidate fails what
    the base did not."""
    base, candidate = Lab.open(args.base), Lab.open(args.candidate)
    chosen, given = selection(args)
    found = report.changes(
        registry.run_static(base, chosen, given),
        after := registry.run_static(candidate, chosen, given),
    )
    text = f"{config_changes(base, candidate)}\n\n{report.change_table(found)}"
    print(text)
    if args.out:
        report.write(after, args.out, f"twin validate {candidate.name}")
        (args.out / "diff.md").write_text(f"# twin diff {args.base} {args.candidate}\n\n{text}\n")
    return 1 if any(c.regression for c in found) else 0
