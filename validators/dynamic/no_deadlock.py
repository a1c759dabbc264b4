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

from twin.configs.buffer_graph import BufferGraph, Cycle
from twin.labdir import Lab
from twin.model.wiring import Wiring
from twin.scenario.observations import Observations
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


def predicted(lab: Lab, wiring: Wiring, obs: Observations, limit: int) -> list[tuple[str, Cycle]]:
    """The static check's cycles in every FIB snapshot of the run."""
    marks = dscps(lab)
    out = []
    for label in obs.fib_labels():
        for cycle in BufferGraph(wiring, obs.fib(label), marks).cycles(limit):
            out.append((label, cycle))
    return out


def _name(queues: list[Queue]) -> str:
    return " -> ".join(f"{s}:{p}:{q}" for s, p, q in [*queues, queues[0]])


@dynamic(NAME, needs={"deadlock", "fib"}, max_cycles=10)
def check(lab: Lab, obs: Observations, params: Params) -> list[Result]:
    """Deadlock events, and their agreement with the static buffer dependency graph."""
    wiring = Wiring(lab)
    locks = [e for e in obs.events if e["event"] == "deadlock"]
    cycles = [[ingress(wiring, m) for m in e.get("cycle", [])] for e in locks]
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
    static = predicted(lab, wiring, obs, int(params["max_cycles"]))
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
