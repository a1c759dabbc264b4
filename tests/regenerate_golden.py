"""Regenerate the golden files the tests compare against, then review `git diff tests/`.

    .venv/bin/python tests/regenerate_golden.py

* `tests/golden/<example>/` is the lab directory `twin generate examples/<example>.yaml`
  writes (today only `small`), compared file by file by `tests/unit/test_generate.py`;
* `tests/errors/NAME.log` is the exact line `twin generate tests/errors/NAME.yaml` prints on
  stderr, compared by `tests/unit/test_cli.py`.

Both are produced by the code under test, so a diff here is a change in behaviour: read it
before committing it.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GOLDEN = REPO / "tests" / "golden"
ERRORS = REPO / "tests" / "errors"
GOLDEN_EXAMPLES = ("small",)


def regenerate_labs() -> list[Path]:
    """Write `tests/golden/<example>/` for every golden example."""
    from twin.intent import fabric as intent
    from twin.lab import directory as labdir

    written = []
    for example in GOLDEN_EXAMPLES:
        source = Path("examples") / f"{example}.yaml"
        out = GOLDEN / example
        labdir.generate(intent.load(source), out, str(source), force=True)
        written.append(out)
    return written


def error_line(case: Path, out: Path) -> tuple[int, str]:
    """Exit code and stderr of `twin generate` on a bad intent (run from the repo root)."""
    from twin.cli import main as cli

    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        code = cli.main(["generate", str(case.relative_to(REPO)), "-o", str(out)])
    return code, stderr.getvalue()


def regenerate_errors() -> list[Path]:
    """Write `tests/errors/NAME.log` for every `tests/errors/NAME.yaml`."""
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in sorted(ERRORS.glob("*.yaml")):
            out = Path(tmp) / case.stem
            code, line = error_line(case, out)
            if code != 2 or line.count("\n") != 1 or out.exists():
                raise SystemExit(f"{case}: expected one error line and exit 2, got {code}: {line}")
            log = case.with_suffix(".log")
            log.write_text(line)
            written.append(log)
            shutil.rmtree(out, ignore_errors=True)
    return written


def main() -> int:
    """Regenerate everything and say what was written."""
    os.chdir(REPO)
    sys.path.insert(0, str(REPO))
    for path in regenerate_labs() + regenerate_errors():
        print(path.relative_to(REPO))
    print("review with: git diff --stat tests/ && git status tests/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
