"""The input fuzz test (tests/unit/test_fuzz_inputs.py) at bench size: 500 examples per strategy.

    .venv/bin/python bench/bench_fuzz.py                  # every strategy, 500 examples each
    .venv/bin/python bench/bench_fuzz.py -k edited_twin   # one of them
    .venv/bin/python bench/bench_fuzz.py --examples 100

Prints the examples per strategy, the time taken, the tests that failed and the tracebacks
count (goal 0: every input is read, or refused in one line). Exit status 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    """Run the fuzz tests and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=500)
    parser.add_argument("-k", default="", help="only the strategies matching (pytest -k)")
    args = parser.parse_args()
    argv = [sys.executable, "-m", "pytest", "tests/unit/test_fuzz_inputs.py", "-p", "no:warnings"]
    argv += ["-k", args.k] if args.k else []
    env = {**os.environ, "TWIN_FUZZ_EXAMPLES": str(args.examples)}
    start = time.monotonic()
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    took = time.monotonic() - start
    out = done.stdout + done.stderr
    failed = [line for line in out.splitlines() if line.startswith("FAILED ")]
    tracebacks = out.count("Traceback") + sum(1 for line in failed if "Error" in line)
    print(f"examples per strategy: {args.examples}")
    print(f"time: {took:.0f} s")
    print(out.strip().splitlines()[-1] if out.strip() else "no output")
    for line in failed:
        print(line)
    print(f"tracebacks: {tracebacks}")
    return 0 if done.returncode == 0 and tracebacks == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
