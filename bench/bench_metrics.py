"""How fast a live twin's metrics endpoint answers while the twin plays the main job, beside
two CPU-bound processes.

    sudo .venv/bin/python bench/bench_metrics.py                  # the main job, 2 busy
    sudo .venv/bin/python bench/bench_metrics.py --busy 0         # on an idle machine
    sudo .venv/bin/python bench/bench_metrics.py --fabric examples/small.yaml \
        --scenario examples/scenarios/default.yaml                # a smaller twin

The main job is `twin run`'s: the reference fabric (twin/defaults/reference.yaml) on netns
playing the default scenario (twin/defaults/default-scenario.yaml, then its hybrid
simulator pass). The fabric is generated under a lab name of the bench's own (`bm-<hex>`, so
it never meets a lab someone else runs) and deployed; the bench starts `--busy` CPU-bound
processes (default 2) and `twin run LAB SCENARIO --metrics 127.0.0.1:PORT`, scrapes
/metrics every 0.5 s while it plays (a scrape given up after 5 s counts as a timeout), then
stops the busy processes by pid and destroys the twin, even on failure. It prints the
scrapes' latencies (min, median, p99, max) against the goal (every scrape answered within
0.5 s) and the load average before and after.

`--write` puts those lines into the block `metrics-scrapes` of docs/metrics.md and records
them (bench/blocks.py). Needs root and FRR. Exit status 1 if the goal is missed, 2 if the twin
cannot be deployed.
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import blocks
from labs import registry
from labs.netns import lifecycle as netns
from twin.errors import TwinError
from twin.intent import fabric as intent
from twin.lab import directory as labdir
from twin.lab.directory import Lab

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "twin" / "defaults" / "reference.yaml"
SCENARIO = REPO / "twin" / "defaults" / "default-scenario.yaml"
TWIN = Path(sys.executable).with_name("twin")
GOAL_S = 0.5
EVERY_S = 0.5
TIMEOUT_S = 5.0


def generate(source: Path, out: Path, name: str) -> Lab:
    """The fabric under the bench's lab name, written to `out`."""
    fabric = yaml.safe_load(source.read_text())
    fabric["name"] = name
    source = out.parent / f"{name}.yaml"
    source.write_text(yaml.safe_dump(fabric))
    labdir.generate(intent.load(source), out, str(source))
    return Lab.open(out)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def scrapes(lab: Lab, scenario: Path) -> tuple[list[float], int]:
    """Play the scenario with --metrics and scrape while it plays: the answered scrapes'
    latencies in seconds, and the number that timed out (once the endpoint first answered)."""
    url = f"http://127.0.0.1:{free_port()}/metrics"
    where = url.removeprefix("http://").removesuffix("/metrics")
    command = [str(TWIN), "run", str(lab.path), str(scenario), "--metrics", where]
    latencies: list[float] = []
    timeouts = 0
    with subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as playing:
        while playing.poll() is None:
            asked = time.perf_counter()
            try:
                with urllib.request.urlopen(url, timeout=TIMEOUT_S) as answer:
                    answer.read()
                latencies.append(time.perf_counter() - asked)
            except TimeoutError:
                timeouts += 1
            except OSError:  # not serving yet, or no more
                pass
            time.sleep(max(0.0, asked + EVERY_S - time.perf_counter()))
        _, err = playing.communicate()
    if playing.returncode not in (0, 1):
        raise SystemExit(f"twin run failed ({playing.returncode}): {err.decode()[-2000:]}")
    return latencies, timeouts


def busy(n: int) -> list[subprocess.Popen[bytes]]:
    """N CPU-bound processes (ended by the caller)."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def load() -> str:
    """The load average over 1, 5 and 15 minutes."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    """Run the bench and print its figures against the goal."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", type=Path, default=SCENARIO, help="the scenario to play")
    parser.add_argument("--fabric", type=Path, default=SOURCE, help="the fabric to deploy")
    parser.add_argument("--busy", type=int, default=2, help="CPU-bound processes beside it")
    parser.add_argument("--name", default=f"bm-{secrets.token_hex(2)}", help="lab name")
    parser.add_argument("--write", action="store_true", help="the figures into the docs' block")
    args = parser.parse_args()
    backend = registry.get("netns")
    try:
        netns.check_root()
        with tempfile.TemporaryDirectory(prefix="bench-metrics-") as tmp:
            lab = generate(args.fabric, Path(tmp) / "lab", args.name)
            burners: list[subprocess.Popen[bytes]] = []
            try:
                backend.deploy(lab)
                burners = busy(args.busy)
                before = load()
                latencies, timeouts = scrapes(lab, args.scenario)
            finally:
                for burner in burners:
                    burner.kill()
                    burner.wait()
                after = load()
                backend.destroy(lab)
    except TwinError as exc:
        print(f"bench_metrics: {exc}", file=sys.stderr)
        return 2
    if not latencies:
        print("bench_metrics: no scrape answered", file=sys.stderr)
        return 1
    ms = sorted(x * 1e3 for x in latencies)
    p99 = ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]
    played = f"{args.fabric.name} on netns playing {args.scenario.name}"
    ok = timeouts == 0 and ms[-1] < GOAL_S * 1e3
    said = [
        f"{played}, {args.busy} CPU-bound processes beside",
        f"load average before {before}, after {after}; niceness {os.nice(0)}",
        f"{len(ms)} scrapes answered, {timeouts} timed out ({TIMEOUT_S:g} s): "
        f"min {ms[0]:.1f} ms, median {statistics.median(ms):.1f} ms, p99 {p99:.1f} ms, "
        f"max {ms[-1]:.1f} ms",
        f"goal: every scrape within {GOAL_S:g} s: {'ok' if ok else 'MISSED'}",
    ]
    print(f"{lab.name}: " + "\n".join(said))
    if args.write:
        text = "\n".join([f"{blocks.command()}:", "", "```", *said, "```"])
        for path in blocks.write("metrics-scrapes", text):
            print(f"rewrote {path.relative_to(REPO)}: metrics-scrapes")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
