"""What a rail-optimized fabric costs to generate, validate and play on the simulator.

    .venv/bin/python bench/bench_rails.py                      # examples/rail.yaml: 128 x 8
    .venv/bin/python bench/bench_rails.py --servers 32 --nics 4
    .venv/bin/python bench/bench_rails.py --write              # into docs/rails.md

examples/rail.yaml (docs/rails.md), with `--servers`/`--nics` when given, is generated under a
lab name of the bench's own; then `twin generate`, `twin validate` and `twin run LAB --backend
sim` (the default scenario) each run as a new process, and the bench prints, per step, its
exit code, CPU seconds (user + system) and peak resident memory, then what the simulator
made of the run (its flows in the core, packet hops, simulated time: `sim.json`) and the
collectives' verdicts (`collective_efficiency`). Exit status 1 when a step does not pass
(exit code not 0). `--write` (the example's size only) puts the figures into the block
`rails` of docs/rails.md and records them (bench/blocks.py).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import blocks  # noqa: E402

SOURCE = REPO / "examples" / "rail.yaml"
TWIN = REPO / ".venv" / "bin" / "twin"


def step(*args: str) -> tuple[int, float, float]:
    """Run `twin ARGS` in a new process: (exit code, its CPU s, its peak RSS MB)."""
    child = subprocess.Popen(
        [str(TWIN), *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return child.returncode, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def simulated(lab: Path) -> list[str]:
    """What the lab's last run says of the simulator and the collectives, as lines."""
    runs = sorted((lab / "runs").glob("*/sim.json"))
    if not runs:
        return ["no simulator run"]
    sim = json.loads(runs[-1].read_text())
    report = json.loads((runs[-1].parent / "report.json").read_text())["results"]
    lines = [
        f"simulator: {sim['experiment']['flows']} flows in the core, "
        f"{sim['packet_hops'] / 1e6:.1f} M packet hops, {sim['simulated_s'] * 1e3:.2f} ms "
        f"simulated in {sim['wall_s']:.1f} s"
    ]
    lines += [
        f"`collective_efficiency` {r['scope']}: {r['status']}, {r['reason']}"
        for r in report
        if r["validator"] == "collective_efficiency"
    ]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, help="servers (default: the example's 128)")
    parser.add_argument("--nics", type=int, help="NICs per server, 1..8 (default 8)")
    parser.add_argument("--write", action="store_true", help="the figures into the docs' block")
    args = parser.parse_args()
    if args.write and (args.servers or args.nics):
        parser.error("--write quotes the example's size: leave --servers and --nics out")
    fabric = yaml.safe_load(SOURCE.read_text())
    fabric["name"] = f"rail-{secrets.token_hex(3)}"
    fabric["servers"]["count"] = args.servers or fabric["servers"]["count"]
    fabric["servers"]["nics"] = args.nics or fabric["servers"]["nics"]
    with tempfile.TemporaryDirectory(prefix="bench-rails-") as tmp:
        source, lab = Path(tmp) / "rail.yaml", Path(tmp) / "lab"
        source.write_text(yaml.safe_dump(fabric))
        servers, nics = fabric["servers"]["count"], fabric["servers"]["nics"]
        print(f"rail fabric: {servers} servers x {nics} NICs ({servers * nics} endpoints)")
        failed = False
        rows = ["| step | exit | CPU | peak RSS |", "|---|---|---|---|"]
        for name, argv in (
            ("generate", ("generate", str(source), "-o", str(lab))),
            ("validate", ("validate", str(lab))),
            ("run --backend sim", ("run", str(lab), "--backend", "sim")),
        ):
            code, cpu, rss = step(*argv)
            failed |= code != 0
            print(f"  {name:<18} exit {code}  CPU {cpu:6.1f} s  peak RSS {rss:7.0f} MB")
            rows.append(f"| `twin {name}` | {code} | {cpu:.1f} s | {rss:.0f} MB |")
        said = simulated(lab)
        print("\n".join(f"  {line}" for line in said))
    if args.write:
        rows.append(f"\n({blocks.load()} at the end: what else ran)\n")
        rows += [f"- {line}" for line in said]
        for path in blocks.write("rails", "\n".join(rows)):
            print(f"rewrote {path.relative_to(REPO)}: rails")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
