"""The main job's pass rate and where its time goes: `twin run` (the reference on netns, then
its data plane on the simulator) N times in a row, optionally beside CPU-bound processes.

    flock /tmp/twin-heavy.lock .venv/bin/python bench/bench_repeat.py --runs 20
    flock /tmp/twin-heavy.lock .venv/bin/python bench/bench_repeat.py --runs 10 --load 2

Each run is `twin run` with no arguments in a working directory of the bench's own (a new
one in /tmp unless `--dir`; every run's directory is copied into its `kept/`), so the
reference is generated there (`./twin-reference`, lab name `reference`: run the bench only
under the heavy-job lock). `--load K` starts K processes that spin on the CPU
(`python3 -c 'while True: pass'`) before the first run and ends them, by their pid, after
the last. Every run's exit status, time and the machine's load average (1 minute, at its
end: what else was running) are printed as it ends (a failure's rows in full, from its
report.json), with its phases read from its own log (`twin -v --log-file`): deploy,
before (receivers and probes started), preparation (the traffic phases' senders), the
timeline, after (receivers stopped, failover probes collected), probes and destroy, the
simulator, the verdict (validators, reports, plots); then the pass rate (a pass is exit status
0) and each phase's minimum, median and maximum. Goals: 20 of 20 idle, 10 of 10 with two
CPU-bound processes (issue 19); at most 35 s idle and 45 s beside two CPU-bound processes
(issue 37). With `--write`, the last run that passed is what the README quotes: its
progress lines and its table become the README's `main-job` block (bench/blocks.py: also
recorded in bench/recorded/main-job.txt), and the pass rate, the largest resident memory of a
process it waited for (the twin) and the phases become the block `main-job-phases`
(`main-job-phases-load-K` with `--load K`). Needs root and FRR; exit status 1 when a run did
not pass.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import blocks

TWIN = Path(sys.executable).with_name("twin")
SPIN = "while True: pass"
MARKS = {
    "start": r"twin\.cli\.logs: twin ",
    "deployed": r"converged in [\d.]+ s|not converged",
    "playing": r": playing \S+ \((\d+(?:\.\d+)?) s\)",
    "preparing": r": preparing \d+ traffic phases",
    "t0": r": t=\s*0\.0s",
    "probing": r": probing every server pair",
    "destroyed": r": \S+: destroyed",
    "simulating": r": simulating \d+ flows",
    "simulated": r": simulated [\d.]+ ms",
    "exit": r"twin run: exit \d+ in",
}
"""The log lines that open and close the phases, by their first occurrence."""
SPANS = [
    ("deploy", "start", "deployed"),
    ("before", "playing", "preparing"),
    ("preparation", "preparing", "t0"),
    ("timeline", "t0", "probing"),  # the scenario's duration
    ("after", "t0", "probing"),  # beyond it, until the probes
    ("probes and destroy", "probing", "destroyed"),
    ("simulator", "simulating", "simulated"),
    ("verdict", "simulated", "exit"),
]
"""Each phase, with the marks that open and close it."""


def phases(log: str) -> dict[str, float]:
    """Seconds per phase of one main job, from its `--log-file` (a phase whose marks are
    missing is left out).

    >>> log = "\\n".join(f"2026-12-05T01:57:{s:06.3f} INFO x{m}" for s, m in [
    ...     (5.0, ": twin -v run"), (17.5, ": me37: 62 nodes, converged in 9.99 s (netns)"),
    ...     (17.5, ": playing default (24 s)"), (28.0, ": preparing 4 traffic phases"),
    ...     (32.5, ": t=  0.0s  ecmp-probe"), (59.0, ": probing every server pair"),
    ...     (59.5, ": me37: destroyed")])
    >>> phases(log.replace("INFO x:", "INFO twin.cli.logs:", 1))
    {'deploy': 12.5, 'before': 10.5, 'preparation': 4.5, 'timeline': 24.0, 'after': 2.5, \
'probes and destroy': 0.5}
    """
    at: dict[str, float] = {}
    duration = 0.0
    for line in log.splitlines():
        for mark, pattern in MARKS.items():
            found = re.search(pattern, line)
            if mark not in at and found:
                at[mark] = datetime.fromisoformat(line.split()[0]).timestamp()
                if mark == "playing":
                    duration = float(found.group(1))
    out: dict[str, float] = {}
    for name, opens, closes in SPANS:
        if name in ("timeline", "after") and "t0" in at and "probing" in at:
            out[name] = duration if name == "timeline" else at["probing"] - at["t0"] - duration
        elif opens in at and closes in at:
            out[name] = at[closes] - at[opens]
    return {name: round(seconds, 2) for name, seconds in out.items()}


def quoted(done: subprocess.CompletedProcess[str]) -> str:
    """What the README quotes of a main job: its progress lines, then what it printed (the
    table and the counts), fenced."""
    progress = [line for line in done.stderr.splitlines() if line.startswith("  .. ")]
    return "\n".join(["```", *progress, done.stdout.rstrip("\n"), "```"])


def one(cwd: Path, timeout: float, log: Path) -> tuple[int, float, list[str], str]:
    """One main job in `cwd`, logging to `log`: its exit status, seconds, the rows that did
    not pass, and what the README quotes of it (`quoted`)."""
    start = time.monotonic()
    try:
        done = subprocess.run(
            [str(TWIN), "-v", "--log-file", str(log), "run"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return -1, time.monotonic() - start, [f"timed out after {timeout:.0f} s"], ""
    found = re.search(r"reports in (\S+)/report\.md", done.stdout)
    rows = failed(cwd / found.group(1)) if found else []
    if done.returncode not in (0, 1) or not found:
        rows.append(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "no output")
    return done.returncode, time.monotonic() - start, rows, quoted(done)


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
    parser.add_argument(
        "--write", action="store_true", help="the last run that passed into the README's block"
    )
    args = parser.parse_args(argv)
    if args.runs < 1 or args.load < 0:
        parser.error("--runs must be at least 1 and --load at least 0")
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(args.load)]
    passed = 0
    seen: dict[str, list[float]] = {}
    shown = ""
    try:
        cwd = args.dir or Path(tempfile.mkdtemp(prefix="bench-repeat-"))
        cwd.mkdir(parents=True, exist_ok=True)
        print(f"working directory {cwd} (runs kept in kept/)", flush=True)
        for i in range(1, args.runs + 1):
            log = cwd / f"run-{i}.log"
            code, seconds, rows, output = one(cwd, args.timeout, log)
            shown = output if code == 0 else shown
            split = phases(log.read_text()) if log.exists() else {}
            for name, value in [("total", seconds), *split.items()]:
                seen.setdefault(name, []).append(value)
            passed += code == 0
            verdict = "pass" if code == 0 else f"FAIL (exit {code})"
            busy = os.getloadavg()[0]
            print(
                f"run {i:2}/{args.runs}: {verdict} in {seconds:.0f} s, load {busy:.1f}", flush=True
            )
            print("    " + ", ".join(f"{n} {v:.1f}" for n, v in split.items()), flush=True)
            for row in rows[1:] if code == 0 else rows:
                print(f"    {row}", flush=True)
    finally:
        for proc in spinners:
            proc.kill()
            proc.wait()
    load = f" beside {args.load} CPU-bound processes" if args.load else " (no added load)"
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    summary = [
        f"main job: {passed} of {args.runs} passed{load}, the twin at most {peak:.0f} MB resident",
        f"{'phase (s)':20} {'min':>6} {'median':>6} {'max':>6}",
    ]
    for name, values in seen.items():
        low, mid, high = min(values), statistics.median(values), max(values)
        summary.append(f"{name:20} {low:6.1f} {mid:6.1f} {high:6.1f}")
    print("\n".join(summary))
    if args.write and shown:
        name = f"main-job-phases-load-{args.load}" if args.load else "main-job-phases"
        said = f"{blocks.command()} ({blocks.load()} at the end):\n\n```\n"
        for block, text in (("main-job", shown), (name, said + "\n".join(summary) + "\n```")):
            for path in blocks.write(block, text):
                print(f"rewrote {path.relative_to(blocks.REPO)}: {block}")
    return 0 if passed == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
