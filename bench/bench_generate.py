"""How long `twin generate` takes: the reference lab (goal < 1 s) and 2,048 servers (< 10 s).

    .venv/bin/python bench/bench_generate.py            # times, best of --repeat runs
    .venv/bin/python bench/bench_generate.py --profile  # plus the top functions (cProfile)
    .venv/bin/python bench/bench_generate.py --phases   # plus time per phase of the big lab

Each run loads the intent and writes the whole lab directory into a fresh temporary
directory, as `twin generate` does. Exit status 1 if a goal is missed.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import io
import json
import pstats
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import networkx as nx

from twin.design.graph import design
from twin.intent import fabric as intent
from twin.lab import directory as labdir
from twin.render import clab, config_db, frr_conf, host_conf

REPO = Path(__file__).resolve().parent.parent
CASES = (("reference", 1.0), ("big", 10.0))


def generate(example: str) -> None:
    """Load examples/<example>.yaml and write its lab into a temporary directory."""
    source = REPO / "examples" / f"{example}.yaml"
    with tempfile.TemporaryDirectory() as tmp:
        labdir.generate(intent.load(source), Path(tmp) / example, str(source))


def best_of(run: Callable[[], None], repeat: int) -> float:
    """The shortest wall time of `repeat` runs, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def profile(example: str, top: int) -> str:
    """cProfile of one generation: the `top` functions by cumulative and by own time."""
    profiler = cProfile.Profile()
    profiler.runcall(generate, example)
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out).strip_dirs()
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    return out.getvalue()


@contextmanager
def _clock(spent: dict[str, float], name: str) -> Iterator[None]:
    start = time.perf_counter()
    yield
    spent[name] = time.perf_counter() - start


def phases(example: str) -> dict[str, float]:
    """Seconds spent in each phase of generating a lab, without writing files."""
    fabric = intent.load(REPO / "examples" / f"{example}.yaml")
    spent: dict[str, float] = {}
    with _clock(spent, "design (sizing, ports, addresses)"):
        d = design(fabric)
    switches = d.switches()
    with _clock(spent, "config_db.render"):
        dbs = [config_db.render(d, s) for s in switches]
    with _clock(spent, "json.dumps(indent=2) of config_db"):
        for config in dbs:
            json.dumps(config, indent=2)
    with _clock(spent, "frr_conf.render"):
        for switch in switches:
            frr_conf.render(d, switch)
    with _clock(spent, "host_conf.render"):
        hosts = {s: host_conf.render(d, s) for s in d.nodes("server")}
    with _clock(spent, "labdir.ifmap"):
        names = labdir.ifmap(d)
    with _clock(spent, "clab.render (yaml.safe_dump)"):
        clab.render(d, hosts, names)
    with _clock(spent, "design.json (node-link graph)"):
        json.dumps(nx.node_link_data(d.graph, edges="links"), indent=2)
    return spent


def main(argv: list[str] | None = None) -> int:
    """Print the time of each case against its goal."""
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--repeat", type=int, default=3, help="runs per case (best is kept)")
    args.add_argument("--profile", action="store_true", help="cProfile the big lab")
    args.add_argument("--phases", action="store_true", help="time each phase of the big lab")
    args.add_argument("--top", type=int, default=20, help="functions to list when profiling")
    opts = args.parse_args(argv)
    missed = False
    for example, goal in CASES:
        seconds = best_of(functools.partial(generate, example), opts.repeat)
        d = design(intent.load(REPO / "examples" / f"{example}.yaml"))
        size = f"{len(d.nodes('server'))} servers, {len(d.switches())} switches"
        verdict = "ok" if seconds < goal else "SLOW"
        missed |= seconds >= goal
        print(f"{example:<10} {size:<32} {seconds:6.2f} s  (goal < {goal:g} s)  {verdict}")
    if opts.phases:
        for name, seconds in phases("big").items():
            print(f"  {name:<40} {seconds:6.2f} s")
    if opts.profile:
        print(profile("big", opts.top))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
