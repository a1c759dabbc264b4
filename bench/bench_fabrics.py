"""False reds on fabrics of any shape: valid intents drawn at random, each generated, judged
by `twin validate` and played with every example scenario on the simulator.

    .venv/bin/python bench/bench_fabrics.py                      # 20 fabrics of 4-64 servers
    .venv/bin/python bench/bench_fabrics.py -n 200 --max-servers 32 --pick 1-20   # a piece
    .venv/bin/python bench/bench_fabrics.py -n 6 --min-servers 128 --max-servers 1024 \
        --scenarios default
    .venv/bin/python bench/bench_fabrics.py -n 10 --min-servers 6 --max-servers 8 --seed 6 \
        --backend netns --scenarios default --prefix myname   # a live sample, as root

Intents are drawn over the intent schema's axes (`intent_from`; `twin/intent/fabric.py`):
`--min-servers` to `--max-servers` servers (log-uniform; the redraws below skew them up: of
200 over 4-32, 19 have under 10), single- (one NIC) or dual-homed,
2 to 16 spines, 8- to 64-port leaves and spines, oversubscription targets 1 to 3 (max 4),
super-spines asked for or not (three tiers also when the spines' radix is too small), 100G,
200G or 400G, any server name prefix; draws the design refuses, or of one rack (the example
scenarios need two), are drawn again. `intents` is the same as a Hypothesis strategy; the
bench draws with a seeded random, as Hypothesis's generation favours the smallest examples.
Every fabric is healthy as generated, so every failing row is a false red (but those a
scenario shows by design: `EXPECTED`): each is printed with its rows (validator, scope,
reason), then the totals and the cost per fabric by server count. A scenario refused for
the fabric (exit 2) is listed apart. Exit status 1 when there is a false red. `--write` puts
the totals into the block `fabrics` of docs/validators.md and records them (bench/blocks.py).

Cost: the bench's own CPU (`s CPU`, this process's and its children's) is what it costs;
wall time on this shared 2-core machine (nice 19, load 15-34) was about 8 times that. A run
draws no plot (the verdict does not read them; they were a third of a small fabric's CPU).
Measured on this tree (pieces of `-j 1` four at once, load 15-34; docs/validators.md, The
fabrics campaign): 200 fabrics of 4-32 servers, validate and all 7 example scenarios, 2-37 s
of CPU each (mean 8.1: 2.7 under 8 servers, 9.5 at 16-32), 0 false reds; 5 of 128-667
servers, validate and the default scenario, 8-198 s; live on netns (`--backend netns`, the
simulator playing the data plane), 10 of 6-8 servers, the default scenario, 12-31 s of the
bench's CPU (the twin's daemons not counted), 47-80 s wall, 0 false reds. `incast` played 5
s of line-rate incast (30 s of CPU on 38 servers) before its `sim.time_scale` of 0.01 (1.7
s); `allreduce` costs its 256 MB ring per rank, 5 s of CPU on 38 servers, linear in them.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import multiprocessing
import random
import resource
import shutil
import string
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

from hypothesis import strategies as st

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import blocks  # noqa: E402
from twin.design.graph import design  # noqa: E402
from twin.errors import InputError  # noqa: E402
from twin.intent import fabric as intent  # noqa: E402
from twin.lab import directory as labdir  # noqa: E402

SCENARIOS = sorted((REPO / "examples" / "scenarios").glob("*.yaml"))
EXPECTED = {"backup-wrong-class": {"lossless_isolation"}}
"""Scenarios that show a break (the backup in the lossless class): the validators they fail by
design, whose failing rows are no false red."""
SPEEDS = ("100G", "200G", "400G")
PORTS = (8, 16, 32, 64)
"""Switch radixes drawn: small ones give small fabrics several racks (and three tiers)."""
TARGETS = (1.0, 1.5, 2.0, 3.0)
"""Oversubscription the sizing aims for (the design refuses above `max`, 4)."""
STOPPED = (128 + 2, 128 + 15)
"""`twin`'s exit codes when SIGINT or SIGTERM stopped it."""
STEPS = 64
"""Server counts are drawn on a log grid of this many steps from the least to the most."""


def log_grid(least: int, most: int) -> list[int]:
    """Server counts evenly spaced in log from `least` to `most` (distinct, ends included).

    >>> log_grid(4, 1024)[:3], log_grid(4, 1024)[-1], log_grid(4, 4)
    ([4, 5, 6], 1024, [4])
    """
    ratio = most / least
    return sorted({round(least * ratio ** (k / (STEPS - 1))) for k in range(STEPS)})


Pick = Callable[[Sequence[Any]], Any]
"""Chooses one of the options given (Hypothesis's `sampled_from`, or a seeded random's)."""


def intent_from(pick: Pick, prefix: str, least: int, most: int) -> dict[str, Any]:
    """An intent over the schema's main axes, each chosen by `pick`; the design derives the
    rest (leaves, uplinks, pods, and three tiers when the spines' radix is too small).
    Single-homed servers have one NIC, dual-homed two (the design refuses the rest)."""
    dual = pick([False, True])
    speed = pick(SPEEDS)
    data: dict[str, Any] = {
        "spines": {"count": pick(range(2, 17)), "ports": pick(PORTS), "speed": speed},
        "leaves": {"ports": pick(PORTS), "speed": speed, "peer_link_ports": pick([1, 2])},
        "servers": {
            "count": pick(log_grid(least, most)),
            "nics": 2 if dual else 1,
            "dual_homed": dual,
            "nic_speed": speed,
            "name_prefix": prefix,
        },
        "oversubscription": {"target": pick(TARGETS), "max": 4.0},
    }
    if pick([False, True]):
        data["superspines"] = {"count": pick(range(1, 5)), "ports": 256, "speed": speed}
    return data


PREFIXES = st.from_regex(r"[a-z][a-z0-9]{0,9}", fullmatch=True).filter(
    lambda p: not intent.SWITCH_NAME.match(p)
)


@st.composite
def intents(draw: st.DrawFn, least: int, most: int) -> dict[str, Any]:
    """`intent_from` as a Hypothesis strategy (for property tests: it shrinks)."""
    return intent_from(lambda options: draw(st.sampled_from(options)), draw(PREFIXES), least, most)


def random_prefix(rng: random.Random) -> str:
    """A server name prefix by the schema's pattern that names no switch."""
    while True:
        chars = string.ascii_lowercase + string.digits
        p = rng.choice(string.ascii_lowercase) + "".join(
            rng.choice(chars) for _ in range(rng.randrange(10))
        )
        if not intent.SWITCH_NAME.match(p):
            return p


def draw_intents(count: int, servers: tuple[int, int], chosen_seed: int) -> list[dict[str, Any]]:
    """`count` intents the design accepts, named `bfSEED-1`, `bfSEED-2`... (the same per
    seed and server range): each axis chosen uniformly (server counts log-uniformly) by a
    random seeded `seed`; draws the design refuses, or that make one rack, are drawn again.
    (Hypothesis's own generation favours small examples: of 100 it drew over 4-128 servers,
    74 had under 16, and the first of each run is the smallest of all.)"""
    rng = random.Random(chosen_seed)
    drawn: list[dict[str, Any]] = []
    while len(drawn) < count:
        data = intent_from(rng.choice, random_prefix(rng), *servers)
        try:
            made = design(intent.parse({"name": "drawn", **data}, "drawn.yaml"), "drawn.yaml")
        except InputError:
            continue
        if made.sizing.leaves < (4 if data["servers"]["dual_homed"] else 2):
            continue  # one rack: the example scenarios need two (nothing crosses a spine)
        drawn.append({"name": f"bf{chosen_seed % 1000}-{len(drawn) + 1}", **data})
    return drawn


@dataclass
class Judged:
    """One fabric's false reds (per command, the failing rows), refused scenarios and cost."""

    fabric: dict[str, Any]
    reds: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    commands: int = 0
    seconds: float = 0.0
    cpu: float = 0.0
    slowest: tuple[str, float] = ("", 0.0)


def twin(*args: str) -> tuple[int, str, str]:
    """Run a `twin` verb in this process: (exit code, stdout, stderr). A run draws no plot
    (the verdict does not read them; they were a third of a small fabric's CPU)."""
    from twin.cli.main import main as twin_main
    from twin.outputs import plots as drawn

    out, err = io.StringIO(), io.StringIO()
    with contextlib.ExitStack() as stack:
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        stack.enter_context(mock.patch.object(drawn, "write", return_value=[]))
        try:
            code = twin_main(list(args))
        except SystemExit as exc:
            code = int(exc.code or 0)
    if code in STOPPED:  # the verb stopped on the signal meant for the bench: the bench stops
        raise KeyboardInterrupt(err.getvalue().strip())
    return code, out.getvalue(), err.getvalue()


def judge(data: dict[str, Any], scenarios: list[Path], work: Path, backend: str) -> Judged:
    """Generate the fabric into `work`, validate it, play each scenario on `backend` (a live
    one is destroyed after each, and at the end whatever happened)."""
    started, cpu = time.monotonic(), cpu_seconds()
    lab = work / str(data["name"])
    labdir.generate(intent.parse(data, "drawn.yaml"), lab, "drawn.yaml")
    judged = Judged(data)
    commands = {"validate": ["validate", str(lab), "--json"]}
    for scenario in scenarios:
        commands[scenario.stem] = ["run", str(lab), str(scenario), "--backend", backend]
        commands[scenario.stem] += ["--json", "--no-static"]
    try:
        _play(judged, commands)
    finally:
        if backend != "sim":
            twin("destroy", str(lab), "--backend", backend)
    shutil.rmtree(lab, ignore_errors=True)
    judged.seconds, judged.cpu = time.monotonic() - started, cpu_seconds() - cpu
    return judged


def cpu_seconds() -> float:
    """CPU time of this process and of the children it waited for (user and system)."""
    own, children = (
        resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _play(judged: Judged, commands: dict[str, list[str]]) -> None:
    """Run each command; its failing rows (but those `EXPECTED`) or its refusal."""
    for name, argv in commands.items():
        judged.commands += 1
        began = time.monotonic()
        code, out, err = twin(*argv)
        took = time.monotonic() - began
        if took > judged.slowest[1]:
            judged.slowest = (name, took)
        if code == 2:
            judged.refused[name] = (err.strip().splitlines() or ["(no message)"])[-1]
            continue
        if code not in (0, 1):
            judged.reds[name] = [("exit", str(code), err.strip()[-300:])]
            continue
        expected = EXPECTED.get(name, set())
        failing = [
            (r["validator"], r["scope"], r["reason"])
            for r in json.loads(out)["results"]
            if r["status"] == "fail" and r["validator"] not in expected
        ]
        if failing:
            judged.reds[name] = failing


def shape(data: dict[str, Any]) -> str:
    """One line of the drawn axes."""
    s = data["servers"]
    homed = "dual-homed" if s["dual_homed"] else "single-homed"
    tiers = "3 tiers" if "superspines" in data else "2 tiers"
    return (
        f"{s['count']} servers {homed}, {data['spines']['count']} spines, {tiers}, "
        f"{data['spines']['speed']}, {data['leaves']['ports']}-port leaves, "
        f"{data['spines']['ports']}-port spines, "
        f"oversubscription target {data['oversubscription']['target']}, "
        f"prefix {s['name_prefix']!r}"
    )


def tiers(data: dict[str, Any]) -> str:
    """Two or three tiers as designed (super-spines asked for, or spines too small)."""
    sizing = design(intent.parse(data, "drawn.yaml"), "drawn.yaml").sizing
    return "3 tiers" if sizing.pods > 1 or sizing.superspines else "2 tiers"


def _judge_one(data: dict[str, Any], work: str, scenarios: list[Path], backend: str) -> Judged:
    """`judge` (a worker's task)."""
    return judge(data, scenarios, Path(work), backend)


def picked(spec: str, count: int) -> list[int]:
    """0-based indices of the fabrics `--pick` names (1-based: `3,7-9`; empty: all).

    >>> picked("3,7-9", 10), picked("", 3)
    ([2, 6, 7, 8], [0, 1, 2])
    """
    if not spec:
        return list(range(count))
    found: list[int] = []
    for part in spec.split(","):
        low, _, high = part.partition("-")
        found += range(int(low) - 1, int(high or low))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=20, help="fabrics to draw (default 20)")
    parser.add_argument("--min-servers", type=int, default=4, help="at least (default 4)")
    parser.add_argument("--max-servers", type=int, default=64, help="at most (default 64)")
    parser.add_argument("--seed", type=int, default=1, help="Hypothesis seed (default 1)")
    parser.add_argument(
        "-j", "--jobs", type=int, default=1, help="fabrics judged at once (on the simulator)"
    )
    parser.add_argument(
        "--pick", default="", help="judge only these fabrics of the draw (1-based: 3,7-9)"
    )
    parser.add_argument(
        "--scenarios", default="", help="only these example scenarios (names: default,incast)"
    )
    parser.add_argument("--skip", default="", help="leave out these example scenarios")
    parser.add_argument(
        "--backend", default="sim", help="sim (default), or a live one: netns (as root)"
    )
    parser.add_argument(
        "--prefix", default="", help="lab names PREFIX1, PREFIX2... (default bfSEED-1...)"
    )
    parser.add_argument("--write", action="store_true", help="the totals into the docs' block")
    args = parser.parse_args()
    started = time.monotonic()
    least = max(4, min(1024, args.min_servers))
    drawn = draw_intents(args.n, (least, max(least, min(1024, args.max_servers))), args.seed)
    if args.prefix:
        drawn = [{**data, "name": f"{args.prefix}{i}"} for i, data in enumerate(drawn, 1)]
    drawn = [drawn[i] for i in picked(args.pick, len(drawn))]
    wanted, skipped = set(filter(None, args.scenarios.split(","))), set(args.skip.split(","))
    scenarios = [s for s in SCENARIOS if (not wanted or s.stem in wanted) and s.stem not in skipped]
    reds = refused = commands = 0
    cpu = 0.0
    costs: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-fabrics-") as tmp:
        task = functools.partial(_judge_one, work=tmp, scenarios=scenarios, backend=args.backend)
        with contextlib.ExitStack() as stack:
            results: Iterable[Judged] = map(task, drawn)
            if args.jobs > 1:  # a pool's workers are daemons: a live backend's children cannot
                context = multiprocessing.get_context("fork")
                pool = stack.enter_context(context.Pool(args.jobs, maxtasksperchild=4))
                results = pool.imap(task, drawn)
            for judged in results:
                data = judged.fabric
                commands += judged.commands
                cpu += judged.cpu
                flag = "FALSE RED" if judged.reds else "ok"
                slow, slow_s = judged.slowest
                print(
                    f"{data['name']}: {shape(data)} ({tiers(data)} as designed): {flag} "
                    f"[{judged.seconds:.0f} s, {judged.cpu:.0f} s CPU, "
                    f"slowest {slow} {slow_s:.0f} s]",
                    flush=True,
                )
                costs.setdefault(bucket(data["servers"]["count"]), []).append(judged.seconds)
                for name, rows in judged.reds.items():
                    reds += len(rows)
                    for validator, scope, reason in rows:
                        print(f"  {name}: {validator} / {scope}: {reason}")
                for name, line in judged.refused.items():
                    refused += 1
                    print(f"  {name}: refused: {line}")
    took = time.monotonic() - started
    red_fabrics = "see above" if reds else "none"
    summary = [
        f"{len(drawn)} fabrics, {commands} commands ({', '.join(s.stem for s in scenarios)} "
        f"on {args.backend} and twin validate each): {reds} false red rows ({red_fabrics}), "
        f"{refused} scenarios refused, {took:.0f} s wall, {cpu:.0f} s CPU, {args.jobs} at once"
    ]
    for name, seconds in sorted(costs.items(), key=lambda kv: int(kv[0].split("-")[0])):
        mean = sum(seconds) / len(seconds)
        summary.append(f"  {name} servers: {len(seconds)} fabrics, {mean:.0f} s each (mean)")
    print("\n" + "\n".join(summary))
    if args.write:
        said = f"{blocks.command()} ({blocks.load()} at the end):\n\n```\n" + "\n".join(summary)
        for path in blocks.write("fabrics", said + "\n```"):
            print(f"rewrote {path.relative_to(REPO)}: fabrics")
    return 1 if reds else 0


def bucket(servers: int) -> str:
    """The power-of-two range a server count falls in.

    >>> bucket(4), bucket(7), bucket(1024)
    ('4-7', '4-7', '1024-2047')
    """
    low = 1 << (servers.bit_length() - 1)
    return f"{low}-{2 * low - 1}"


if __name__ == "__main__":
    sys.exit(main())
