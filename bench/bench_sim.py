"""How fast the packet simulator (labs/sim) runs.

    .venv/bin/python bench/bench_sim.py            # every figure (about two minutes)
    .venv/bin/python bench/bench_sim.py --quick    # the dumbbells and a small All-Reduce
    .venv/bin/python bench/bench_sim.py --fidelity # the ring and incast figures

1. Packet hops per wall second on an 8:1 dumbbell at 40 Gb/s with PFC, ECN and DCQCN
   (goal >= 1.6 M/s, ten times ns-3's ~160 k/s on this kind of machine); `dumbbell-rc` the
   same over RoCEv2's reliable connection (ACKs on the reverse path, not counted as hops).
2. The article's reference fabric (50 servers x 2 x 400G NICs, 8 leaves, 4 spines) running one
   ring All-Reduce of 256 MB per rank (100 ranks, 4 KB packets) plus a backup burst (8 x 32 MB
   in the lossless class into one NIC), to completion (goal <= 60 s wall, <= 2 GB memory).
3. Wall time against simulated bytes (All-Reduce of 32..256 MB per rank) and against fabric
   size (the reference fabric and a 3-tier Clos of 200 servers at 64 MB per rank).

4. `--fidelity`: the published cases of examples/sim/ and their figures: the HotNets'16 ring
   (throughput per flow, occupancy bands, pause fractions; with a third flow, the deadlock)
   and the PFC-only 8:1 incast's goodput against C x payload / (payload + overhead).

Each case runs in a child process so its peak memory (max RSS) is its own. Wall and CPU time
cover building the experiment in Python, the run, and reading the results back; CPU time is
the fairer figure on a machine shared with other jobs. Exit status 1 if a goal is missed
(judged on wall time).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from labs.sim import Experiment, Flow, QosProfile, QueueParams, load, simulate  # noqa: E402
from labs.sim.fabrics import clos3, dumbbell, leaf_spine, ring_allreduce, with_flows  # noqa: E402

RED_40G = QueueParams(ecn=True, kmin=5_000, kmax=200_000, pmax=0.01)
"""The DCQCN paper's marking at 40 Gb/s."""


def dumbbell_case(transport: str = "open") -> Experiment:
    qos = QosProfile(queues={3: RED_40G, 6: QueueParams(strict=True)})
    exp = dumbbell(8, qos=qos)
    flows = [replace(f, transport=transport) for f in exp.flows]
    return replace(exp, flows=flows, duration=0.1, stop_when_done=False, packet_bytes=1000)


def reference_case(mb: int, backup: bool = True) -> Experiment:
    fabric = leaf_spine()
    ranks = [h.name for h in fabric.hosts]
    flows = ring_allreduce(ranks, mb * 1_000_000)
    if backup:
        flows += [
            Flow(f"backup{i}", f"srv{i}-nic0", "srv49-nic1", size=32_000_000, cc="none", start=2e-3)
            for i in range(8)
        ]
    return with_flows(fabric, flows, duration=2.0, name=f"reference-allreduce-{mb}MB")


def clos_case(mb: int) -> Experiment:
    fabric = clos3()
    ranks = [h.name for h in fabric.hosts]
    return with_flows(fabric, ring_allreduce(ranks, mb * 1_000_000), duration=2.0)


CASES: dict[str, Callable[[], Experiment]] = {
    "dumbbell": dumbbell_case,
    "dumbbell-rc": lambda: dumbbell_case("rc"),
    "reference-256MB": lambda: reference_case(256),
    "reference-32MB": lambda: reference_case(32, backup=False),
    "reference-64MB": lambda: reference_case(64, backup=False),
    "reference-128MB": lambda: reference_case(128, backup=False),
    "clos3-200-64MB": lambda: clos_case(64),
    "reference-8MB": lambda: reference_case(8),
}


def run_case(name: str) -> dict[str, float | int | str]:
    """Build and run one case here; its figures as a dict."""
    started, cpu = time.perf_counter(), time.process_time()
    exp = CASES[name]()
    result = simulate(exp, seed=1)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    done = [f for f in result.flows if f.completion is not None]
    return {
        "case": name,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "simulated_ms": round(result.end_time * 1e3, 3),
        "packet_hops": result.packet_hops,
        "hops_per_s": round(result.packet_hops / wall),
        "hops_per_cpu_s": round(result.packet_hops / cpu),
        "events": result.events_processed,
        "flows_done": f"{len(done)}/{len(result.flows)}",
        "delivered_GB": round(sum(f.bytes_delivered for f in result.flows) / 1e9, 2),
        "pause_frames": int(result.total("pause_sent")),
        "max_rss_MB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def fidelity() -> None:
    """Print the ring's and the incast's figures (examples/sim, tests/sim/test_sim_ring.py and
    tests/sim/test_sim_pfc.py assert them)."""
    wire = (1000 + 62 + 20) / 1000  # bytes on the wire per payload byte at 1000-byte payloads
    for name in ("ring_two_flows", "ring_three_flows"):
        exp, seed = load(REPO / "examples" / "sim" / f"{name}.yaml")
        r = simulate(exp, seed or 1)
        cycles = [(round(e.time * 1e3, 3), e.cycle) for e in r.events_of("deadlock")]
        print(f"{name}: deadlock {cycles or 'none'}")
        for f in r.flows:
            rate = r.mean_rate(f.name, 1e-3, r.end_time)
            print(
                f"  {f.name}: {rate * wire / 1e9:.2f} Gb/s on the wire ({rate / 1e9:.2f} payload)"
            )
        for p in r.ports:
            c = p.priorities.get(3)
            if c is not None and c.pause_received and p.node in "ABCD":
                print(f"  {p.node}:{p.port} paused {c.paused_time / r.end_time:.1%} of the run")
        for port, what in (("A:Ethernet8", "A's ingress from D"), ("B:Ethernet8", "B's from A")):
            s = r.pgs[port][3][round(1e-3 / r.sample_interval) :]
            print(f"  {what}: {min(s) / 1e3:.1f}-{max(s) / 1e3:.1f} KB after 1 ms")
    exp, seed = load(REPO / "examples" / "sim" / "pfc_incast_8_40g.yaml")
    formula = 40e9 / wire
    for delay in (1e-6, 10e-6):
        links = [replace(link, delay=delay) for link in exp.links]
        r = simulate(replace(exp, links=links), seed or 1)
        goodput = sum(r.mean_rate(f.name, 2e-3, r.end_time) for f in r.flows)
        print(
            f"pfc_incast_8_40g, {delay * 1e6:.0f} us links: goodput {goodput / 1e9:.3f} Gb/s, "
            f"formula {formula / 1e9:.3f} ({goodput / formula - 1:+.3%})"
        )


def in_child(name: str) -> dict[str, float | int | str]:
    out = subprocess.run(
        [sys.executable, __file__, "--case", name], capture_output=True, text=True, check=True
    )
    figures: dict[str, float | int | str] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the dumbbells and an 8 MB All-Reduce")
    parser.add_argument("--case", choices=CASES, help=argparse.SUPPRESS)
    parser.add_argument("--fidelity", action="store_true", help="the published cases' figures")
    args = parser.parse_args()
    if args.fidelity:
        fidelity()
        return 0
    if args.case:
        print(json.dumps(run_case(args.case)))
        return 0
    names = (
        ["dumbbell", "dumbbell-rc", "reference-8MB"]
        if args.quick
        else [n for n in CASES if n != "reference-8MB"]
    )
    failed = []
    for name in names:
        f = in_child(name)
        print(
            f"{name:16} wall {f['wall_s']:>6} s (cpu {f['cpu_s']:>6} s)  "
            f"simulated {f['simulated_ms']:>7} ms  {f['packet_hops']:>9} hops  "
            f"{int(f['hops_per_s']) / 1e6:4.2f} M hops/s "
            f"(per cpu s {int(f['hops_per_cpu_s']) / 1e6:4.2f})  "
            f"flows {f['flows_done']:>11}  {f['delivered_GB']:>5} GB  "
            f"pauses {f['pause_frames']:>5}  max RSS {f['max_rss_MB']:>4} MB"
        )
        if name == "dumbbell" and int(f["hops_per_s"]) < 1_600_000:
            failed.append(f"{name}: {f['hops_per_s']} packet hops/s < 1.6 M/s")
        if name == "reference-256MB" and (float(f["wall_s"]) > 60 or int(f["max_rss_MB"]) > 2048):
            failed.append(f"{name}: {f['wall_s']} s, {f['max_rss_MB']} MB (goal 60 s, 2 GB)")
    for line in failed:
        print(f"goal missed: {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
