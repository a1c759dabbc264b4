"""The profile-guided core against the plain one (`labs.sim.pgo`, what `scripts/setup.sh`
installs): the core's CPU (`sim.json`'s `core_cpu_s`) in `twin run LAB --backend sim` with the
default scenario and no static validators, the two cores alternated round by round in child
processes on each size's lab (bench_scale's intents).

    .venv/bin/python bench/bench_pgo.py 50 1024 --rounds 2 --labs /tmp/labs

Both cores are built here from the repository's sources (the plain one as pip builds it, the
guided one trained on the reference as `python -m labs.sim.pgo` trains it); the one installed
is left as it is.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.bench_scale import generated  # noqa: E402
from labs.sim import pgo  # noqa: E402


def core_cpu(core: Path, lab: Path, out: Path) -> tuple[float, int]:
    """The core's CPU seconds and packet hops of the lab's default scenario on `core`."""
    pgo.play(core, lab, "default", out)
    sim = json.loads((out / "sim.json").read_text())
    shutil.rmtree(out)
    return float(sim["core_cpu_s"]), int(sim["packet_hops"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("servers", type=int, nargs="+")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--labs", type=Path, help="where generated labs are kept (default: temp)")
    args = parser.parse_args()
    labs = args.labs or Path(tempfile.mkdtemp(prefix="bench-pgo-"))
    labs.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-pgo-") as work:
        plain, guided, steps = pgo.build(Path(work))
        for step in steps:
            print(f"pgo: {step}", flush=True)
        for n in sorted(args.servers):
            lab, _ = generated(n, labs)
            cpu: dict[str, list[float]] = {"plain": [], "guided": []}
            for r in range(args.rounds):
                for name, core in (("plain", plain), ("guided", guided)):
                    seconds, hops = core_cpu(core, lab, Path(work) / "run")
                    cpu[name].append(seconds)
                    per_hop = seconds / max(hops, 1) * 1e9
                    print(
                        f"{n} servers, round {r + 1}, {name}: {seconds:.2f} s, {per_hop:.0f} ns/hop"
                    )
            mean = {k: sum(v) / len(v) for k, v in cpu.items()}
            change = (mean["guided"] / mean["plain"] - 1) * 100
            print(
                f"{n} servers: the core {mean['plain']:.2f} s plain, {mean['guided']:.2f} s "
                f"guided ({change:+.1f} %)",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
