"""`no_deadlock`: no PFC deadlock formed, and where one did, it is the cycle the buffer
dependency graph predicts.

- `run`: no `deadlock` event (a cycle of paused, non-empty queues that did not move for the
  simulator's stall time); a deadlock fails, naming its cycle as ingress queues
  `switch:port:priority` (the queue each paused egress feeds, as the static check names them).
- `agreement`: the cycles the static `deadlock` check finds in the FIBs the run held (every
  snapshot: with faults, the routes in force after them) against the deadlocks the run
  formed: a deadlock outside every predicted cycle fails (the static check missed it); a
  predicted cycle that did not lock passes, saying so (traffic did not close it).
"""

from __future__ import annotations

from dataclasses import dataclass

from twin.configs.buffer_graph import BufferGraph, Cycle
from twin.lab.directory import Lab
from twin.model.fib import Fib, delta
from twin.model.wiring import Wiring, shared
from twin.scenario.observations import Observations
from twin.scenario.records import Event
from validators.registry import Params, dynamic
from validators.result import Finding, Result, Status, verdict
from validators.static.deadlock import dscps

NAME = "no_deadlock"
Queue = tuple[str, str, int]


def ingress(wiring: Wiring, member: str) -> Queue:
    """The ingress queue an egress queue `node:port:priority` feeds (its peer's port)."""
    node, port, prio = member.rsplit(":", 2)
    peer = wiring.cable.get((node, port))
    if peer is None:
        return (node, wiring.logical(node, port), int(prio))
    return (peer[0], wiring.logical(*peer), int(prio))


@dataclass(frozen=True)
class Snapshot:
    """A FIB snapshot of the run: its label, its buffer dependency graph and the static
    check's cycles in it."""

    label: str
    graph: BufferGraph
    cycles: list[Cycle]


def snapshots(lab: Lab, obs: Observations, limit: int) -> list[Snapshot]:
    """Every FIB snapshot of the run in time order, with at most `limit` cycles each; made
    once per run, lab configs, FIBs and limit (`no_deadlock` and `deadlock_observed` share
    them), one graph per distinct FIB (snapshots where no route changed share one); a
    later graph is not searched when the first has no cycle and the change from the first
    may close none (`_stays_acyclic`)."""
    fibs = [(label, obs.fib(label)) for label in obs.fib_labels()]

    def make() -> list[Snapshot]:
        wiring, marks = shared(lab), dscps(lab)
        made: dict[int, tuple[BufferGraph, list[Cycle]]] = {}
        out = []
        for label, fib in fibs:
            if id(fib) not in made:
                graph = BufferGraph(wiring, fib, marks)
                first = made[id(fibs[0][1])] if made else None
                acyclic = first is not None and _stays_acyclic(*first, fib)
                made[id(fib)] = (graph, [] if acyclic else graph.cycles(limit))
            out.append(Snapshot(label, *made[id(fib)]))
        return out

    stamp = lab.configs_stamp()
    if stamp is None:  # a config just written: nothing kept
        return make()
    # an observed FIB is one object per content for the life of `obs`: its id names it
    fib_ids = tuple((label, id(fib)) for label, fib in fibs)
    return obs.derived(("buffer graphs", str(lab.path), stamp, fib_ids, limit), make)


def _stays_acyclic(first: BufferGraph, cycles: list[Cycle], fib: Fib) -> bool:
    """Whether a FIB's graph has no cycle, known from the first snapshot's: that one has
    none, and the traffic the change sends somewhere new closes none in the old and new
    dependencies together (`BufferGraph.may_close_cycle`, as the static `deadlock` judges a
    failure; a superset of the new graph, so False is a proof). False, and the cycles
    found the long way, when a node routes in the FIB and not in the first."""
    if cycles or not fib.keys() <= first.fib.keys():
        return False
    return not first.may_close_cycle(first.gains(delta(first.fib, fib)))


def predicted(lab: Lab, obs: Observations, limit: int) -> list[tuple[str, Cycle]]:
    """The static check's cycles in every FIB snapshot of the run."""
    return [(s.label, cycle) for s in snapshots(lab, obs, limit) for cycle in s.cycles]


def formed(lab: Lab, locks: list[Event]) -> list[list[Queue]]:
    """Each deadlock event's cycle as ingress queues (the wiring is read only if one formed)."""
    if not locks:
        return []
    wiring = shared(lab)
    return [[ingress(wiring, m) for m in e.get("cycle", [])] for e in locks]


def _name(queues: list[Queue]) -> str:
    return " -> ".join(f"{s}:{p}:{q}" for s, p, q in [*queues, queues[0]])


@dynamic(NAME, needs={"deadlock", "fib"}, max_cycles=10)
def check(lab: Lab, obs: Observations, params: Params) -> list[Result]:
    """Deadlock events, and their agreement with the static buffer dependency graph."""
    locks = [e for e in obs.events if e["event"] == "deadlock"]
    cycles = formed(lab, locks)
    findings = [
        Finding(
            c[0][0],
            f"deadlock at {float(e.get('sim_t', e['t'])) * 1e3:.3f} ms: {_name(c)}",
            c[0][1],
            f"priority {c[0][2]}",
        )
        for e, c in zip(locks, cycles, strict=True)
        if c
    ]
    results = [
        verdict(NAME, "run", findings, "no deadlock formed", {"deadlocks": len(locks)}),
    ]
    static = predicted(lab, obs, int(params["max_cycles"]))
    figures: dict[str, int | float | str] = {"predicted": len(static), "observed": len(cycles)}
    if not static and not cycles:
        results.append(
            Result(NAME, "agreement", Status.PASS, "none predicted, none formed", figures)
        )
        return results
    missed = [
        Finding(c[0][0], f"formed {_name(c)}, which no predicted cycle contains", c[0][1])
        for c in cycles
        if c and not any(set(c) <= set(cycle.component) for _, cycle in static)
    ]
    matched = [
        f"{label}: {cycle}"
        for label, cycle in static
        if any(c and set(c) <= set(cycle.component) for c in cycles)
    ]
    if matched:
        ok = f"the deadlock is the predicted cycle ({matched[0]})"
    elif static:
        ok = f"predicted {static[0][0]}: {static[0][1]}; traffic did not lock it in this run"
    else:
        ok = "none predicted"
    results.append(verdict(NAME, "agreement", missed, ok, figures))
    return results
