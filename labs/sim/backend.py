"""The simulator backend behind `labs.backend.Backend`: the lab's data plane, packet by packet.

"Deploying" reads the lab directory into the simulator's network (`labs.sim.lab`: every
switch port's QoS, buffers, WRED/ECN, schedulers and PFC watchdog, every NIC's RDMA and
DCQCN settings, the cables) and records the twin in the lab's state; nothing runs between
scenarios. A scenario is played at once in simulated time (`play`): its timeline becomes one
experiment (`labs.sim.timeline`), the C core runs it, and its outputs become the run's
observations (`labs.sim.played`). `twin fault` records a failure in the twin's state, as on
the fake backend (`labs.failures`); a scenario starts from the failures recorded.

It observes FIBs (the routing model's, under the faults in force), port counters, flows,
queues, PFC, ECN, and deadlock and watchdog events; not BGP sessions, captures or probes.
"""

from __future__ import annotations

import gc
import time
from typing import TYPE_CHECKING, Any, ClassVar

from labs.backend import (
    Deployed,
    Phase,
    Played,
    Progress,
    Timeline,
    quiet,
)
from labs.failures import Failures, Network
from labs.modelled import ModelledBackend, ModelledObserver
from labs.sim import heap
from labs.sim import lab as simlab
from labs.sim.engine import simulate
from labs.sim.played import played
from labs.sim.timeline import plan, scaled
from twin.errors import LabError
from twin.lab.directory import Lab, version
from twin.model.fib import Fib

if TYPE_CHECKING:
    from labs.state import Record


def run(
    lab: Lab,
    timeline: Timeline,
    progress: Progress = quiet,
    fibs: list[tuple[float, str, Fib]] | None = None,
) -> Played:
    """Simulate a timeline (its times scaled by `sim.time_scale`) on a lab; FIBs from the
    routing model, or `fibs` ((simulated time, label, FIB), the first at 0) as a live twin
    recorded them."""
    started = time.monotonic()
    heap.map_large_blocks()
    timeline = scaled(timeline)
    net, base = network(lab)
    p = plan(lab, timeline, net, base, fibs)
    gc.freeze()  # what is loaded lives to the end: the collector need not walk it again
    k = float(timeline.sim.get("time_scale", 1.0))
    progress(
        f"simulating {p.n_flows} flows on {len(net.links)} links "
        f"for up to {timeline.duration * 1e3:g} ms of simulated time"
        + (f" (the scenario's times x {k:.2g})" if k != 1 else "")
    )
    result = simulate(
        p.experiment,
        int(timeline.sim.get("seed", 1)),
        lambda built: p.prepare(built, base.wiring, net.addresses),
        dense=False,
    )
    wall = time.monotonic() - started
    progress(
        f"simulated {result.end_time * 1e3:.3f} ms: {result.packet_hops} packet hops "
        f"in {wall:.1f} s"
    )
    out = played(timeline, p, result, base, wall)
    gc.freeze()
    return out


def network(lab: Lab) -> tuple[simlab.Network, Network]:
    """The lab's network as the simulator models it, and its routing under the failures
    recorded in its twin (`twin fault`). Kept while the same `Lab`'s files (its design and
    every config: `twin.lab.directory.version`) and its failures stay as they are, so that plays
    one after the other build them once (a drill's worker, a case after the other); built
    fresh, not kept, while one of its files was just written. Callers never change them."""
    failures = Failures.load(lab)
    try:
        design = version(lab.path / "design.json", time.time_ns())
    except OSError:
        design = None  # the network says what is missing
    stamp = (design, lab.configs_stamp(), failures)
    kept = _KEPT[0] if _KEPT else None
    if kept is not None and kept[0] is lab and kept[1] == stamp:
        return kept[2]
    built = simlab.network(lab), Network(lab, failures)
    _KEPT[:] = [(lab, stamp, built)] if design is not None and stamp[1] is not None else []
    return built


_KEPT: list[tuple[Lab, tuple[Any, ...], tuple[simlab.Network, Network]]] = []
"""The last lab's network and routing, with the `Lab` and the versions they were built from."""


class SimBackend(ModelledBackend):
    """A lab's data plane in the packet-level simulator."""

    name: ClassVar[str] = "sim"
    claims_name: ClassVar[bool] = False
    computed: ClassVar[bool] = True
    capabilities: ClassVar[frozenset[str]] = frozenset(
        {"fib", "counters", "flows", "queues", "pfc", "ecn", "deadlock", "iterations"}
    )

    def create(
        self, lab: Lab, record: Record, progress: Progress = quiet, timeout: float | None = None
    ) -> Deployed:
        """Read the lab into the simulator's network (refusing what it cannot model), kept
        for the play that follows (`network`)."""
        start = time.monotonic()
        progress("reading the configs into the simulator")
        net, _ = network(lab)
        seconds = round(time.monotonic() - start, 2)
        return Deployed(
            lab.name,
            self.name,
            len(net.switches) + len(net.hosts),
            0,
            seconds,
            {"links": len(net.links)},
        )

    def observer(self, lab: Lab) -> ModelledObserver:
        """The FIBs of the lab's configs."""
        return ModelledObserver(lab)

    def traffic(self, lab: Lab, phase: Phase) -> Any:
        """Refused: traffic is played in simulated time by `play`."""
        raise LabError(f"the sim backend plays {phase.label} in simulated time only (twin run)")

    def play(self, lab: Lab, timeline: Timeline, progress: Progress = quiet) -> Played:
        """The whole timeline in simulated time (with the live twin's FIBs, when given)."""
        return run(lab, timeline, progress, timeline.fibs)
