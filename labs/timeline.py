"""Play a timeline against the wall clock with a backend's verbs (netns, clab).

Threads on one clock: each traffic phase starts its flows (`backend.traffic`) at its `at` and
stops them after its `duration`; the faults fire in time order (`backend.fault`), each
followed by a FIB snapshot; a sampler reads every port's counters once before the run starts
and then each `sample_interval`; the observer logs BGP and route changes meanwhile. What a
backend observes besides (received flows, probes, captures) it adds to the `Played` record
this returns; a backend that acts around each fault (failover probes) passes `FaultHooks`:
`before`, called `PREPARE_S` seconds before the fault is due (and never before the previous
fault's verb has returned), and `after`, once the fault's verb has returned.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any, Protocol, cast

from labs import events
from labs.backend import (
    COUNTER_FIELDS,
    Backend,
    Fault,
    Observer,
    Phase,
    Played,
    Progress,
    Timeline,
    Traffic,
)
from twin.errors import LabError
from twin.lab.directory import Lab
from twin.model.fib import Fib
from twin.scenario.records import Event, FaultRecord, PhaseRecord, Sample, fib_label

SETTLE_BEFORE_SNAPSHOT = 0.5
PREPARE_S = 3.0


class FaultHooks(Protocol):
    """What a backend does around each fault of a timeline (by the fault's index)."""

    def before(self, index: int, fault: Fault, due: float) -> None:
        """Just before the fault, due at `due` (epoch seconds); the fault waits for it."""

    def after(self, index: int, fault: Fault) -> None:
        """Once the fault's verb has returned."""


class _Sampler(threading.Thread):
    """Reads every port's counters each interval."""

    def __init__(self, observer: Observer, interval: float) -> None:
        super().__init__(name="sampler", daemon=True)
        self.observer, self.interval = observer, interval
        self.samples: list[Sample] = []
        self.stopped = threading.Event()

    def sample(self) -> None:
        """One sample, stamped when its read ended (a slow read holds later values).

        The stamp is not rounded: rounded to 0.1 ms, the baseline read just before the run's
        start could be stamped after it.
        """
        counters = self.observer.counters()
        self.samples.append({"t": time.time(), "c": counters})

    def run(self) -> None:
        next_at = time.monotonic()
        while True:
            next_at += self.interval
            if self.stopped.wait(max(0.0, next_at - time.monotonic())):
                break
            self.sample()
        self.sample()


class _Run:
    """What the timeline's threads record, under one lock."""

    def __init__(
        self,
        backend: Backend,
        lab: Lab,
        observer: Observer,
        progress: Progress,
        hooks: FaultHooks | None = None,
    ) -> None:
        self.backend, self.lab, self.observer, self.progress = backend, lab, observer, progress
        self.hooks = hooks
        self.phases: list[PhaseRecord] = []
        self.faults: list[FaultRecord] = []
        self.fibs: dict[str, tuple[float, Fib]] = {}
        self.errors: list[str] = []
        self.snapshots: list[threading.Thread] = []
        self.lock = threading.Lock()

    def snapshot(self, label: str) -> None:
        """Take every node's FIB under a label, in the background (the timeline keeps time)."""

        def take(t: float) -> None:
            fib = self.observer.fib()
            with self.lock:
                self.fibs[label] = (t, fib)

        thread = threading.Thread(
            target=self.guarded, args=(take, time.time()), name=f"fib-{label}", daemon=True
        )
        thread.start()
        self.snapshots.append(thread)

    def guarded(self, target: Callable[..., None], *args: Any) -> None:
        """Run a thread's work, keeping its error for the run to raise."""
        try:
            target(*args)
        except Exception as exc:  # raised by play() once every thread has ended
            with self.lock:
                self.errors.append(f"{type(exc).__name__}: {exc}")

    def play_phase(self, phase: Phase, traffic: Traffic, t0: float) -> None:
        """Start a phase's prepared flows at its time and stop them after its duration."""
        time.sleep(max(0.0, t0 + phase.at - time.time()))
        flows = len(phase.flows) + sum(p.flows for p in phase.probe)
        self.progress(f"t={time.time() - t0:5.1f}s  {phase.label}: {flows} flows")
        start = time.time()
        traffic.start()
        time.sleep(max(0.0, start + phase.duration - time.time()))
        sent = traffic.stop()
        record: PhaseRecord = {
            "index": phase.index,
            "label": phase.label,
            "kind": phase.kind,
            "start": start,
            "end": time.time(),
            "pps_per_flow": phase.pps,
            "dscp": dict(phase.dscp),
            "class": phase.traffic_class,
            "flows": [
                {"flow_id": f.flow_id, "src": f.src, "dst": f.dst, "qp": f.qp} for f in phase.flows
            ],
            "sent": {str(fid): n for fid, n in sent.items()},
        }
        if phase.probe:
            record["probe"] = [asdict(p) for p in phase.probe]
        with self.lock:
            self.phases.append(record)

    def play_faults(self, faults: list[tuple[float, Fault]], t0: float) -> None:
        """Fire the faults in time order, each followed by a FIB snapshot."""
        for index, (at, fault) in enumerate(sorted(faults, key=lambda f: f[0])):
            if self.hooks is not None:
                time.sleep(max(0.0, t0 + at - PREPARE_S - time.time()))
                self.hooks.before(index, fault, t0 + at)
            time.sleep(max(0.0, t0 + at - time.time()))
            target = fault.link or fault.node
            self.progress(f"t={time.time() - t0:5.1f}s  fault {fault.kind} {target}")
            began = time.time()
            record = self.backend.fault(self.lab, fault)
            if self.hooks is not None:
                self.hooks.after(index, fault)
            with self.lock:
                self.faults.append(cast(FaultRecord, {"index": index, "began": began, **record}))
            time.sleep(SETTLE_BEFORE_SNAPSHOT)
            self.snapshot(fib_label(index, fault.kind))


def play(
    backend: Backend,
    lab: Lab,
    timeline: Timeline,
    progress: Progress,
    hooks: FaultHooks | None = None,
) -> Played:
    """Play the timeline on a running twin; flows, probes and files are left to the backend."""
    observer = backend.observer(lab)
    run = _Run(backend, lab, observer, progress, hooks)
    sampler = _Sampler(observer, timeline.sample_interval)
    bgp_start = observer.bgp()
    progress(f"preparing {len(timeline.phases)} traffic phases")
    prepared = [(phase, backend.traffic(lab, phase)) for phase in timeline.phases]
    run.snapshot("start")
    sampler.sample()  # the baseline, before any traffic (and the observer's first lookups)
    try:
        with observer.watch():
            t0 = time.time()
            events.append(lab.path, "run-start", scenario=timeline.scenario)
            sampler.start()
            threads = [
                threading.Thread(
                    target=run.guarded, args=(run.play_phase, phase, traffic, t0), daemon=True
                )
                for phase, traffic in prepared
            ]
            threads.append(
                threading.Thread(
                    target=run.guarded, args=(run.play_faults, timeline.faults, t0), daemon=True
                )
            )
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            time.sleep(max(0.0, t0 + timeline.duration - time.time()))
            sampler.stopped.set()
            sampler.join()
            t1 = time.time()
    finally:
        sampler.stopped.set()
    run.snapshot("end")
    for thread in run.snapshots:
        thread.join()
    if run.errors:
        raise LabError(f"scenario {timeline.scenario} failed: " + "; ".join(run.errors))
    return Played(
        started=t0,
        ended=t1,
        phases=sorted(run.phases, key=lambda p: p["index"]),
        faults=sorted(run.faults, key=lambda f: f["index"]),
        flows=[],
        counters={
            "interval": timeline.sample_interval,
            "fields": COUNTER_FIELDS,
            "samples": sampler.samples,
        },
        fibs=run.fibs,
        bgp={"start": bgp_start, "end": observer.bgp()},
        # the lab's log keeps only objects with a numeric `t` and a string `event`: Events
        events=cast(list[Event], events.read(lab.path, since=t0)),
    )
