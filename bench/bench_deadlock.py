"""How long the `deadlock` check takes: the reference fabric under every single-link failure
(goal < 5 s), and a fabric of 256 leaves and 64 spines with no failure (< 10 s) and under
every single-link failure (< 60 s).

    .venv/bin/python bench/bench_deadlock.py            # the three times
    .venv/bin/python bench/bench_deadlock.py --profile  # plus the top functions of the last
    .venv/bin/python bench/bench_deadlock.py --policy   # every session under a route-map
    .venv/bin/python bench/bench_deadlock.py --policy --cases 1 --write   # the reference only
    .venv/bin/python bench/bench_deadlock.py --write    # the times into docs/validators.md

With `--policy` every switch's FABRIC peer-group gets an outbound route-map that permits all
and tags a community (no route changes): routing policy on every session, the routing model's
slower path (a full reselection at each change), against the same goals.

A lab is generated into a temporary directory first (not timed); the time is the whole
validator: reading the configs, routing, the buffer dependency graph and every failure.
`--write` puts the times into the block `deadlock` (`deadlock-policy` with `--policy`) of
docs/validators.md and records them (bench/blocks.py). Exit status 1 if a goal is missed.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import blocks
from twin.lab.directory import Lab
from validators.examples import add_frr_policy, generate
from validators.registry import get
from validators.result import Result

REPO = Path(__file__).resolve().parent.parent
WIDE = {
    "name": "wide",
    "spines": {"count": 64, "ports": 256},
    "leaves": {"count": 256, "ports": 72, "uplinks_per_spine": 1, "peer_link_ports": 2},
    "servers": {"count": 512},
}
"""256 leaves in MLAG pairs, one 400G uplink to each of 64 spines, 512 dual-homed servers."""


def police(lab: Lab) -> None:
    """An outbound route-map on every switch's FABRIC peer-group that changes no route."""
    for switch in lab.switches():
        add_frr_policy(
            lab,
            switch,
            "  neighbor FABRIC route-map TAG out",
            "route-map TAG permit 10\n set community 65000:1 additive\nexit\n",
        )


def check(lab: Lab, failures: int, validator: str = "deadlock") -> tuple[float, list[Result]]:
    """Seconds a validator (by default deadlock) takes, and its results."""
    v = get(validator)
    start = time.perf_counter()
    results = v.check(lab, v.params({"failures": failures}))
    return time.perf_counter() - start, results


def _figures(results: list[Result]) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for r in results:
        figures.update(r.figures)
    return figures


def per_failure(seconds: float, results: list[Result]) -> str:
    """`, N ms per failure` when the check tried failures (nothing otherwise)."""
    sets = int(_figures(results).get("failure_sets", 0))
    return f", {1000 * seconds / sets:.2f} ms per failure" if sets else ""


def line(name: str, seconds: float, goal: float, results: list[Result]) -> str:
    figures = _figures(results)
    verdicts = ", ".join(f"{r.scope}: {r.status.value}" for r in results)
    sets = int(figures.get("failure_sets", 0))
    each = per_failure(seconds, results)
    mark = "ok" if seconds < goal else "MISSED"
    return (
        f"{name:<42} {seconds:6.1f} s  (goal {goal:.0f} s, {mark}){each}\n"
        f"{'':<42} {figures.get('classes')} classes, {figures.get('queues')} queues, "
        f"{sets} failure sets, {figures.get('rerouting', 0)} rerouting; {verdicts}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", action="store_true", help="cProfile the last case")
    parser.add_argument("--policy", action="store_true", help="a route-map on every session")
    parser.add_argument("--cases", type=int, help="only the first N cases (1: the reference)")
    parser.add_argument("--write", action="store_true", help="the times into the docs' block")
    args = parser.parse_args()
    missed = False
    rows = ["| case | time | goal |", "|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        reference = generate(Path(tmp) / "reference", REPO / "examples" / "reference.yaml")
        wide = generate(Path(tmp) / "wide", WIDE)
        for lab in (reference, wide) if args.policy else ():
            police(lab)
        cases = [
            ("reference, every single-link failure", reference, 1, 5.0),
            ("256 leaves x 64 spines, no failure", wide, 0, 10.0),
            ("256 leaves x 64 spines, every single-link failure", wide, 1, 60.0),
        ]
        for name, lab, failures, goal in cases[: args.cases]:
            seconds, results = check(lab, failures)
            missed |= seconds >= goal
            print(line(name, seconds, goal, results), flush=True)
            rows.append(
                f"| {name} | {seconds:.1f} s{per_failure(seconds, results)} | < {goal:g} s |"
            )
        if args.profile:
            profiler = cProfile.Profile()
            profiler.runcall(check, wide, 1)
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).strip_dirs().sort_stats("tottime").print_stats(25)
            print(out.getvalue())
    if args.write:
        rows.append(f"\n({blocks.load()} at the end: what else ran)")
        name = "deadlock-policy" if args.policy else "deadlock"
        for path in blocks.write(name, "\n".join(rows)):
            print(f"rewrote {path.relative_to(REPO)}: {name}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
