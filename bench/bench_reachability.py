"""How long the `fib_reachability` check takes under every single-link failure: the reference
fabric, the reference intent with 200 servers (3 tiers, 1,422 links) and examples/big.yaml
(2,048 servers, 3 tiers).

    .venv/bin/python bench/bench_reachability.py            # the three times
    .venv/bin/python bench/bench_reachability.py --write    # into docs/validators.md

A lab is generated into a temporary directory first (not timed); the time is the whole
validator: reading the configs, routing, the walk of every FIB and of every failure's; its
CPU time is what it costs on a shared machine. Each case prints its verdicts beside it.
`--write` puts the times into the block `fib-reachability` of docs/validators.md and records
them (bench/blocks.py).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import blocks
from bench.bench_deadlock import check, per_failure
from validators.examples import generate

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="the times into the docs' block")
    args = parser.parse_args()
    reference = yaml.safe_load((EXAMPLES / "reference.yaml").read_text())
    rows = [
        "| fabric, every single-link failure | wall (CPU), CPU per failure | verdicts |",
        "|---|---|---|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for name, source in (
            ("reference (50 servers)", reference),
            ("reference with 200 servers (3 tiers)", {**reference, "servers": {
                **reference["servers"], "count": 200}}),
            ("examples/big.yaml (2,048 servers)", EXAMPLES / "big.yaml"),
        ):  # fmt: skip
            lab = generate(Path(tmp) / str(len(rows)), source)
            cpu = time.process_time()
            seconds, results = check(lab, 1, "fib_reachability")
            cpu = time.process_time() - cpu
            verdicts = ", ".join(f"{r.scope}: {r.status.value}" for r in results)
            took = f"{seconds:.1f} s ({cpu:.1f} s of CPU){per_failure(cpu, results)}"
            print(f"{name:<40} {took}; {verdicts}")
            rows.append(f"| {name} | {took} | {verdicts} |")
    if args.write:
        rows.append(f"\n({blocks.load()} at the end: what else ran)")
        for path in blocks.write("fib-reachability", "\n".join(rows)):
            print(f"rewrote {path.relative_to(blocks.REPO)}: fib-reachability")
    return 0


if __name__ == "__main__":
    sys.exit(main())
