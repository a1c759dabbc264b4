"""What a dependent load costs on this machine by how much memory it ranges over: the caches
the simulator core's per-hop cost grows with (bench_scale.py's "core's per hop": a large
fabric's ports, packets and routes are read at random, beyond the caches).

    .venv/bin/python bench/bench_memory.py           # a row per working set
    .venv/bin/python bench/bench_memory.py --write   # into docs/simulator.md's block

A chase through a random cycle of 64-byte lines (each load's address is the one before's
value, so no two overlap) on 2 MB pages where the kernel gives them, compiled with `cc` (gcc,
which scripts/setup.sh installs for the core); nanoseconds per load, the lowest of 3 rounds.
`--write` puts the table into the block `memory-latency` of docs/simulator.md (bench/blocks.py).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import blocks  # noqa: E402

SIZES_MB = (0.5, 1, 2, 4, 6, 8, 12, 16, 32, 64, 128)

CHASE = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
int main(int argc, char **argv) {
    size_t bytes = (size_t)(atof(argv[1]) * 1048576), n = bytes / 64, huge = 2u << 20;
    size_t room = (bytes + huge - 1) / huge * huge, steps = 10000000, *line, *order, p = 0;
    line = aligned_alloc(huge, room);
    madvise(line, room, MADV_HUGEPAGE);
    memset(line, 0, room);
    order = malloc(n * sizeof(size_t));
    for (size_t i = 0; i < n; i++) order[i] = i;
    srand(1);
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)rand() % (i + 1), t = order[i];
        order[i] = order[j], order[j] = t;
    }
    for (size_t i = 0; i < n; i++) line[order[i] * 8] = order[(i + 1) % n] * 8;
    double best = 1e9;
    for (int round = 0; round < 3; round++) {
        struct timespec t0, t1;
        for (size_t i = 0; i < n; i++) p = line[p];
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (size_t i = 0; i < steps; i++) p = line[p];
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ns = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / steps;
        best = ns < best ? ns : best;
    }
    printf("%.1f %zu\n", best, p & 1);
    return 0;
}
"""

HEADER = ["| working set | a dependent load |", "|---|---|"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="the table into the docs' block")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        source, program = Path(tmp) / "chase.c", Path(tmp) / "chase"
        source.write_text(CHASE)
        subprocess.run(["cc", "-O2", str(source), "-o", str(program)], check=True)
        rows = []
        for mb in SIZES_MB:
            out = subprocess.run(
                [str(program), str(mb)], capture_output=True, text=True, check=True
            )
            ns = float(out.stdout.split()[0])
            rows.append(f"| {mb:g} MB | {ns:.1f} ns |")
            print(rows[-1], flush=True)
    text = "\n".join([*HEADER, *rows])
    for path in blocks.write("memory-latency", text) if args.write else []:
        print(f"rewrote {path.relative_to(REPO)}: memory-latency")
    return 0


if __name__ == "__main__":
    sys.exit(main())
