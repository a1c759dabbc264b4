"""The fake backend behind `labs.backend.Backend`: no root, no processes, no packets.

Deploying records the twin in the lab's state; its FIBs are what the routing model
(`twin.model.routing`) computes from the lab's configs, recomputed when a fault takes links,
nodes or routing daemons down. A scenario is played at once in model time
(`labs.fake.simulate`): deterministic per-flow results and port counters, and failover
probes pinned through each fault it models (`labs.fake.probes`).

What it cannot observe, and says so through its capabilities: BGP sessions and their
events, packet captures, probes, queues, PFC, ECN, latency, DSCP rewriting.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar

from labs import events
from labs.backend import Deployed, quiet
from labs.failures import Failures, Network
from labs.fake import probes
from labs.fake.simulate import Simulation
from labs.modelled import ModelledBackend, ModelledObserver
from twin.lab.directory import Lab
from twin.model.wiring import links

if TYPE_CHECKING:
    from labs.backend import Phase, Played, Progress, Timeline
    from labs.state import Record


class FakeObserver(ModelledObserver):
    """`labs.backend.Observer` of a fake twin: its FIB, and the faults logged while watching."""

    @contextmanager
    def watch(self) -> Iterator[list[dict[str, Any]]]:
        """The faults logged while inside (the fake sees no BGP or route events)."""
        since, seen = time.time(), list[dict[str, Any]]()
        try:
            yield seen
        finally:
            seen += [e for e in events.read(self.lab.path, since) if e["event"] != "fault"]


class FakeTraffic:
    """A phase's flows, counted as sent at their rate (played for real only by `play`)."""

    def __init__(self, phase: Phase) -> None:
        self.phase = phase

    def start(self) -> None:
        """Nothing to start."""

    def stop(self) -> dict[int, int]:
        """Packets each flow sends in the phase."""
        n = int(float(self.phase.pps or 0) * self.phase.duration)
        return {f.flow_id: n for f in self.phase.flows} | {
            p.flow_id: n * p.flows for p in self.phase.probe
        }


class FakeBackend(ModelledBackend):
    """A lab as the routing model sees it."""

    name: ClassVar[str] = "fake"
    claims_name: ClassVar[bool] = False
    computed: ClassVar[bool] = True
    capabilities: ClassVar[frozenset[str]] = frozenset(
        {"fib", "counters", "flows", "failover-probes"}
    )

    def create(
        self, lab: Lab, record: Record, progress: Progress = quiet, timeout: float | None = None
    ) -> Deployed:
        """Compute the twin's converged FIB, with no failures."""
        start = time.monotonic()
        progress("computing the FIBs from the configs")
        net = Network(lab, Failures())
        net.failures.save(lab)
        seconds = round(time.monotonic() - start, 2)
        return Deployed(
            lab.name,
            self.name,
            lab.graph.number_of_nodes(),
            len(net.routing.sessions),
            seconds,
            {"links": len(links(lab)), "routes": sum(len(r) for r in net.fib.values())},
        )

    def observer(self, lab: Lab) -> FakeObserver:
        """The twin's FIB."""
        return FakeObserver(lab)

    def traffic(self, lab: Lab, phase: Phase) -> FakeTraffic:
        """A phase's flows, counted as sent."""
        return FakeTraffic(phase)

    def play(self, lab: Lab, timeline: Timeline, progress: Progress = quiet) -> Played:
        """The whole timeline at once, in model time from now; the twin keeps the failures
        the timeline leaves."""
        net = Network(lab, Failures.load(lab))
        progress(f"simulating {len(timeline.phases)} phases and {len(timeline.faults)} faults")
        sim = Simulation(lab, timeline, net, time.time())
        sim.run()
        sim.epochs[-1].net.failures.save(lab)
        records = None
        if timeline.failover_probes is not None:  # before the counters, which count them
            records = probes.probe(sim, timeline.failover_probes)
        played = sim.played()
        if records is not None:
            played.extra["failover_probes"] = records
        return played
