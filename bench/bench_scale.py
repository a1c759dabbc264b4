"""How the simulator's cost grows with the fabric: `twin run LAB --backend sim` with the default
scenario on the reference intent with more servers (issue 34; the switches grow with it past
400 servers: see `intent`).

    .venv/bin/python bench/bench_scale.py 50 100 200            # servers per case
    .venv/bin/python bench/bench_scale.py 1024 --labs /tmp/labs  # keep generated labs there

Each run directory is removed once read; without `--labs` the generated labs go too.

Per size: the time `twin generate` takes (CPU), then the run's CPU seconds and peak RSS (of
the `twin run` process), its packet hops and CPU nanoseconds per hop, the core's own per hop
(`sim.json`'s `core_cpu_s`: its run alone, without the build and the reading of results), the
simulator core's flows (state: slots of in-core collectives plus table rows), the run
directory's bytes and the iteration times. Goals (issue 34): 1,024 servers <= 60 s CPU and
2 GB; 4,096 servers <= 10 min CPU and 8 GB; the core's per hop at every size within 1.5 times
the smallest size's of the same command (`50 ... 4096`: from 50 to 4,096 servers). `--write`
puts a row per size into the block `sim-scale` of docs/simulator.md (a size's row replaced,
other sizes' rows kept) and records them (bench/blocks.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, cast

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import blocks  # noqa: E402

GOALS = {1024: (60.0, 2048), 4096: (600.0, 8192)}
"""CPU seconds and peak MB."""
FLAT = 1.5
"""The core's CPU per hop at any size over the smallest size's, at most."""


def _child_usage(command: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    """Run `command` in a child; its CPU seconds, peak RSS (MB) and stdout."""
    code = (
        "import resource, subprocess, sys, json\n"
        "r = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print(json.dumps([u.ru_utime + u.ru_stime, u.ru_maxrss // 1024, r.returncode,"
        " r.stdout[-2000:], r.stderr[-2000:]]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, *command], capture_output=True, text=True, env=env
    )
    cpu, rss, rc, stdout, stderr = json.loads(out.stdout.strip().splitlines()[-1])
    if rc not in (0, 1):
        raise SystemExit(f"{' '.join(command)}: exit {rc}\n{stderr}")
    return float(cpu), int(rss), stdout


def intent(servers: int) -> dict[str, Any]:
    """The reference intent with `servers` servers, on switches that hold them in 3 tiers: up
    to 400 servers as it is (32-port switches); up to 1,024 on 64-port leaves and spines under
    128-port super-spines (70 leaves, 72 spines at 1,024); beyond, examples/big.yaml's pods (8
    spines of 64 ports, 4 uplinks from each leaf to each) under 512-port super-spines (274
    leaves, 280 spines in 35 pods, 32 super-spines at 4,096) with 120 MB lossless pools (the
    60 MB default cannot hold 512 lossless ports' headroom, 68.8 MB: the `headroom` check fails
    it; Tomahawk 4 and 5, 25.6 and 51.2 Tb/s, have 113 and 165 MB)."""
    import yaml

    reference = yaml.safe_load((REPO / "examples" / "reference.yaml").read_text())
    if servers <= 400:
        data = reference
    elif servers <= 1024:
        data = reference
        data["leaves"]["ports"] = data["spines"]["ports"] = 64
        data["superspines"] = {"ports": 128, "speed": "400G"}
    else:
        data = yaml.safe_load((REPO / "examples" / "big.yaml").read_text())
        data["superspines"]["ports"] = 512
        pools = {"ingress_lossless_pool": 120_000_000, "egress_lossless_pool": 120_000_000}
        data["qos"].setdefault("buffers", {}).update(pools)
    data["name"] = f"bs{servers}"
    data["servers"]["count"] = servers
    return cast(dict[str, Any], data)


TWIN = [sys.executable, "-m", "twin.cli.main"]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def generated(servers: int, labs: Path) -> tuple[Path, float]:
    """The lab of `intent(servers)` in `labs` (generated unless there) and the CPU seconds its
    generation took (0 when it was there)."""
    import yaml

    lab = labs / f"lab{servers}"
    if (lab / "fabric.yaml").exists() or lab.exists():
        return lab, 0.0
    fabric = labs / f"fabric{servers}.yaml"
    fabric.write_text(yaml.safe_dump(intent(servers)))
    cpu, _, _ = _child_usage([*TWIN, "generate", str(fabric), "-o", str(lab)], ENV)
    return lab, cpu


def case(servers: int, labs: Path) -> dict[str, Any]:
    """Generate (once) and run `intent(servers)`."""
    lab, generate_cpu = generated(servers, labs)
    out = Path(tempfile.mkdtemp(prefix="bench-scale-", dir=labs))
    try:
        cpu, rss, stdout = _child_usage(
            [*TWIN, "run", str(lab), "--backend", "sim", "--out", str(out)], ENV
        )
        sim = json.loads((out / "sim.json").read_text())
        iterations = json.loads((out / "iterations.json").read_text())
        size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    finally:
        shutil.rmtree(out)
    verdict = stdout.strip().splitlines()[-1].split(";")[0] if stdout.strip() else ""
    times = [t for v in iterations.values() for t in v["times_s"]]
    return {
        "servers": servers,
        "generate_cpu_s": round(generate_cpu, 1),
        "cpu_s": round(cpu, 1),
        "max_rss_MB": rss,
        "packet_hops": sim["packet_hops"],
        "ns_per_hop": round(cpu / max(sim["packet_hops"], 1) * 1e9),
        "core_ns_per_hop": round(sim["core_cpu_s"] / max(sim["packet_hops"], 1) * 1e9),
        "sim_wall_s": sim["wall_s"],
        "core_flows": sim["experiment"]["flows"],
        "run_dir_MB": round(size / 1e6, 1),
        "iteration_ms": [None if t is None else round(t * 1e3, 4) for t in times],
        "verdict": verdict,
    }


HEADER = [
    "| servers | run CPU | peak RSS | packet hops | CPU per hop | core's per hop | core flows "
    "| run directory | iterations, mean | verdict | load |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
]
"""The block `sim-scale`: a row per size."""


def row(f: dict[str, Any]) -> str:
    """A size's figures as a row of the block `sim-scale`."""
    times = [t for t in f["iteration_ms"] if t is not None]
    mean = f"{sum(times) / len(times):.3f} ms" if times else "none"
    return (
        f"| {f['servers']} | {f['cpu_s']} s | {f['max_rss_MB']} MB "
        f"| {f['packet_hops'] / 1e6:.1f} M | {f['ns_per_hop']} ns | {f['core_ns_per_hop']} ns "
        f"| {f['core_flows']} "
        f"| {f['run_dir_MB']} MB | {mean} | {f['verdict']} | {blocks.load()} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("servers", type=int, nargs="+")
    parser.add_argument("--labs", type=Path, help="where generated labs are kept (default: temp)")
    parser.add_argument("--write", action="store_true", help="the rows into the docs' block")
    args = parser.parse_args()
    labs = args.labs or Path(tempfile.mkdtemp(prefix="bench-scale-"))
    labs.mkdir(parents=True, exist_ok=True)
    try:
        return _bench(args.servers, labs, args.write)
    finally:
        if args.labs is None:
            shutil.rmtree(labs)


def _bench(sizes: list[int], labs: Path, write: bool) -> int:
    """Each size's case printed (and written with `write`); 1 when a goal is missed."""
    missed = []
    smallest: dict[str, Any] = {}
    for n in sorted(sizes):
        figures = case(n, labs)
        print(json.dumps(figures), flush=True)
        smallest = smallest or figures
        flat = figures["core_ns_per_hop"] / max(smallest["core_ns_per_hop"], 1)
        print(f"{n} servers: the core's per hop {flat:.2f}x {smallest['servers']} servers'")
        if flat > FLAT:
            missed.append(f"{n} servers: the core's per hop {flat:.2f}x (at most {FLAT}x)")
        for path in blocks.write_row("sim-scale", HEADER, row(figures)) if write else []:
            print(f"rewrote {path.relative_to(REPO)}: sim-scale")
        if n in GOALS:
            cpu, mb = GOALS[n]
            if float(figures["cpu_s"]) > cpu or int(figures["max_rss_MB"]) > mb:
                missed.append(f"{n} servers: {figures['cpu_s']} s, {figures['max_rss_MB']} MB")
    for line in missed:
        print(f"goal missed: {line}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
