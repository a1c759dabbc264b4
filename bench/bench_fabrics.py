"""False reds on fabrics of any shape: valid intents drawn at random, each generated, judged
by `twin validate` and played with every example scenario on the simulator.

    .venv/bin/python bench/bench_fabrics.py                      # 20 fabrics of 4-64 servers
    .venv/bin/python bench/bench_fabrics.py -n 200 --max-servers 1024 --seed 7

Intents come from Hypothesis strategies over the intent schema (`twin/intent/fabric.py`):
4 to `--max-servers` servers, single- or dual-homed, 2 to 16 spines, two or three tiers
(`superspines` given), 100G, 200G or 400G, any server name prefix; draws the design refuses
are drawn again. Every fabric is healthy as generated, so every failing row is a false red
(but those a scenario shows by design: `EXPECTED`): each is printed with its rows
(validator, scope, reason), then the totals. A scenario refused
for the fabric (exit 2: a selector naming a rack the fabric lacks) is listed apart. Exit
status 1 when there is a false red.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, reject, seed, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from twin import labdir  # noqa: E402
from twin.design.graph import design  # noqa: E402
from twin.errors import InputError  # noqa: E402
from twin.intent import fabric as intent  # noqa: E402

SCENARIOS = sorted((REPO / "examples" / "scenarios").glob("*.yaml"))
EXPECTED = {"backup-wrong-class": {"lossless_isolation"}}
"""Scenarios that show a break (the backup in the lossless class): the validators they fail by
design, whose failing rows are no false red."""
SPEEDS = ("100G", "200G", "400G")
SKIP = 3
"""Which valid example of a seeded Hypothesis run a fabric is (its first are the simplest)."""


@st.composite
def intents(draw: st.DrawFn, max_servers: int) -> dict[str, Any]:
    """An intent over the schema's main axes; the design derives the rest (leaves, uplinks).
    Counts are sampled from their ranges (not `integers`, which favours the ends)."""
    dual = draw(st.booleans())
    speed = draw(st.sampled_from(SPEEDS))
    prefix = draw(
        st.from_regex(r"[a-z][a-z0-9]{0,9}", fullmatch=True).filter(
            lambda p: not intent.SWITCH_NAME.match(p)
        )
    )
    ports = draw(st.sampled_from([32, 64]))
    data: dict[str, Any] = {
        "spines": {"count": draw(st.sampled_from(range(2, 17))), "ports": ports, "speed": speed},
        "leaves": {"ports": ports, "speed": speed},
        "servers": {
            "count": draw(st.sampled_from(range(4, max_servers + 1))),
            "nics": 2 if dual else draw(st.sampled_from([1, 2])),
            "dual_homed": dual,
            "nic_speed": speed,
            "name_prefix": prefix,
        },
        "oversubscription": {"max": 4.0},
    }
    if draw(st.booleans()):
        data["superspines"] = {"count": draw(st.integers(1, 4)), "ports": 256, "speed": speed}
    return data


def draw_intents(count: int, max_servers: int, chosen_seed: int) -> list[dict[str, Any]]:
    """`count` intents the design accepts, named `bfSEED-1`, `bfSEED-2`... (the same per
    seed): fabric i is the `SKIP`-th valid example of a Hypothesis run seeded `seed` + i (its
    first examples are the simplest, and one run's examples are alike)."""
    return [
        {"name": f"bf{chosen_seed % 1000}-{i}", **one_intent(max_servers, chosen_seed * 1000 + i)}
        for i in range(1, count + 1)
    ]


def one_intent(max_servers: int, chosen_seed: int) -> dict[str, Any]:
    """The `SKIP`-th intent the design accepts of a Hypothesis run with this seed."""
    found: list[dict[str, Any]] = []

    @settings(
        max_examples=SKIP * 100,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        deadline=None,
    )
    @seed(chosen_seed)
    @given(intents(max_servers))
    def collect(data: dict[str, Any]) -> None:
        if len(found) >= SKIP:
            return
        try:
            design(intent.parse({"name": "drawn", **data}, "drawn.yaml"), "drawn.yaml")
        except InputError:
            reject()
        found.append(data)

    collect()
    return found[-1]


@dataclass
class Judged:
    """One fabric's false reds (per command, the failing rows) and refused scenarios."""

    fabric: dict[str, Any]
    reds: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    commands: int = 0


def twin(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "twin.cli.main", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
    )


def judge(data: dict[str, Any], scenarios: list[Path], work: Path) -> Judged:
    """Generate the fabric into `work`, validate it, play each scenario on the simulator."""
    lab = work / str(data["name"])
    labdir.generate(intent.parse(data, "drawn.yaml"), lab, "drawn.yaml")
    judged = Judged(data)
    commands = {"validate": ["validate", str(lab), "--json"]}
    for scenario in scenarios:
        commands[scenario.stem] = ["run", str(lab), str(scenario), "--backend", "sim", "--json"]
        commands[scenario.stem] += ["--no-static"]
    for name, argv in commands.items():
        judged.commands += 1
        done = twin(*argv)
        if done.returncode == 2:
            judged.refused[name] = done.stderr.strip().splitlines()[-1]
            continue
        if done.returncode not in (0, 1):
            judged.reds[name] = [("exit", str(done.returncode), done.stderr.strip()[-300:])]
            continue
        results = json.loads(done.stdout)["results"]
        expected = EXPECTED.get(name, set())
        failing = [
            (r["validator"], r["scope"], r["reason"])
            for r in results
            if r["status"] == "fail" and r["validator"] not in expected
        ]
        if failing:
            judged.reds[name] = failing
    return judged


def shape(data: dict[str, Any]) -> str:
    """One line of the drawn axes."""
    s = data["servers"]
    homed = "dual-homed" if s["dual_homed"] else f"single-homed x{s['nics']}"
    tiers = "3 tiers" if "superspines" in data else "2 tiers"
    return (
        f"{s['count']} servers {homed}, {data['spines']['count']} spines, {tiers}, "
        f"{data['spines']['speed']}, prefix {s['name_prefix']!r}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=20, help="fabrics to draw (default 20)")
    parser.add_argument("--max-servers", type=int, default=64, help="at most (default 64)")
    parser.add_argument("--seed", type=int, default=1, help="Hypothesis seed (default 1)")
    args = parser.parse_args()
    started = time.monotonic()
    drawn = draw_intents(args.n, max(4, min(1024, args.max_servers)), args.seed)
    reds = refused = commands = 0
    with tempfile.TemporaryDirectory(prefix="bench-fabrics-") as tmp:
        for data in drawn:
            judged = judge(data, SCENARIOS, Path(tmp))
            commands += judged.commands
            flag = "FALSE RED" if judged.reds else "ok"
            print(f"{data['name']}: {shape(data)}: {flag}", flush=True)
            for name, rows in judged.reds.items():
                reds += len(rows)
                for validator, scope, reason in rows:
                    print(f"  {name}: {validator} / {scope}: {reason}")
            for name, line in judged.refused.items():
                refused += 1
                print(f"  {name}: refused: {line}")
    took = time.monotonic() - started
    red_fabrics = "see above" if reds else "none"
    print(
        f"\n{len(drawn)} fabrics, {commands} commands ({len(SCENARIOS)} scenarios on the "
        f"simulator and twin validate each): {reds} false red rows ({red_fabrics}), "
        f"{refused} scenarios refused, {took:.0f} s"
    )
    return 1 if reds else 0


if __name__ == "__main__":
    sys.exit(main())
