"""Drill throughput on the simulator: a fabric's first N single-link failures (default 24;
the reference fabric unless FABRIC.yaml is given) played through the drill's private
LocalCluster (TLS, `twin.drillcluster`) of 1 and then 2 worker processes; prints faults per
minute for each (the cluster's start and its credentials included) and the speed-up.

    flock /tmp/twin-heavy.lock .venv/bin/python bench/bench_drill.py [N] [FABRIC.yaml]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from twin import drill, drillrun, labdir  # noqa: E402
from twin.intent import fabric as intent  # noqa: E402
from twin.intent.inputs import strict_yaml  # noqa: E402
from twin.labdir import Lab  # noqa: E402

REFERENCE = REPO / "twin" / "defaults" / "reference.yaml"
SCENARIO = REPO / "twin" / "defaults" / "drill-scenario.yaml"


def main(argv: list[str]) -> int:
    count = int(argv[0]) if argv else 24
    fabric = Path(argv[1]) if len(argv) > 1 else REFERENCE
    with tempfile.TemporaryDirectory(prefix="bench-drill-") as tmp:
        lab_dir = Path(tmp) / "lab"
        labdir.generate(intent.load(fabric), lab_dir, str(fabric))
        lab = Lab.open(lab_dir)
        scenario = strict_yaml(SCENARIO)
        cases = drill.fault_sets(lab, "links")[:count]
        rates = {}
        for workers in (1, 2):
            start = time.monotonic()
            when = drill.timing(scenario, drill.default_at(scenario), live=False)
            outcomes = drillrun.on_dask(lab, scenario, cases, when, workers)
            seconds = time.monotonic() - start
            rates[workers] = len(cases) / seconds * 60
            per_case = sum(o.seconds for o in outcomes) / len(outcomes)
            print(
                f"{workers} worker{'s' if workers > 1 else ''}: {len(cases)} faults (+ baseline) "
                f"in {seconds:.1f} s: {rates[workers]:.1f} faults/minute "
                f"({per_case:.2f} s per case in a worker)"
            )
        print(f"speed-up with 2 workers: {rates[2] / rates[1]:.2f}x")
        every = len(drill.fault_sets(lab, "links"))
        print(f"all {every} links at 2 workers: {every / rates[2]:.1f} minutes (estimate)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
