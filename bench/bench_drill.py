"""Drill throughput on the simulator: a fabric's single-link failures (every link of the
reference fabric unless N or FABRIC.yaml is given) played through the drill's private
LocalCluster (TLS, `twin.drill.cluster`) of 1, 2 and then 4 worker processes (or those of
`--workers`). Prints, for each: faults per minute (wall clock, the cluster's start and its
credentials included), the CPU per fault of the whole drill (this process: client and
scheduler; and its workers), the CPU per case in a worker (building the unfaulted lab once
included), and the load average before and after (other jobs on the machine move the
wall-clock figures, not the CPU ones).

    flock /tmp/twin-heavy.lock .venv/bin/python bench/bench_drill.py [N] [FABRIC.yaml] \
        [--workers 1,2,4] [--write]

`--write` (the reference fabric) puts one row per worker count into the block
`drill-throughput` of docs/drills.md (`drill-every-link` without N) and records them
(bench/blocks.py).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import blocks  # noqa: E402
from twin.drill import cases as drill  # noqa: E402
from twin.drill import run as drillrun  # noqa: E402
from twin.intent import fabric as intent  # noqa: E402
from twin.intent.inputs import strict_yaml  # noqa: E402
from twin.lab import directory as labdir  # noqa: E402
from twin.lab.directory import Lab  # noqa: E402

REFERENCE = REPO / "twin" / "defaults" / "reference.yaml"
SCENARIO = REPO / "twin" / "defaults" / "drill-scenario.yaml"


def _cpu() -> float:
    """CPU seconds of this process and of its children that ended (the drill's workers)."""
    own, ended = (
        resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return own.ru_utime + own.ru_stime + ended.ru_utime + ended.ru_stime


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("count", type=int, nargs="?", help="the first N links (default: every one)")
    p.add_argument("fabric", type=Path, nargs="?", default=REFERENCE)
    p.add_argument("--workers", default="1,2,4", help="worker counts, comma-separated")
    p.add_argument("--write", action="store_true", help="the rows into the docs' block")
    args = p.parse_args(argv)
    if args.write and args.fabric != REFERENCE:
        p.error("--write quotes the reference fabric: leave FABRIC.yaml out")
    rows = [
        "| `bench_drill.py` | load average | faults/minute | CPU per fault, whole drill "
        "| CPU per case in its worker |",
        "|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory(prefix="bench-drill-") as tmp:
        lab_dir = Path(tmp) / "lab"
        labdir.generate(intent.load(args.fabric), lab_dir, str(args.fabric))
        lab = Lab.open(lab_dir)
        scenario = strict_yaml(SCENARIO)
        cases = drill.fault_sets(lab, "links")[: args.count]
        when = drill.timing(scenario, drill.default_at(scenario), live=False)
        print(f"{len(cases)} single-link faults (+ the baseline) of {args.fabric.name}")
        for workers in (int(w) for w in args.workers.split(",")):
            load = os.getloadavg()[0]
            start, cpu = time.monotonic(), _cpu()
            outcomes = drillrun.on_dask(lab, scenario, cases, when, workers)
            seconds, spent = time.monotonic() - start, _cpu() - cpu
            assert not any(o.error for o in outcomes), [o.error for o in outcomes if o.error]
            rows.append(
                f"| {len(cases)} links, {workers} worker{'s' if workers > 1 else ''} "
                f"| {load:.1f}-{os.getloadavg()[0]:.1f} | {len(cases) / seconds * 60:.1f} "
                f"| {spent / len(outcomes):.3f} s "
                f"| {statistics.fmean(o.cpu for o in outcomes):.3f} s |"
            )
            print(
                f"{workers} worker{'s' if workers > 1 else ' '}: {len(cases) / seconds * 60:6.1f} "
                f"faults/minute ({seconds:.1f} s); CPU per fault {spent / len(outcomes):.3f} s "
                f"(drill), {statistics.fmean(o.cpu for o in outcomes):.3f} s (case in a worker, "
                f"median {statistics.median(o.cpu for o in outcomes):.3f}); "
                f"load average {load:.1f} -> {os.getloadavg()[0]:.1f}"
            )
    if args.write:
        name = "drill-throughput" if args.count else "drill-every-link"
        for path in blocks.write(name, "\n".join(rows)):
            print(f"rewrote {path.relative_to(REPO)}: {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
