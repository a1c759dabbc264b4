"""`twin report` in a new process exits 1 on a failing run."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.unit import test_verdict
from tests.unit.test_verdict import (
    TWIN,
    failing_run,
)
from twin.lab.directory import Lab

lab = test_verdict.lab
"""The lab of tests/unit/test_verdict.py (its fixture)."""


def test_report_from_a_new_process_exits_1_on_a_failure(lab: Lab) -> None:
    run_dir = failing_run(lab, "subprocess").write().path
    argv = [str(TWIN)] if TWIN.exists() else [sys.executable, "-m", "twin.cli.main"]
    done = subprocess.run(
        [*argv, "report", str(run_dir)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 1, done.stderr
    assert json.loads((run_dir / "report.json").read_text())["exit_code"] == 1
