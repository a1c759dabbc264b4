"""A scenario's timeline as one simulator experiment: the lab's network, every phase's flows
(collectives with their step dependencies), the faults and the FIBs that follow them.

- A collective runs its schedule (`traffic.collectives`) `iterations` times from its `at`:
  a rank's flow of step k starts once the flows of step k-1 into it and out of it are done
  (it forwards what it received, one queue pair at a time), and iteration i+1 starts once
  every flow of iteration i is done (a zero-byte barrier flow marks the end). Its flows are
  RoCE (DCQCN, ECN-capable) when its class is `roce`, open loop otherwise; `gbps` caps them.
- backup and incast flows send from `at` for `duration` at `gbps` (line rate without it);
  micro_bursts send `burst` seconds at that rate every `period`. Class `roce`: DCQCN flows;
  any other class: sources without ECN (storage, backup), whatever DSCP they carry.
- Transports (`sim.roce_transport`, `sim.lossy_transport`): class `roce` flows are open
  loop by default, or RoCEv2 reliable connections (rc: ACKs, NAK and go-back-N, the local
  ACK timeout); the others TCP-like (tcp: halving on loss, retransmissions), so a lossy class
  backs off under loss, or open loop; `open` sends without acknowledgement (what is lost is
  lost).
- Faults: link-down/up (every physical link a `NODE:PORT` or `NODE:PEER` names), link-flap
  (`count` times down for half a `period`), node-down/up (all its links), rate (the link's
  speed from then on; clear restores it and ends a loss), pfc-storm (the port `NODE:PORT`
  sends pauses on `priority` for `duration`), loss (data frames arriving at either end of the
  link lost with probability `percent`, for `duration`). Daemon faults change no cable: a
  killed routing daemon only changes the FIBs.
- FIBs: the routing model's (`labs.failures`: the configs' routing under the failures
  in force), each taking effect `convergence` seconds after the fault that changed it; or the
  FIB snapshots a live twin recorded (`fibs`), each at its time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from ipaddress import IPv4Address
from typing import Any

import numpy as np
import numpy.typing as npt

from labs.backend import Fault, Phase, Timeline
from labs.failures import CHANGES_ROUTING, Network, resolve
from labs.sim import native
from labs.sim.build import Built
from labs.sim.flows import TRANSPORTS, FlowTable, Replay, Ring
from labs.sim.lab import Network as SimNetwork
from labs.sim.lab import routes
from labs.sim.model import Checks, Experiment, Monitor, PacketLoss, PfcStorm
from labs.sim.routing import RouteRows, route_rows
from traffic.collectives import RingShape, StepTable, ring_shape
from twin.lab.directory import Lab
from twin.model.fib import Fib, Link
from twin.model.wiring import Wiring, links
from twin.scenario.plan import SCHEDULES
from twin.scenario.plan import schedule as plan_schedule
from twin.scenario.records import fib_label

MAX_SAMPLES = 2000
COLLECTIVE_GRACE = 1.0
"""Seconds a collective may run past the timeline's end (the run ends when every flow has)."""


@dataclass
class Plan:
    """The experiment and what the backend needs to add to the core and read back."""

    experiment: Experiment
    """Its flows are the rows of its `table`, phase after phase."""
    phase_of: npt.NDArray[np.int32]
    """Per row of the experiment's table: the phase it plays."""
    flow_of: npt.NDArray[np.int64]
    """Per row: the phase's flow id it carries data of (-1: a collective's barrier)."""
    barriers: dict[int, list[int]]
    """Per collective phase played as rows, the row of the barrier flow ending each iteration."""
    collectives: dict[int, tuple[int, list[int]]] = field(default_factory=dict)
    """Per collective phase the core makes (`Experiment.collectives`): its index there and the
    phase's flow id each slot carries (-1: none)."""
    link_events: list[tuple[float, str, bool]] = field(default_factory=list)
    """(time, `node:port` of one end, up)."""
    rate_events: list[tuple[float, str, float]] = field(default_factory=list)
    fibs: list[tuple[float, str, Fib]] = field(default_factory=list)
    """(time, label, FIB) in time order; the first, at 0, is the one the run starts with."""
    notes: list[str] = field(default_factory=list)
    """What the simulator did not model, one line each."""

    @property
    def n_flows(self) -> int:
        """The engine flows the experiment runs."""
        table = self.experiment.table
        return len(self.experiment.flows) + (0 if table is None else len(table))

    def prepare(self, built: Built, wiring: Wiring, addresses: dict[str, IPv4Address]) -> None:
        """Add the timed link, rate and route changes to a built core (each distinct FIB's
        route rows made once)."""
        lib = native.library()
        layout = built.layout
        link_of = {end: i for i, pair in enumerate(layout.links) for end in pair}
        for t, port, up in self.link_events:
            lib.sim_add_link_event(built.handle, link_of[port], t, int(up))
        for t, port, speed in self.rate_events:
            lib.sim_add_rate_event(built.handle, link_of[port], t, speed)
        index = {f"{n}:{p}": i for i, (n, p) in enumerate(layout.ports)}
        hosts = [h.name for h in self.experiment.hosts]
        nodes = [s.name for s in self.experiment.switches] + hosts
        first = (self.fibs[0][2], {s.name: s.routes for s in self.experiment.switches})
        made: list[tuple[Fib, RouteRows]] = []  # a FIB equal to one before takes its rows
        for t, _, fib in self.fibs[1:]:  # (a link back up: as before it went down)
            rows = next((r for f, r in made if f == fib), None)
            if rows is None:
                rows = route_rows(routes(wiring, fib, addresses, first), nodes, hosts, index)
                made.append((fib, rows))
            lib.sim_add_route_rows(built.handle, t, rows.n_dest, *native.rows(rows), len(rows.hops))


def scaled(timeline: Timeline) -> Timeline:
    """The timeline with every time multiplied by its `sim.time_scale` (1: unchanged)."""
    k = float(timeline.sim.get("time_scale", 1.0))
    if k == 1.0:
        return timeline

    def times(x: float | None) -> float | None:
        return None if x is None else x * k

    phases = [
        dataclasses.replace(
            p, at=p.at * k, duration=p.duration * k, period=times(p.period), burst=times(p.burst)
        )
        for p in timeline.phases
    ]
    faults = [
        (at * k, dataclasses.replace(f, period=f.period * k, duration=times(f.duration)))
        for at, f in timeline.faults
    ]
    return dataclasses.replace(
        timeline, duration=timeline.duration * k, phases=phases, faults=faults
    )


def _rdma(phase: Phase) -> bool:
    return phase.traffic_class == "roce"


def _waits(steps: StepTable, n_ranks: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """What each row of a schedule waits for, and its barrier (the last row): a row waits
    for the rows of the step before (the last one with rows) that its source sent or
    received in, or for -1 (the barrier of the iteration before) when there are none; the
    barrier waits for the last step's rows. As counts per row and the rows, concatenated."""
    m = len(steps)
    counts = np.zeros(m + 1, np.int64)
    parts: list[npt.NDArray[np.int64]] = []
    bounds = steps.bounds()
    previous = np.zeros(0, np.int64)
    for k in range(steps.n_steps):
        current = np.arange(bounds[k], bounds[k + 1], dtype=np.int64)
        if not len(current):
            continue
        src = steps.src[current]
        # (rank, row) of each rank the previous step's rows touch, by rank then row
        p_src, p_dst = steps.src[previous], steps.dst[previous]
        other = p_dst != p_src
        rank = np.concatenate([p_src, p_dst[other]])
        row = np.concatenate([previous, previous[other]])
        order = np.lexsort((row, rank))
        touched = row[order]
        per_rank = np.bincount(rank, minlength=n_ranks)
        first = np.cumsum(per_rank) - per_rank
        found = per_rank[src]
        n = np.maximum(found, 1)
        counts[current] = n
        at = np.repeat(first[src], n) + (np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n))
        waited = touched[np.minimum(at, len(touched) - 1)] if len(touched) else at
        parts.append(np.where(np.repeat(found > 0, n), waited, -1))
        previous = current
    counts[m] = len(previous)
    parts.append(previous)
    return counts, np.concatenate(parts)


class _Flows:
    """The phases' engine flows as table rows, named `p<phase>.<...>` (`labs.sim.flows`)."""

    def __init__(self, timeline: Timeline, hosts: Sequence[str]) -> None:
        self.timeline = timeline
        self.host = {h: i for i, h in enumerate(hosts)}
        self.tables: list[FlowTable] = []
        self.phase_of: list[npt.NDArray[np.int32]] = []
        self.flow_of: list[npt.NDArray[np.int64]] = []
        self.rows = 0
        self.barriers: dict[int, list[int]] = {}
        self.collectives: list[Ring | Replay] = []
        self.collective_ids: dict[int, tuple[int, list[int]]] = {}

    def add(self, phase: Phase, table: FlowTable, flow_ids: npt.ArrayLike) -> None:
        self.tables.append(table)
        self.phase_of.append(np.full(len(table), phase.index, np.int32))
        self.flow_of.append(np.asarray(flow_ids, np.int64))
        self.rows += len(table)

    def _columns(self, phase: Phase, src: Sequence[str]) -> dict[str, Any]:
        """Class-dependent columns of flows from `src`."""
        rdma = _rdma(phase)
        options = self.timeline.sim
        transport = (
            options.get("roce_transport", "open") if rdma else options.get("lossy_transport", "tcp")
        )
        return {
            "dscp": [phase.dscp[s] for s in src],
            "dcqcn": rdma,
            "ecn_capable": rdma,
            "rate": phase.gbps * 1e9 if phase.gbps else 0.0,
            "transport": TRANSPORTS.index(transport),
        }

    def collective(self, phase: Phase) -> None:
        """A ring the core makes step by step (`ring`), else the schedule's rows, each
        iteration ended by a zero-byte barrier row: two iterations' copies the core replays
        (`Replay`), or `iterations` copies (a reliable transport, or `collectives: table`)."""
        build = SCHEDULES.get((phase.kind, phase.algorithm), SCHEDULES[(phase.kind, "ring")])
        qps = self.timeline.sim.get("qps") or max([f.qp for f in phase.flows] + [0]) + 1
        tabled = phase.rails or phase.groups
        shape = None if tabled else ring_shape(build, phase.ranks, phase.message or 0, qps)
        in_core = self.timeline.sim.get("collectives", "core") == "core"
        open_loop = self._columns(phase, [])["transport"] == 0
        if in_core and shape is not None and phase.iterations and open_loop:
            self.ring(phase, shape)
            return
        schedule = plan_schedule(
            phase.kind,
            phase.algorithm,
            phase.ranks,
            phase.rails,
            phase.message or 0,
            qps,
            phase.groups,
        )
        steps, ranks = schedule.table, schedule.ranks
        m = len(steps)
        # one iteration: its rows then the barrier, and what each waits for (rows of the
        # iteration; -1 the barrier of the iteration before, for rows that wait for no step)
        waits, relative = _waits(steps, len(ranks))
        starts = np.cumsum(waits) - waits
        first = np.zeros(m + 1, np.bool_)
        first[waits > 0] = relative[starts[waits > 0]] == -1
        rank_host = np.array([self.host[r] for r in ranks], np.int32)
        src = np.append(rank_host[steps.src], self.host[ranks[0]])
        dst = np.append(rank_host[steps.dst], self.host[ranks[1 % len(ranks)]])
        names = np.array(ranks, dtype=object)
        rows = zip(
            steps.step.tolist(),
            names[steps.src].tolist(),
            names[steps.dst].tolist(),
            steps.qp.tolist(),
            strict=True,
        )
        tails = np.array([f"s{k}.{a}>{b}.{qp}" for k, a, b, qp in rows] + ["end"], np.bytes_)
        columns = self._columns(phase, [*names[steps.src].tolist(), ranks[0]])
        columns["dscp"][m] = 26  # the barrier: an open-loop flow of Flow's defaults
        barrier = np.arange(m + 1) == m
        heads, counts, afters = [], [], []
        replay = in_core and open_loop and phase.iterations >= 2
        n = 2 if replay else phase.iterations
        for it in range(n):
            base = it * (m + 1)
            heads.append(np.char.add(f"p{phase.index}.i{it}.".encode(), tails))
            counts.append(np.where(first, 0, waits) if it == 0 else waits)
            afters.append(relative[relative >= 0] if it == 0 else relative + base)
        table = FlowTable.of(
            np.concatenate(heads) if n else [],
            np.tile(src, n),
            np.tile(dst, n),
            size=np.tile(np.append(steps.bytes, 0), n),
            start=phase.at,
            dscp=np.tile(columns["dscp"], n),
            dcqcn=np.tile(~barrier & columns["dcqcn"], n),
            ecn_capable=np.tile(~barrier & columns["ecn_capable"], n),
            rate=np.tile(np.where(barrier, 0.0, columns["rate"]), n),
            transport=np.tile(np.where(barrier, 0, columns["transport"]), n),
            after_start=np.concatenate([[0], np.cumsum(np.concatenate(counts))]) if n else [0],
            after=np.concatenate(afters) if n else [],
        )
        ids = {(f.src, f.dst, f.qp): f.flow_id for f in phase.flows}
        keys = (steps.src.astype(np.int64) * len(ranks) + steps.dst) * qps + steps.qp
        unique, inverse = np.unique(keys, return_inverse=True)
        found = [
            ids.get((ranks[k // qps // len(ranks)], ranks[k // qps % len(ranks)], k % qps), -1)
            for k in unique.tolist()
        ]
        flow_ids = np.append(np.array(found, np.int64)[inverse.reshape(-1)], -1)
        if replay:
            self.collectives.append(
                Replay(
                    first_row=self.rows,
                    names=tails.tolist(),
                    src=src,
                    dst=dst,
                    deps=waits.astype(np.int32),
                    woken=np.flatnonzero(first).astype(np.int32),
                    iterations=phase.iterations,
                    phase=phase.index,
                )
            )
            self.collective_ids[phase.index] = (len(self.collectives) - 1, flow_ids.tolist())
            self.add(phase, table, np.full(len(table), -1, np.int64))
            return
        self.barriers[phase.index] = [self.rows + it * (m + 1) + m for it in range(n)]
        self.add(phase, table, np.tile(flow_ids, n))

    def ring(self, phase: Phase, shape: RingShape) -> None:
        """The ring's slots (rank r's QP q: step 0 of iteration 0) as rows, the rest made
        by the core (`labs.sim.flows.Ring`)."""
        ranks, qps, n = shape.ranks, shape.qps, len(shape.ranks)
        pairs = [(ranks[r], ranks[(r + 1) % n], q) for r in range(n) for q in range(qps)]
        src = [a for a, _, _ in pairs]
        parts = [c // qps + (q < c % qps) for c in shape.chunks for q in range(qps)]
        table = FlowTable.of(
            [f"p{phase.index}.i0.s0.{a}>{b}.{q}".encode() for a, b, q in pairs],
            [self.host[a] for a in src],
            [self.host[b] for _, b, _ in pairs],
            size=parts,
            start=phase.at,
            **self._columns(phase, src),
        )
        self.collectives.append(
            Ring(
                first_row=self.rows,
                hosts=np.array([self.host[r] for r in ranks], np.int32),
                qps=qps,
                n_steps=shape.n_steps,
                iterations=phase.iterations,
                phase=phase.index,
                chunks=np.array(shape.chunks, np.int64),
            )
        )
        ids = {(f.src, f.dst, f.qp): f.flow_id for f in phase.flows}
        self.collective_ids[phase.index] = (
            len(self.collectives) - 1,
            [ids.get(p, -1) for p in pairs],
        )
        self.add(phase, table, np.full(len(table), -1, np.int64))

    def open_loop(self, phase: Phase) -> None:
        spans = [(phase.at, phase.at + phase.duration)]
        if phase.kind == "micro_bursts" and phase.period and phase.burst:
            n = int(phase.duration / phase.period + 1e-9)
            spans = [
                (phase.at + k * phase.period, phase.at + k * phase.period + phase.burst)
                for k in range(max(1, n))
            ]
        rows = [(f, b, span) for f in phase.flows for b, span in enumerate(spans)]
        table = FlowTable.of(
            [f"p{phase.index}.b{b}.{f.src}>{f.dst}.{f.qp}".encode() for f, b, _ in rows],
            [self.host[f.src] for f, _, _ in rows],
            [self.host[f.dst] for f, _, _ in rows],
            start=[start for _, _, (start, _) in rows],
            stop=[stop for _, _, (_, stop) in rows],
            **self._columns(phase, [f.src for f, _, _ in rows]),
        )
        self.add(phase, table, [f.flow_id for f, _, _ in rows])

    def table(self) -> FlowTable | None:
        return FlowTable.concat(self.tables) if self.tables else None


def _node_links(lab: Lab, node: str) -> list[Link]:
    return [link for link in links(lab) if node in (link[0], link[2])]


class _Faults:
    """Link, rate and storm events and the FIB epochs of the faults."""

    def __init__(self, lab: Lab, base: Network, net: SimNetwork, timeline: Timeline) -> None:
        self.lab, self.net, self.timeline = lab, net, timeline
        self.speeds = {(x.a, x.b): x.speed for x in net.links}
        self.plan_links: list[tuple[float, str, bool]] = []
        self.rates: list[tuple[float, str, float]] = []
        self.storms: list[PfcStorm] = []
        self.losses: list[PacketLoss] = []
        self.fibs: list[tuple[float, str, Fib]] = [(0.0, "start", base.fib)]
        self.notes: list[str] = []
        held = set(base.failures.nodes)
        self.down: set[Link] = {tuple(x) for x in base.failures.links}  # type: ignore[misc]
        self.down |= {x for x in links(lab) if {x[0], x[2]} & held}
        self.plan_links += [(0.0, f"{a}:{ap}", False) for a, ap, _, _ in sorted(self.down)]
        self.current = base

    def _set(self, t: float, named: Sequence[Link], up: bool) -> None:
        for link in named:
            if up == (link in self.down):
                self.plan_links.append((t, f"{link[0]}:{link[1]}", up))
                (self.down.discard if up else self.down.add)(link)

    def fire(self, index: int, t: float, fault: Fault, convergence: float) -> None:
        w = self.current.wiring
        match fault.kind:
            case "link-down" | "link-up":
                self._set(t, resolve(self.lab, w, str(fault.link)), fault.kind == "link-up")
            case "node-down" | "node-up":
                self._set(t, _node_links(self.lab, str(fault.node)), fault.kind == "node-up")
            case "link-flap":
                named = resolve(self.lab, w, str(fault.link))
                for k in range(fault.count):
                    self._set(t + k * fault.period, named, False)
                    self._set(t + (k + 0.5) * fault.period, named, True)
            case "rate" | "clear":
                for a, ap, b, bp in resolve(self.lab, w, str(fault.link)):
                    speed = self.speeds.get((f"{a}:{ap}", f"{b}:{bp}"), 0.0)
                    if fault.kind == "rate" and fault.mbit:
                        speed = min(speed, fault.mbit * 1e6)
                    self.rates.append((t, f"{a}:{ap}", speed))
                    if fault.kind == "clear":
                        self.losses = [
                            dataclasses.replace(x, end=t)
                            if x.port in (f"{a}:{ap}", f"{b}:{bp}") and (x.end or t) >= t
                            else x
                            for x in self.losses
                        ]
            case "pfc-storm":
                port = str(fault.link)
                node, _, name = port.partition(":")
                member = w.physical(node, name)[0]
                end = t + fault.duration if fault.duration else self.timeline.duration
                self.storms.append(PfcStorm(f"{node}:{member}", t, end, (fault.priority,)))
            case "loss":
                until = t + fault.duration if fault.duration else None
                p = (fault.percent or 0.0) / 100
                for a, ap, b, bp in resolve(self.lab, w, str(fault.link)):
                    for port in (f"{a}:{ap}", f"{b}:{bp}"):
                        if any(x.port == port for x in self.losses):
                            self.notes.append(f"fault {index + 1} loss: {port} already lossy")
                        else:
                            self.losses.append(PacketLoss(port, t, until, p))
        if fault.kind in CHANGES_ROUTING:
            self.current = self.current.after(fault)
            label = fib_label(index, fault.kind)
            self.fibs.append((t + convergence, label, self.current.fib))


def plan(
    lab: Lab,
    timeline: Timeline,
    net: SimNetwork,
    base: Network,
    fibs: list[tuple[float, str, Fib]] | None = None,
) -> Plan:
    """The experiment of a timeline on the lab's network, FIBs from the routing model (or
    `fibs`: (time, label, FIB) from a live twin, the first at 0)."""
    options: dict[str, Any] = timeline.sim
    packet = int(options.get("packet_bytes", 4096))
    flows = _Flows(timeline, [h.name for h in net.hosts])
    skipped = []
    for phase in timeline.phases:
        if phase.kind == "ecmp_probe":
            skipped.append(f"{phase.label}: ecmp_probe not played (ECMP is judged on a live twin)")
        elif phase.ranks and phase.message:
            flows.collective(phase)
        else:
            flows.open_loop(phase)
    faults = _Faults(lab, base, net, timeline)
    convergence = float(options.get("convergence", 0.0005))
    for index, (t, fault) in enumerate(sorted(timeline.faults, key=lambda f: f[0])):
        faults.fire(index, t, fault, convergence)
    interval = max(float(options.get("sample_interval", 1e-5)), _horizon(timeline) / MAX_SAMPLES)
    switches = [
        dataclasses.replace(s, routes=r)
        for s, r in zip(
            net.switches, _tables(base.wiring, (fibs or faults.fibs)[0][2], net), strict=True
        )
    ]
    experiment = Experiment(
        switches=switches,
        hosts=net.hosts,
        links=net.links,
        table=flows.table(),
        collectives=flows.collectives,
        faults=[*net.down, *faults.storms, *faults.losses],
        dcqcn=net.dcqcn,
        duration=timeline.duration
        + (COLLECTIVE_GRACE if flows.barriers or flows.collectives else 0.0),
        packet_bytes=packet,
        monitor=Monitor(interval=interval, flows=False, max_samples=MAX_SAMPLES),
        checks=Checks(
            deadlock=True,
            stall=float(options.get("deadlock_stall", 0.001)),
            pause_storm=float(options.get("pause_storm", 0.001)),
            stop_on_deadlock=True,
        ),
        name=timeline.scenario,
    )
    return Plan(
        experiment=experiment,
        phase_of=np.concatenate(flows.phase_of or [np.zeros(0, np.int32)]),
        flow_of=np.concatenate(flows.flow_of or [np.zeros(0, np.int64)]),
        barriers=flows.barriers,
        collectives=flows.collective_ids,
        link_events=faults.plan_links,
        rate_events=faults.rates,
        fibs=fibs or faults.fibs,
        notes=[*skipped, *faults.notes],
    )


def _horizon(timeline: Timeline) -> float:
    """When the last timed event happens (a collective's end is not known in advance)."""
    ends = [p.at + p.duration for p in timeline.phases if not (p.ranks and p.message)]
    ends += [t + (f.duration or 0.0) for t, f in timeline.faults]
    return max(ends, default=0.0)


def _tables(wiring: Wiring, fib: Fib, net: SimNetwork) -> list[dict[str, Sequence[str]]]:
    table = routes(wiring, fib, net.addresses)
    return [table.get(s.name, {}) for s in net.switches]
