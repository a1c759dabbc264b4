"""Figures the docs and the example files quote, computed from the engine: each is a marked
block (bench/blocks.py) that `bench/bench_figures.py --write` rewrites and a test compares.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path

from labs.sim import headroom
from labs.sim.fluid import Incast
from labs.sim.loader import load
from labs.sim.model import (
    Dcqcn,
    Experiment,
    Flow,
    Host,
    Link,
    Monitor,
    QosProfile,
    QueueParams,
    Switch,
)
from labs.sim.result import Result
from twin.design.headroom import headroom_bytes

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "sim"
RING_RATES = tuple(r / 2 for r in range(2, 17))
"""The third flow's rates of the ring sweep, Gb/s on the wire."""
RING_OFFSETS = (2_000, 10_000, 18_432, 26_000, 30_000)
"""The XON offsets of the ring sweep, bytes (18 432: the model's default)."""


def headroom_sweep() -> str:
    """The first-drop cable of headroom sized for 5, 100 and 300 m at 100G and 400G, with the
    pause response time and without it."""
    rows = [
        "| link | sized for | first drop | ratio | first drop, instant pause |",
        "|---|---|---|---|---|",
    ]
    for speed in (100e9, 400e9):
        for sized in (5.0, 100.0, 300.0):
            found = headroom.first_drop(speed, sized)
            instant = headroom.first_drop(speed, sized, response=0)
            more = "no drop up to " if instant >= 5 * sized else ""
            rows.append(
                f"| {speed / 1e9:.0f}G | {sized:.0f} m | {found:.0f} m | {found / sized:.2f} "
                f"| {more}{instant:.0f} m |"
            )
    return "\n".join(rows)


def ring_deadlocks(rate: float, xon_offset: int, response: int | None = None) -> bool:
    """Whether ring_three_flows.yaml deadlocks with its third flow at `rate` b/s and every
    switch's lossless PG at `xon_offset` (and the given pause response, None: the standard's)."""
    from labs.sim.engine import simulate

    exp, seed = load(EXAMPLES / "ring_three_flows.yaml")

    def own(qos: QosProfile) -> QosProfile:
        pgs = dict(qos.pgs)
        pgs[3] = dataclasses.replace(qos.pg(3), xon_offset=xon_offset)
        return dataclasses.replace(qos, pgs=pgs, pfc_response_quanta=response)

    switches = [dataclasses.replace(s, qos=own(s.qos)) for s in exp.switches]
    hosts = [dataclasses.replace(h, qos=own(h.qos)) for h in exp.hosts]
    flows = [dataclasses.replace(f, rate=rate) if f.name == "flow3" else f for f in exp.flows]
    exp = dataclasses.replace(
        exp,
        switches=switches,
        hosts=hosts,
        flows=flows,
        monitor=dataclasses.replace(exp.monitor, interval=0.0),
        checks=dataclasses.replace(exp.checks, stop_on_deadlock=True),
    )
    return simulate(exp, seed or 1).deadlocked


def ring_sweep() -> str:
    """Deadlock (D) or not (.) of the ring per third-flow rate and XON offset, with the pause
    response time and with instant pauses."""
    head = " ".join(f"{r:g}" for r in RING_RATES)
    rows = ["```", f"third flow, Gb/s:        {head}"]
    for response, label in ((None, "response"), (0, "instant")):
        for offset in RING_OFFSETS:
            marks = "".join(
                ("D" if ring_deadlocks(r * 1e9, offset, response) else ".").ljust(len(f"{r:g}") + 1)
                for r in RING_RATES
            )
            rows.append(f"{label:8} xon_offset {offset / 1e3:4.1f} KB {marks.rstrip()}")
    return "\n".join([*rows, "```"])


N64_RED = (1_048_576, 2_097_152, 0.05)
"""Kmin, Kmax (bytes) and Pmax of the N = 64 incast: SONiC's AZURE_LOSSLESS WRED."""


def incast_64(loop_link: float, line: float = 400e9) -> Experiment:
    """64 DCQCN senders into one port at `line` b/s, every link `loop_link` seconds long (the
    control loop is about 4 x that), 1000-byte payloads, WRED N64_RED, the paper's DCQCN."""
    kmin, kmax, pmax = N64_RED
    marked = QueueParams(ecn=True, kmin=kmin, kmax=kmax, pmax=pmax)
    qos = QosProfile(queues={3: marked, 6: QueueParams(strict=True)})
    hosts = [Host(f"s{i}") for i in range(64)] + [Host("r")]
    links = [Link(f"s{i}:eth0", f"sw:p{i}", line, delay=loop_link) for i in range(64)]
    links.append(Link("r:eth0", "sw:p64", line, delay=loop_link))
    return Experiment(
        [Switch("sw", 64_000_000, qos)],
        hosts,
        links,
        [Flow(f"f{i}", f"s{i}", "r") for i in range(64)],
        duration=0.1,
        stop_when_done=False,
        packet_bytes=1000,
        monitor=Monitor(interval=10e-6, ports=("sw:p64",), flows=False),
        name="dcqcn-incast-64",
    )


@functools.cache
def incast_64_queues(
    loop_link: float,
) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    """(min, max, mean) of the queue over 50-100 ms: the engine's, and the delayed fluid
    model's for the same loop (4 x `loop_link`)."""
    from labs.sim.engine import simulate

    exp = incast_64(loop_link)
    engine = simulate(exp, 1).queues["sw:p64"][3]
    kmin, kmax, pmax = N64_RED
    fluid = Incast(64, 400e9, kmin, kmax, pmax, Dcqcn(), delay=4 * loop_link).run(0.1, 1e-6)
    return _spread([float(q) for q in engine[len(engine) // 2 :]]), _spread(
        fluid[len(fluid) // 2 :]
    )


def _spread(queue: list[float]) -> tuple[float, float, float]:
    return min(queue), max(queue), sum(queue) / len(queue)


def dcqcn_64() -> str:
    """The N = 64 incast's queue against the fluid model, at a 4 us and an 85 us loop."""
    kmin, kmax, pmax = N64_RED
    fixed = Incast(64, 400e9, kmin, kmax, pmax, Dcqcn()).fixed_point()
    rows = [
        f"fluid fixed point: {fixed / 1e6:.3f} MB",
        "",
        "| loop | engine: min-max, mean | fluid model, delayed: min-max, mean |",
        "|---|---|---|",
    ]
    for link in (1e-6, 21e-6):
        cells = [
            f"{lo / 1e6:.2f}-{hi / 1e6:.2f} MB, {mean / 1e6:.3f} MB"
            for lo, hi, mean in incast_64_queues(link)
        ]
        rows.append(f"| {4 * link * 1e6:.0f} us | {cells[0]} | {cells[1]} |")
    return "\n".join(rows)


def _incast_file(n: int) -> Incast:
    """The fluid model of examples/sim/dcqcn_incast_{n}.yaml."""
    exp, _ = load(EXAMPLES / f"dcqcn_incast_{n}.yaml")
    q = exp.switches[0].qos.queue(3)
    wire = exp.packet_bytes + exp.header_bytes + exp.gap_bytes
    return Incast(n, exp.links[0].speed, q.kmin, q.kmax, q.pmax, exp.dcqcn, exp.packet_bytes, wire)


def fluid_header(n: int) -> str:
    """The fixed point an incast file's header quotes."""
    model = _incast_file(n)
    share = model.line / n / 1e9
    return (
        f"The fluid model's fixed point: each flow at {share:g} Gb/s on the wire, queue "
        f"{model.fixed_point() / 1e3:.1f} KB."
    )


def dcqcn_fairness() -> str:
    """The N = 2 and N = 10 incasts over 50-100 ms, seeds 1-6: mean queue and the largest
    deviation of a flow's mean rate from its fair share."""
    from labs.sim.engine import simulate

    rows = [
        "| | fluid fixed point | mean queue, seeds 1-6 "
        "| largest per-flow rate deviation from the fair share, seeds 1-6 |",
        "|---|---|---|---|",
    ]
    for n in (2, 10):
        exp, _ = load(EXAMPLES / f"dcqcn_incast_{n}.yaml")
        model = _incast_file(n)
        fair = model.line * model.payload / model.wire / n
        queues, devs = [], []
        for seed in range(1, 7):
            result = simulate(exp, seed)
            queues.append(result.mean_queue(exp.monitor.ports[0], 3, 0.05, 0.1))
            rates = [result.mean_rate(f.name, 0.05, 0.1) for f in result.flows]
            devs.append(max(abs(r - fair) / fair for r in rates))
        fixed = model.fixed_point()
        mean = sum(queues) / len(queues)
        rows.append(
            f"| N = {n} | {fixed / 1e3:.1f} KB, {model.line / n / 1e9:g} Gb/s on the wire "
            f"| {', '.join(f'{q / 1e3:.1f}' for q in queues)} KB (mean {mean / 1e3:.1f}, "
            f"{(mean - fixed) / fixed * 100:+.1f} %) "
            f"| {', '.join(f'{d * 100:.1f}' for d in devs)} % |"
        )
    return "\n".join(rows)


def _incast_8(name: str) -> Result:
    from labs.sim.engine import simulate

    exp, seed = load(EXAMPLES / f"{name}.yaml")
    return simulate(exp, seed or 1)


def incast_8_headroom() -> str:
    """The headroom the formula gives the 8:1 incast's lossless PGs."""
    exp, _ = load(EXAMPLES / "pfc_incast_8.yaml")
    link = exp.links[0]
    frame = exp.packet_bytes + exp.header_bytes
    return f"{headroom_bytes(link.speed, link.length_m, frame):,} B".replace(",", " ")


def incast_8_header() -> str:
    """The sentence pfc_incast_8_undersized.yaml's header quotes the formula's headroom in."""
    return f"The headroom formula gives these links {incast_8_headroom()} per lossless PG."


def pfc_incast_8() -> str:
    """The 8:1 PFC incast with the formula's headroom and with 5 KB."""
    sized, small = _incast_8("pfc_incast_8"), _incast_8("pfc_incast_8_undersized")
    done = max(f.completion or 0.0 for f in sized.flows)
    delivered = sum(f.bytes_delivered for f in sized.flows)
    return (
        f"headroom by the headroom formula (physics.md 1.3) ({incast_8_headroom()} per lossless "
        f"PG) gives **{sized.total('drops_lossless'):.0f} lossless drops**, "
        f"{sized.total('pause_sent'):.0f} pause frames, all {delivered / 1e6:.0f} MB delivered "
        f"in {done * 1e3:.2f} ms; with 5 KB of headroom (`pfc_incast_8_undersized.yaml`): "
        f"**{small.total('drops_lossless'):.0f} lossless drops**."
    )


BLOCKS: dict[str, Callable[[], str]] = {
    "pfc-incast-8": pfc_incast_8,
    "incast-8-headroom": incast_8_header,
    "headroom-sweep": headroom_sweep,
    "ring-sweep": ring_sweep,
    "dcqcn-64": dcqcn_64,
    "dcqcn-fairness": dcqcn_fairness,
    "fluid-2": lambda: fluid_header(2),
    "fluid-10": lambda: fluid_header(10),
}
"""Each marked block's name and what computes it."""
