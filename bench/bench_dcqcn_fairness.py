"""How far each flow of the DCQCN N:1 incast is from its fair share (issue 10, fidelity 1).

    .venv/bin/python bench/bench_dcqcn_fairness.py          # engine seeds 1-6 and the reference
    .venv/bin/python bench/bench_dcqcn_fairness.py --long   # also N = 10 over 50-550 and 50-1050 ms

1. The engine on examples/sim/dcqcn_incast_{2,10}.yaml: per seed, the largest deviation of a
   flow's 50-100 ms mean delivered rate from 40/N Gb/s, and the mean queue.
2. A reference independent of the engine: the SIGCOMM'15 reaction point and a one-CNP-per-
   window notification point for 10 flows in 1 us steps at the fluid model's fixed-point
   marking probability (no queue, no packets). Its flows are identical and independent, so
   the spread of their 50 ms means is the algorithm's own rate noise, not the engine's.

`--long --write` puts what it prints into the block `dcqcn-noise` of docs/simulator.md and
records it (bench/blocks.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import blocks  # noqa: E402
from labs.sim import Dcqcn, load, simulate  # noqa: E402

SEEDS = range(1, 7)
LINE = 40e9
FRAME_OVERHEAD = 62 + 20
"""Bytes a frame adds to its payload on the wire (RoCEv2 headers, preamble and gap)."""


def engine(n: int, seed: int, end: float) -> tuple[float, float]:
    """Largest per-flow deviation from its share over 50 ms-end and the mean queue (bytes): the
    share is 40/N Gb/s on the wire, 40/N x 1000/1082 of the payload rates the engine reports."""
    exp, _ = load(REPO / "examples" / "sim" / f"dcqcn_incast_{n}.yaml")
    exp = dataclasses.replace(exp, duration=end)
    result = simulate(exp, seed)
    fair = LINE / n * exp.packet_bytes / (exp.packet_bytes + FRAME_OVERHEAD)
    rates = [result.mean_rate(f.name, 0.05, end) for f in result.flows]
    queue = result.mean_queue(exp.monitor.ports[0], 3, 0.05, end)
    return max(abs(r - fair) / fair for r in rates), queue


@dataclasses.dataclass
class Rp:
    """One flow's reaction point state (rates in b/s, times in us)."""

    rc: float
    rt: float
    alpha: float
    phase: int
    stage: int = 0
    next_increase: int = -1
    window: int = -1
    cnp_in_period: bool = False
    bits: float = 0.0


def reference(p: float, n: int, seed: int, d: Dcqcn) -> float:
    """Largest deviation of a flow's 50-100 ms mean rate from the flows' mean rate."""
    rng = random.Random(seed)
    tau, period, timer = (round(x * 1e6) for x in (d.cnp_interval, d.alpha_period, d.timer))
    flows = [Rp(LINE / n, LINE / n, 0.15, rng.randrange(tau)) for _ in range(n)]
    for us in range(100_000):
        for f in flows:
            packets = f.rc * 1e-6 / 8000
            if us >= 50_000:
                f.bits += f.rc * 1e-6
            window = (us + f.phase) // tau
            if window != f.window and rng.random() < 1 - (1 - p) ** packets:
                f.window, f.rt = window, f.rc
                f.rc = max(d.min_rate, f.rc * (1 - f.alpha / 2))
                f.alpha = (1 - d.g) * f.alpha + d.g
                f.cnp_in_period, f.stage, f.next_increase = True, 0, us + timer
            if us % period == period - 1:
                f.alpha *= 1 if f.cnp_in_period else 1 - d.g
                f.cnp_in_period = False
            if us == f.next_increase:
                f.stage, f.next_increase = f.stage + 1, us + timer
                if f.stage > d.f:
                    f.rt = min(LINE, f.rt + d.r_ai)
                f.rc = (f.rt + f.rc) / 2
    mean = sum(f.bits for f in flows) / n
    return max(abs(f.bits - mean) / mean for f in flows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--long", action="store_true", help="also N = 10 over 50-550 and 50-1050 ms"
    )
    parser.add_argument("--write", action="store_true", help="with --long: into the docs' block")
    args = parser.parse_args()
    if args.write and not args.long:
        parser.error("--write quotes the long runs too: add --long")
    said: list[str] = []

    def say(line: str) -> None:
        said.append(line)
        print(line)

    for n in (2, 10):
        figures = [engine(n, seed, 0.1) for seed in SEEDS]
        devs = ", ".join(f"{dev * 100:.1f}" for dev, _ in figures)
        queues = ", ".join(f"{q / 1e3:.1f}" for _, q in figures)
        say(f"engine N={n}, 50-100 ms, seeds 1-6: largest flow deviation % {devs}")
        say(f"engine N={n}, 50-100 ms, seeds 1-6: mean queue KB {queues}")
    if args.long:
        for end, seeds in ((0.55, SEEDS[:4]), (1.05, SEEDS[:3])):
            devs = ", ".join(f"{engine(10, seed, end)[0] * 100:.1f}" for seed in seeds)
            span = f"50-{end * 1000:.0f} ms, seeds {seeds[0]}-{seeds[-1]}"
            say(f"engine N=10, {span}: largest flow deviation % {devs}")
    exp, _ = load(REPO / "examples" / "sim" / "dcqcn_incast_10.yaml")
    p = (122.6e3 - 5e3) / 195e3 * 0.01
    devs = ", ".join(f"{reference(p, 10, seed, exp.dcqcn) * 100:.1f}" for seed in SEEDS)
    say(f"reference N=10, p={p:.5f}, 50-100 ms, seeds 1-6: largest flow deviation % {devs}")
    if args.write:
        for path in blocks.write("dcqcn-noise", "```\n" + "\n".join(said) + "\n```"):
            print(f"rewrote {path.relative_to(REPO)}: dcqcn-noise")
    return 0


if __name__ == "__main__":
    sys.exit(main())
