"""Which of a run's traffic crossed a fault: the evidence a verdict on the fault stands on.

A flow of a traffic phase crossed a fault when its phase was sending when the fault began
(between the phase's `start` and `end` in run.json: for a collective on the simulator, when
its last flow was done) and, where the run took FIB snapshots, some path of it (every ECMP
branch of the snapshot in force: before a fault that takes something away, after one that
gives it back) goes through the faulted element: a link by either end, a node. Without
snapshots, running at the fault is enough. A fault no flow crossed was not exercised by the
scenario's traffic: a verdict on it has nothing to stand on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import NamedTuple

from labs.failures import resolve
from twin.lab.directory import Lab
from twin.model.fib import Hops, Lookup
from twin.model.wiring import Wiring, shared
from twin.scenario.observations import Observations
from twin.scenario.records import FaultRecord, FlowRecord, PhaseRecord

Port = tuple[str, str]
GIVES_BACK = ("link-up", "node-up", "daemon-restart", "clear")
"""Faults judged on the FIB after them (the paths the element carries again)."""


@dataclass(frozen=True)
class Crossing:
    """The flows that crossed a fault, or why none did."""

    flows: list[FlowRecord]
    why: str


def _at(seconds: float, obs: Observations) -> str:
    """A time of the run, from its start (ms below a second: a simulator's run).

    >>> from types import SimpleNamespace as N
    >>> _at(12.5, N(run={"started": 2.0})), _at(0.0095, N(run={"started": 0.0}))
    ('10.5 s', '9.5 ms')
    """
    t = seconds - float(obs.run.get("started", 0.0))
    return f"{t:.3g} s" if abs(t) >= 1 else f"{t * 1e3:.3g} ms"


def _snapshot(obs: Observations, fault: FaultRecord) -> str | None:
    """The FIB snapshot in force for the fault's paths: the last taken after an earlier
    fault (or its own, for one that gives something back), else `start`."""
    labels = obs.fib_labels()
    if not labels:
        return None
    index = int(fault.get("index", -1))
    own = fault.get("fault") in GIVES_BACK
    after = obs.run.get("fib_faults", {})
    found = [(i, label) for label, i in after.items() if i < index or (own and i == index)]
    return max(found)[1] if found else ("start" if "start" in labels else None)


def _element(lab: Lab, wiring: Wiring, fault: FaultRecord) -> tuple[set[Port], str | None]:
    """The ports (node, port: physical and logical) and the node a fault acts on."""
    ends = [tuple(end.split(":", 1)) for end in fault.get("ends", [])]
    if not ends and fault.get("link"):
        for a, a_port, b, b_port in resolve(lab, wiring, str(fault["link"])):
            ends += [(a, a_port), (b, b_port)]
    ports = {(str(n), str(p)) for n, p in ends}
    return ports | {(n, wiring.logical(n, p)) for n, p in ports}, fault.get("node")


class _Fars(NamedTuple):
    """Where a node sends one list of next hops: each hop's port and the (node, logical
    port) at its far end (None: not cabled), the nodes at those ends, and the list itself
    (kept while its identity is a key)."""

    ends: list[tuple[str, tuple[str, str] | None]]
    nodes: frozenset[str]
    hops: Hops


class _Hits:
    """Whether a flow's packets may go through a fault's element (`ends`: ports, physical
    and logical; `node`) in one FIB: whether some node its packets reach (by every ECMP
    branch from its source, the destination not passed through) forwards over one of the
    ports, or the node is reached. Found backwards, per destination: the nodes next to the
    element that forward over it toward the destination, then the neighbours forwarding to
    those, and so on (a walk of the few nodes upstream of the element, not of every flow's
    paths: a large fabric's flows' paths are millions of hops)."""

    def __init__(self, wiring: Wiring, hops: Lookup, ends: set[Port], node: str | None) -> None:
        self.wiring, self.ends, self.node = wiring, ends, node
        self.hops = hops
        self.near: dict[str, set[str]] = {}
        for (a, _), (b, _) in wiring.cable.items():
            self.near.setdefault(a, set()).add(b)
        cabled = {a for (a, _), (b, q) in wiring.cable.items() if (b, wiring.logical(b, q)) in ends}
        near = {node, *self.near.get(node, ())} if node is not None else set()
        self.candidates = sorted({n for n, _ in ends} | cabled | near)
        """The only nodes that can forward over the element or to the node: those of its
        ports, those cabled to them (whose far end, `Wiring.far`, is one) and the node's
        neighbours."""
        self._up: dict[str, set[str]] = {}
        self._far: dict[tuple[str, int], _Fars] = {}

    def _fars(self, here: str, address: int) -> _Fars:
        """Each next hop's port and the (node, logical port) at its far end, and the nodes
        at those ends (once per node and list of next hops, known by identity: a node sends
        most destinations over a few lists, which a FIB's routes share)."""
        hops = self.hops(here, address) or ()
        fars = self._far.get((here, id(hops)))
        if fars is None:
            ends = [(hop.port, self.wiring.far(here, hop.port)) for hop in hops]
            nodes = frozenset(far[0] for _, far in ends if far is not None)
            fars = self._far[here, id(hops)] = _Fars(ends, nodes, hops)
        return fars

    def _forwards_over(self, here: str, address: int) -> bool:
        """Whether `here` sends toward `address` over the element or to the node."""
        return any(
            (here, port) in self.ends
            or (far is not None and (far in self.ends or far[0] == self.node))
            for port, far in self._fars(here, address).ends
        )

    def _upstream(self, dst: str) -> set[str]:
        """The nodes other than `dst` whose packets toward `dst` reach the element."""
        if dst not in self._up:
            address = int(self.wiring.hosts[dst].address.ip)
            up = {x for x in self.candidates if x != dst and self._forwards_over(x, address)}
            todo = list(up)
            nexts: dict[str, frozenset[str]] = {}  # a node's next nodes toward dst, looked up once
            while todo:
                here = todo.pop()
                for y in self.near.get(here, ()):
                    if y == dst or y in up:
                        continue
                    if y not in nexts:
                        nexts[y] = self._fars(y, address).nodes
                    if here in nexts[y]:
                        up.add(y)
                        todo.append(y)
            self._up[dst] = up
        return self._up[dst]

    def __call__(self, src: str, dst: str) -> bool:
        if src == self.node:
            return True
        up = self._upstream(dst)
        if src != dst:
            return src in up
        address = int(self.wiring.hosts[dst].address.ip)  # a flow to itself: its own hops
        return self._forwards_over(src, address) or any(
            node in up for node in self._fars(src, address).nodes
        )


def crossed(lab: Lab, obs: Observations, fault: FaultRecord, began: float) -> Crossing:
    """The flows of the scenario's traffic that crossed a fault begun at `began`."""
    phases: list[PhaseRecord] = obs.run.get("phases", [])
    running = {
        p["label"] for p in phases if p["flows"] and float(p["start"]) <= began <= float(p["end"])
    }
    if not running:
        spans = ", ".join(
            f"{p['label']} {_at(float(p['start']), obs)}-{_at(float(p['end']), obs)}"
            for p in phases
            if p["flows"]
        )
        return Crossing(
            [],
            f"no traffic was running when it fired at {_at(began, obs)} "
            f"({spans or 'the scenario sent none'})",
        )
    flows = [f for f in obs.flows if f["phase"] in running]
    label = _snapshot(obs, fault)
    if label is None:
        return Crossing(flows, "")
    wiring, fib = shared(lab), obs.fib(label)

    def make() -> Crossing:
        ends, node = _element(lab, wiring, fault)
        # one Lookup per snapshot: the faults judged on one FIB share its nodes' tables
        crosses = _Hits(wiring, obs.derived(("lookup", id(fib)), lambda: Lookup(fib)), ends, node)
        hit = [flow for flow in flows if crosses(flow["src"], flow["dst"])]
        what = node or fault.get("link") or ", ".join(sorted(f"{a}:{b}" for a, b in ends))
        return Crossing(
            hit,
            "" if hit else f"no flow of {', '.join(sorted(running))} was routed through {what}",
        )

    # `failover` asks for a fault once per verdict on it and once for the convergence: one
    # walk (an observed FIB and the flows read are one object per content for the life of
    # `obs`, the shared wiring one per version of the lab's files)
    fault_key = json.dumps(fault, sort_keys=True)
    key = ("crossed", wiring, id(obs.flows), id(fib), fault_key, tuple(sorted(running)))
    return obs.derived(key, make)
