"""`deadlock`: no cyclic buffer dependency in the lossless classes, before and after failures."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import combinations

from twin.configs.buffer_graph import BufferGraph, Cycle
from twin.configs.qos import host_dscps
from twin.lab.directory import Lab
from twin.model.fib import Fib, FibDelta, Link
from twin.model.routing import Routing, shared
from twin.model.wiring import links
from validators.registry import Params, static
from validators.result import Figure, Finding, Result, verdict

Located = tuple[Cycle, str]
"""A cycle and where it shows: the FIB it comes from or the failure that closes it."""


def dscps(lab: Lab) -> set[int]:
    """Every DSCP the servers mark, and 0 (unmarked traffic)."""
    return {0}.union(*host_dscps(lab).values())


def priorities(lab: Lab, graph: BufferGraph) -> list[int]:
    """The intent's lossless priorities and any other the configs make lossless."""
    return sorted(set(lab.fabric.qos.lossless_priorities) | {q[2] for q in graph.vertices})


def verdicts(
    validator: str,
    prios: list[int],
    cycles: list[Located],
    suffix: str,
    figures: Mapping[int, Mapping[str, Figure]],
) -> list[Result]:
    """One result per lossless priority (with its figures), failing with every cycle through
    it."""
    results = []
    for p in prios:
        findings = [
            Finding(c.queues[0][0], str(c), c.queues[0][1], where)
            for c, where in cycles
            if any(q[2] == p for q in c.queues)
        ]
        ok = "no cyclic buffer dependency"
        results.append(verdict(validator, f"priority {p}{suffix}", findings, ok, figures[p]))
    return results


def link_name(link: Link) -> str:
    """`node:port-node:port`."""
    return f"{link[0]}:{link[1]}-{link[2]}:{link[3]}"


def apply_delta(fib: Fib, delta: FibDelta) -> Fib:
    """The FIB with a failure's changes applied."""
    changed = {
        n: {p: h for p, h in {**fib[n], **d}.items() if h is not None} for n, d in delta.items()
    }
    return {**fib, **changed}


def failure_cycles(
    routing: Routing,
    graph: BufferGraph,
    cycles: list[Cycle],
    sets: Iterable[tuple[Link, ...]],
    limit: int,
) -> tuple[list[Located], dict[str, int]]:
    """The cycles that failing each set of links closes and the graph had not (`cycles`),
    with counts: sets checked, sets that send traffic somewhere new, sets rechecked exactly."""
    known = [set(c.component) for c in cycles]
    found: list[Located] = []
    counts = {"failure_sets": 0, "rerouting": 0, "rechecked": 0}
    for failed in sets:
        counts["failure_sets"] += 1
        delta = routing.after(failed)
        extra = graph.gains(delta)
        if not extra:
            continue
        counts["rerouting"] += 1
        if not graph.may_close_cycle(extra):
            continue
        counts["rechecked"] += 1
        after = BufferGraph(graph.w, apply_delta(routing.fib, delta), set(graph.dscps))
        where = " + ".join(map(link_name, failed)) + " down"
        found += [
            (c, where) for c in after.cycles(limit) if not any(set(c.component) <= k for k in known)
        ]
    return found, counts


@static("deadlock", failures=1, max_cycles=10)
def deadlock(lab: Lab, params: Params) -> list[Result]:
    """No cyclic buffer dependency in any lossless priority, with all links up and after
    every set of `failures` (1) links fails.

    The FIB is the one the configs converge to (`twin.routing.Routing`); the graph is physics.md
    section 4.2 (`twin.configs.buffer_graph`). With all links up, each priority's result lists
    its cycles (at most `max_cycles`, 10) as (switch, port, priority) rings with flows that
    close them. Then every single link (`failures` 1; 2 for every pair, 0 for none) fails and
    the routing reconverges; a failure whose FIB closes a new cycle is a finding (for
    instance routes that bounce from a spine down through a leaf and up again).

    >>> from validators.examples import tiny_lab
    >>> from validators.registry import get
    >>> results = deadlock(tiny_lab(), get("deadlock").params({}))
    >>> [(r.scope, r.status.value) for r in results]
    [('priority 3', 'pass'), ('priority 3, 1-link failures', 'pass')]
    """
    routing = shared(lab)
    graph = BufferGraph(routing.w, routing.fib, dscps(lab))
    prios = priorities(lab, graph)
    base = graph.cycles(params["max_cycles"])
    cycles = [(c, "FIB") for c in base]
    figures = {
        p: {"queues": sum(q[2] == p for q in graph.vertices), "classes": len(graph.classes)}
        for p in prios
    }
    results = verdicts("deadlock", prios, cycles, "", figures)
    k = params["failures"]
    if k:
        sets = combinations(links(lab), k)
        found, counts = failure_cycles(routing, graph, base, sets, params["max_cycles"])
        each = dict.fromkeys(prios, counts)
        results += verdicts("deadlock", prios, found, f", {k}-link failures", each)
    return results
