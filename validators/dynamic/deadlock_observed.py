"""`deadlock_observed`: no cyclic buffer dependency in the FIBs the live twin really held.

The static `deadlock` check computes the FIBs the configs converge to; this one reads the
FIB snapshots a run took of every node (at the start, after each fault and at the end) and
builds the same buffer dependency graph of each lossless priority from them,
so routes the real control plane installed during failures are judged too.
"""

from __future__ import annotations

from twin.lab.directory import Lab
from twin.scenario.observations import Observations
from validators.dynamic.no_deadlock import snapshots
from validators.registry import Params, dynamic
from validators.result import Figure, Result
from validators.static.deadlock import Located, priorities, verdicts

NAME = "deadlock_observed"


@dynamic(NAME, needs={"fib"}, max_cycles=10)
def check(lab: Lab, obs: Observations, params: Params) -> list[Result]:
    """One result per lossless priority over every snapshot of the run."""
    taken = snapshots(lab, obs, int(params["max_cycles"]))
    found: list[Located] = []
    prios: set[int] = set()
    queues: dict[int, int] = {}
    for s in taken:
        for p in priorities(lab, s.graph):
            prios.add(p)
            queues[p] = max(queues.get(p, 0), sum(q[2] == p for q in s.graph.vertices))
        found += [(c, f"FIB {s.label}") for c in s.cycles]
    figures: dict[int, dict[str, Figure]] = {
        p: {"snapshots": len(taken), "queues": queues.get(p, 0)} for p in sorted(prios)
    }
    return verdicts(NAME, sorted(prios), found, ", observed FIBs", figures)
