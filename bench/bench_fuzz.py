"""The input fuzz test (tests/unit/test_fuzz_inputs.py) at bench size: 500 examples per strategy.

    .venv/bin/python bench/bench_fuzz.py                  # every strategy, 500 examples each
    .venv/bin/python bench/bench_fuzz.py -k edited_twin   # one of them
    .venv/bin/python bench/bench_fuzz.py --examples 100

Prints the examples per strategy, the time taken, the exit codes of the commands the
examples ran (0 and 1 read and judged, 2 refused in one line; goal: no 3), the tests that
failed and the tracebacks count (goal 0: every input is read, or refused in one line). Exit
status 1 otherwise. `--oversized` times `twin validate` of a lab whose frr.conf is 300 MB
(refused by its size) instead.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    """Run the fuzz tests and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=500)
    parser.add_argument("-k", default="", help="only the strategies matching (pytest -k)")
    parser.add_argument("--oversized", action="store_true", help="time a 300 MB frr.conf")
    args = parser.parse_args()
    if args.oversized:
        return oversized()
    argv = [sys.executable, "-m", "pytest", "tests/unit/test_fuzz_inputs.py", "-p", "no:warnings"]
    argv += ["-k", args.k] if args.k else []
    codes = Path(tempfile.mkdtemp()) / "codes"
    env = {
        **os.environ,
        "TWIN_FUZZ_EXAMPLES": str(args.examples),
        "TWIN_FUZZ_CODES": str(codes),
    }
    start = time.monotonic()
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    took = time.monotonic() - start
    ran = collections.Counter(codes.read_text().split() if codes.exists() else [])
    print(f"commands run: {sum(ran.values())}; exit codes: {dict(sorted(ran.items()))}")
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


def oversized() -> int:
    """`twin validate` of examples/small.yaml's lab with leaf1's frr.conf grown to 300 MB:
    the time and peak memory (the validate process's) it takes to be refused."""
    with tempfile.TemporaryDirectory() as tmp:
        lab = Path(tmp) / "lab"
        twin = [sys.executable, "-m", "twin.cli.main"]
        subprocess.run(
            [*twin, "generate", "examples/small.yaml", "-o", str(lab)],
            cwd=REPO,
            check=True,
            capture_output=True,
        )
        with (lab / "configs" / "leaf1" / "frr.conf").open("a") as conf:
            line = "! " + "x" * 97 + "\n"
            for _ in range(3_000_000 // 1000):
                conf.write(line * 1000)
        argv = ["/usr/bin/time", "-f", "%e s %M KB", *twin, "validate", str(lab)]
        start = time.monotonic()
        done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
        took = time.monotonic() - start
    err = done.stderr.strip().splitlines()
    print(f"frr.conf of 300 MB: exit {done.returncode} in {took:.2f} s ({err[-1]})")
    print(err[0] if len(err) > 1 else "")
    return 0 if done.returncode == 2 else 1


if __name__ == "__main__":
    sys.exit(main())
