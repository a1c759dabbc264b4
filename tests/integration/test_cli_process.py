"""The console script in a new process: its exit code and error line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.unit.test_cli import ERRORS, REPO


def test_error_exit_code_and_line_from_the_console_script(tmp_path: Path) -> None:
    case = ERRORS / "duplicate_key.yaml"
    out = tmp_path / "lab"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "twin.cli.main",
            "generate",
            str(case.relative_to(REPO)),
            "-o",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 2
    assert run.stderr == case.with_suffix(".log").read_text()
    assert "Traceback" not in run.stderr
    assert list(tmp_path.iterdir()) == []
