"""How long the netns twin of the reference lab takes to come up and go away, and its memory.

    sudo .venv/bin/python bench/bench_deploy.py              # one deploy and destroy
    sudo .venv/bin/python bench/bench_deploy.py --repeat 3   # best and worst of 3
    sudo .venv/bin/python bench/bench_deploy.py --servers 200   # the 3-tier fabric
    sudo .venv/bin/python bench/bench_deploy.py --repeat 3 --write  # into docs/netns-backend.md

examples/reference.yaml (50 dual-homed servers, 8 leaves, 4 spines) is generated under a lab
name of the bench's own (`bench-<hex>`, so it never meets a lab someone else runs), deployed
on the netns backend and destroyed, in this process:

- converged: from the deploy call until it returns, i.e. every BGP session Established and
  every leaf at full ECMP width to every remote server subnet (goal < 5 s);
- destroyed: the destroy call, until no namespace, process or run directory is left (< 3 s);
- memory: the resident memory of the lab's processes (FRR daemons, found by their TWIN_LAB
  tag) at convergence, plus this process's peak resident memory (< 1.5 GB).

With `--servers 200` the reference fabric grows to 3 tiers (30 leaves, 32 spines, 16
super-spines, 278 namespaces, 1047 links, 1264 BGP sessions); its goals are those of
`GOALS_3TIER`.

`--write` puts the figures into the block `deploy` (`deploy-N-servers` with `--servers N`)
of docs/netns-backend.md and records them (bench/blocks.py).

Needs root and FRR. Exit status 1 if a goal is missed, 2 if the twin cannot be deployed.
"""

from __future__ import annotations

import argparse
import os
import resource
import secrets
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import blocks
from labs import processes, registry
from labs.netns import cleanup
from labs.netns import lifecycle as netns
from twin.errors import TwinError
from twin.intent import fabric as intent
from twin.lab import directory as labdir
from twin.lab.directory import Lab

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "examples" / "reference.yaml"
GOALS = {"converged_s": 5.0, "destroyed_s": 3.0, "memory_mb": 1536.0}
GOALS_3TIER = {"converged_s": 120.0, "destroyed_s": 60.0, "memory_mb": 6144.0}
"""Goals with `--servers 200`: 3 tiers, 78 switches, 234 FRR daemons on 2 cores."""


@dataclass
class Run:
    """The figures of one deploy and destroy."""

    converged_s: float
    destroyed_s: float
    daemons_mb: float
    bench_mb: float
    daemons: int
    sessions: int
    links: int

    @property
    def memory_mb(self) -> float:
        """Daemons at convergence plus this process at its peak."""
        return self.daemons_mb + self.bench_mb


def rss_mb(pid: int) -> float:
    """Resident memory of a process, in MiB (0 if it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def generate(out: Path, name: str, servers: int | None) -> Lab:
    """examples/reference.yaml under the bench's lab name (with `servers` servers when given),
    written to `out`."""
    fabric = yaml.safe_load(SOURCE.read_text())
    fabric["name"] = name
    if servers:
        fabric["servers"]["count"] = servers
    source = out.parent / f"{name}.yaml"
    source.write_text(yaml.safe_dump(fabric))
    labdir.generate(intent.load(source), out, str(source))
    return Lab.open(out)


def once(lab: Lab, timeout: float | None) -> Run:
    """Deploy, measure, destroy."""
    try:
        start = time.perf_counter()
        up = registry.get("netns").deploy(lab, timeout=timeout)
        converged = time.perf_counter() - start
        pids = processes.tagged(lab.name)
        daemons_mb = sum(rss_mb(pid) for pid in pids)
    finally:
        start = time.perf_counter()
        registry.get("netns").destroy(lab)
        destroyed = time.perf_counter() - start
        if cleanup.namespaces_of(lab.name) or processes.tagged(lab.name):
            registry.get("netns").cleanup(lab.name, lab.path)
            raise SystemExit(f"{lab.name}: destroy left something behind (cleaned up)")
    bench_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    links = int(up.details.get("links", 0))
    return Run(converged, destroyed, daemons_mb, bench_mb, len(pids), up.sessions, links)


def main() -> int:
    """Run the bench and print its figures against the goals."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="deploy and destroy N times")
    parser.add_argument("--name", default=f"bench-{secrets.token_hex(2)}", help="lab name")
    parser.add_argument("--servers", type=int, help="servers.count (200: a 3-tier fabric)")
    parser.add_argument("--timeout", type=float, help="seconds to converge (the deploy's default)")
    parser.add_argument("--write", action="store_true", help="the figures into the docs' block")
    args = parser.parse_args()
    try:
        netns.check_root()
        with tempfile.TemporaryDirectory(prefix="bench-deploy-") as tmp:
            lab = generate(Path(tmp) / "lab", args.name, args.servers)
            nodes = len(lab.switches()) + len(lab.nodes("server"))
            print(f"{lab.name}: {nodes} nodes from {SOURCE.relative_to(REPO)}")
            runs = [once(lab, args.timeout) for _ in range(args.repeat)]
    except TwinError as exc:
        print(f"bench_deploy: {exc}", file=sys.stderr)
        return 2
    for i, run in enumerate(runs, 1):
        print(
            f"run {i}: converged {run.converged_s:.2f} s ({run.sessions} BGP sessions), "
            f"destroyed {run.destroyed_s:.2f} s, memory {run.memory_mb:.0f} MB "
            f"({run.daemons} daemons {run.daemons_mb:.0f} MB + bench {run.bench_mb:.0f} MB)"
        )
    missed = []
    tiers = lab.figures.get("tiers", 2)
    for key, goal in (GOALS_3TIER if tiers == 3 else GOALS).items():
        worst = max(getattr(run, key) for run in runs)
        best = min(getattr(run, key) for run in runs)
        ok = worst < goal
        missed += [] if ok else [key]
        verdict = "ok" if ok else "MISSED"
        print(f"{key:12} best {best:8.2f}  worst {worst:8.2f}  goal < {goal:g}  {verdict}")
    if args.write:
        name = f"deploy-{args.servers}-servers" if args.servers else "deploy"
        goals = GOALS_3TIER if tiers == 3 else GOALS
        for path in blocks.write(name, table(lab, runs, goals)):
            print(f"rewrote {path.relative_to(REPO)}: {name}")
    return 1 if missed else 0


def table(lab: Lab, runs: list[Run], goals: dict[str, float]) -> str:
    """The figures of the runs as the docs quote them: what was deployed, then each figure's
    best and worst against its goal."""
    first = runs[0]
    nodes = len(lab.switches()) + len(lab.nodes("server"))
    rows = [
        f"{nodes} namespaces, {first.links} veths, {first.daemons} FRR daemons, "
        f"{first.sessions} BGP sessions; {len(runs)} runs, the machine's load average "
        f"{os.getloadavg()[0]:.1f} at the end (what else ran):",
        "",
        "| figure | best | worst | goal |",
        "|---|---|---|---|",
    ]
    for key, label, unit in (
        ("converged_s", "converged", "s"),
        ("destroyed_s", "destroyed", "s"),
        ("memory_mb", "resident at convergence", "MB"),
        ("daemons_mb", "of it the daemons", "MB"),
        ("bench_mb", "of it the bench's process", "MB"),
    ):
        values = [getattr(run, key) for run in runs]
        goal = f"< {goals[key]:g} {unit}" if key in goals else ""
        digits = 2 if unit == "s" else 0
        rows.append(
            f"| {label} | {min(values):.{digits}f} {unit} | {max(values):.{digits}f} {unit} "
            f"| {goal} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
