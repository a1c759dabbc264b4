"""The main job's pass rate: `twin run` (the reference on netns, then its data plane on the
simulator) N times in a row, optionally beside CPU-bound processes.

    flock /tmp/twin-heavy.lock .venv/bin/python bench/bench_repeat.py --runs 20
    flock /tmp/twin-heavy.lock .venv/bin/python bench/bench_repeat.py --runs 10 --load 2

Each run is `twin run` with no arguments in a working directory of the bench's own (a new
one in /tmp unless `--dir`; every run's directory is copied into its `kept/`), so the
reference is generated there (`./twin-reference`, lab name `reference`: run the bench only
under the heavy-job lock). `--load K` starts K processes that spin on the CPU
(`python3 -c 'while True: pass'`) before the first run and ends them, by their pid, after
the last. Every run's exit status, time and the machine's load average (1 minute, at its
end: what else was running) are printed as it ends (a failure's rows in full, from its
report.json), then the pass rate (a pass is exit status 0). Goal (issue 19):
20 of 20 idle, 10 of 10 with two CPU-bound processes. Needs root and FRR; exit status 1
when a run did not pass.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TWIN = Path(sys.executable).with_name("twin")
SPIN = "while True: pass"


def one(cwd: Path, timeout: float) -> tuple[int, float, list[str]]:
    """One main job in `cwd`: its exit status, seconds, and the rows that did not pass."""
    start = time.monotonic()
    try:
        done = subprocess.run(
            [str(TWIN), "run"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return -1, time.monotonic() - start, [f"timed out after {timeout:.0f} s"]
    found = re.search(r"reports in (\S+)/report\.md", done.stdout)
    rows = failed(cwd / found.group(1)) if found else []
    if done.returncode not in (0, 1) or not found:
        rows.append(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "no output")
    return done.returncode, time.monotonic() - start, rows


def failed(run: Path) -> list[str]:
    """The failing results of a run's report, whole (the table cuts reasons short), with its
    first findings; the run directory is copied beside the lab (the next run generates the
    lab directory again)."""
    kept = run.parents[2] / "kept" / run.name
    shutil.copytree(run, kept, dirs_exist_ok=True)
    rows = [f"run directory {kept}"]
    for r in json.loads((run / "report.json").read_text())["results"]:
        if r["status"] == "fail":
            rows.append(f"{r['validator']} {r['scope']}: {r['reason']}")
            rows += [f"  {f['device']} {f['port']} {f['message']}" for f in r["findings"][:3]]
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run the main job `--runs` times and print its pass rate."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="main jobs to run (default 5)")
    parser.add_argument("--load", type=int, default=0, help="CPU-bound processes beside them")
    parser.add_argument("--dir", type=Path, help="working directory (default: a new one in /tmp)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per run (600)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.load < 0:
        parser.error("--runs must be at least 1 and --load at least 0")
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(args.load)]
    passed = 0
    try:
        cwd = args.dir or Path(tempfile.mkdtemp(prefix="bench-repeat-"))
        cwd.mkdir(parents=True, exist_ok=True)
        print(f"working directory {cwd} (runs kept in kept/)", flush=True)
        for i in range(1, args.runs + 1):
            code, seconds, rows = one(cwd, args.timeout)
            passed += code == 0
            verdict = "pass" if code == 0 else f"FAIL (exit {code})"
            busy = os.getloadavg()[0]
            print(
                f"run {i:2}/{args.runs}: {verdict} in {seconds:.0f} s, load {busy:.1f}", flush=True
            )
            for row in rows[1:] if code == 0 else rows:
                print(f"    {row}", flush=True)
    finally:
        for proc in spinners:
            proc.kill()
            proc.wait()
    load = f" beside {args.load} CPU-bound processes" if args.load else " (no added load)"
    print(f"main job: {passed} of {args.runs} passed{load}")
    return 0 if passed == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
