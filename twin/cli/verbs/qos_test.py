"""`twin qos-test LAB [TEST...]`: sonic-mgmt's lossless and QoS tests on the simulator."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from twin.cli.output import add_json, emit
from twin.lab.directory import Lab
from twin.outputs import report
from validators.result import Finding, Result, Status

if TYPE_CHECKING:
    from labs.sim.qostest.case import Outcome

HELP = (
    "run sonic-mgmt's lossless and QoS tests (PFC, buffers, ECN, watchdog) on a lab's "
    "leaf in the simulator"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument("lab", type=Path, help="lab directory")
    p.add_argument("tests", nargs="*", metavar="TEST", help="tests to run (default: all)")
    p.add_argument(
        "--broken",
        action="store_true",
        help="run each test on its broken variant of the lab (each should fail)",
    )
    p.add_argument("--list", action="store_true", help="list the tests and their counterparts")
    p.add_argument("--out", type=Path, help="report directory (default LAB/qos-test)")
    add_json(p)


def result(o: Outcome) -> Result:
    """A test's outcome as a validator result (the test's name as the validator's)."""
    findings = [Finding(o.device, text, o.port) for text in o.failed]
    return Result(o.test, o.scope, Status(o.status), o.reason, dict(o.figures), findings)


def run(args: argparse.Namespace) -> int:
    """Run the chosen tests, print expected against seen, write the reports."""
    from labs.sim.qostest import suite

    tests = suite.select(args.tests)
    if args.list:
        rows = [
            {
                "test": t.name,
                "counterpart": t.counterpart,
                "broken": t.broken,
                "not_observable": t.unobservable,
            }
            for t in tests
        ]
        text = "\n".join(f"{t.name:34} {t.counterpart}" for t in tests)
        emit(args, rows, text)
        return 0
    lab = Lab.open(args.lab)
    outcomes = suite.run(lab, tests, broken=args.broken)
    results = [result(o) for o in outcomes]
    out = args.out or lab.path / ("qos-test-broken" if args.broken else "qos-test")
    title = f"twin qos-test {lab.name}" + (" (broken variants)" if args.broken else "")
    written = report.write(results, out, title, "sim")
    text = f"{suite.expected_vs_seen(outcomes)}\n\n{report.counts(results)}; reports in {out}"
    emit(args, written, text)
    return int(written["exit_code"])
