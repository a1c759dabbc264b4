"""`lossless_isolation`: bulk traffic stays out of the lossless priorities, and the lossless
priorities lose nothing.

The article's incident: a backup job marked into the RoCE class filled the lossless queue and
its PFC pauses spread hop by hop, so All-Reduce latency spiked. Each flow's path is every
switch port it can enter (every ECMP branch of the FIB the configs converge to, from its
source server to its destination); at each, the DSCPs the flow was observed with (sent and
received, as far as the receiver's counts tell flows apart: `dscp_preserved.received`) are
classified as that port's config does (DSCP_TO_TC_MAP through PORT_QOS_MAP, `global` as
fallback; lossless when PORT_QOS_MAP `pfc_enable` has the TC): where bulk traffic went.

Loss is judged against the intent, never the config under test: a flow the intent makes
lossless (its class's TC is among `qos.lossless_priorities`, or it was sent with such a
class's DSCP) may lose nothing outside faults, whichever switch's config says otherwise; the
lossy flows of a class may lose at most its `loss_budget_percent` when the intent gives one
(by default none: best effort, reported).
"""

from __future__ import annotations

from collections import Counter

from twin.configs.qos import pfc_enabled, traffic_class
from twin.lab.directory import Lab
from twin.model import routing
from twin.model.fib import Lookup
from twin.model.wiring import Wiring
from twin.scenario.observations import Observations
from twin.scenario.records import FlowRecord
from validators.dynamic import dscp_preserved
from validators.dynamic.failover import fault_began, restoring, spans
from validators.registry import Params, dynamic
from validators.result import Figure, Finding, Result, Status, merged, verdict

NAME = "lossless_isolation"
NOT_BULK = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "ecmp_probe")
"""Phases that are not bulk traffic: the collectives, and an ECMP probe (no flows of its own)."""

Ingress = tuple[str, str]
"""A switch and the physical port a packet enters it by."""


def ingresses(wiring: Wiring, find: Lookup, src: str, dst: str) -> set[Ingress]:
    """Every switch port a packet from server `src` to server `dst` may enter (every ECMP
    branch of the FIB `find` looks up)."""
    address = int(wiring.hosts[dst].address.ip)
    seen: set[Ingress] = set()
    todo = [src]
    visited = {src}
    while todo:
        here = todo.pop()
        for hop in find(here, address) or ():
            far = wiring.far(here, hop.port)
            if far is None or far[0] not in wiring.routers:
                continue
            seen.update((far[0], port) for port in wiring.physical(*far))
            if far[0] not in visited:
                visited.add(far[0])
                todo.append(far[0])
    return seen


def lossless_at(wiring: Wiring, point: Ingress, dscp: int) -> int | None:
    """The PFC priority a DSCP gets entering a switch port, or None when it is lossy there."""
    db = wiring.configs[point[0]]
    tc = traffic_class(db, point[1], dscp)
    return tc if tc in pfc_enabled(db, point[1]) else None


def _received(obs: Observations) -> dict[int, set[int]]:
    """Per flow (by `id`), the DSCPs it arrived with (`dscp_preserved.received`)."""
    return {
        id(f): dscp_preserved.received(f, group)
        for group in dscp_preserved.groups(obs.flows).values()
        for f in group
    }


class _Paths:
    """Flows' paths in the FIB the lab's configs converge to, cached per server pair."""

    def __init__(self, lab: Lab, obs: Observations) -> None:
        converged = routing.shared(lab)
        self.wiring = converged.w
        self.received = _received(obs)
        self.find = Lookup(converged.fib)
        self._paths: dict[tuple[str, str], set[Ingress]] = {}

    def __call__(self, flow: FlowRecord) -> set[Ingress]:
        key = (flow["src"], flow["dst"])
        if key not in self._paths:
            self._paths[key] = ingresses(self.wiring, self.find, *key)
        return self._paths[key]


def _bulk(obs: Observations, paths: _Paths, bulk: set[str]) -> list[Finding]:
    """Bulk flows that enter a lossless priority somewhere on their path."""
    kinds = {p["label"]: p["kind"] for p in obs.run["phases"]}
    findings = []
    for flow in obs.flows:
        if flow["phase"] not in bulk:
            continue
        for switch, port in sorted(paths(flow)):
            for dscp in sorted({int(flow["dscp_sent"])} | paths.received[id(flow)]):
                prio = lossless_at(paths.wiring, (switch, port), dscp)
                if prio is not None:
                    message = (
                        f"{kinds[flow['phase']]} phase {flow['phase']} enters with DSCP "
                        f"{dscp}: lossless priority {prio}, shared with the collectives"
                    )
                    findings.append(Finding(switch, message, port, "PORT_QOS_MAP"))
    return merged(list(dict.fromkeys(findings)))


def _storms(obs: Observations) -> list[tuple[float, float]]:
    """Per `pfc-storm` fault: from when it fired to the run's end. What a storm costs (the
    PFC watchdog drops the stormed queue's packets until it restores it) is
    `pfc_watchdog_behaviour`'s to judge, not loss outside faults."""
    margin = float(obs.run.get("fault_margin", 0.5))
    end = float(obs.run.get("ended", 0.0)) + 60
    return [
        (fault_began(f) - margin, end)
        for f in obs.run.get("faults", [])
        if f["fault"] == "pfc-storm"
    ]


def _unexplained(obs: Observations, flow: FlowRecord) -> int:
    """Packets a flow lost that no fault explains: gaps that began outside every fault's
    span (see `failover.spans`), while a restore's routing settled (`failover.restoring`)
    or from a PFC storm on (`_storms`), and its tail when no fault was in force at the end."""
    windows = [(start, until) for _, start, until in spans(obs)] + restoring(obs) + _storms(obs)
    lost = 0
    for t, missing in flow.get("gaps", []):
        began = t - missing / flow["pps"]
        if not any(start <= began < until for start, until in windows):
            lost += int(missing)
    ended = obs.run.get("ended", 0.0)
    if not any(start <= ended < until for start, until in windows):
        lost += int(flow.get("tail_lost", 0))
    return lost


def lossless_by_intent(lab: Lab, flow: FlowRecord) -> bool:
    """Whether the intent makes a flow lossless: its class is, or the DSCP it was sent with
    is a lossless class's (what hosts mark decides where the fabric puts it)."""
    qos = lab.fabric.qos
    dscps = {c.dscp for name, c in qos.classes.items() if qos.lossless(name)}
    return qos.lossless(flow["class"]) or int(flow["dscp_sent"]) in dscps


def _loss(lab: Lab, obs: Observations, cls: str, flows: list[FlowRecord]) -> Result:
    """Loss of one class outside faults, against the intent: none on lossless flows, at most
    the class's loss budget on lossy ones."""
    classes = lab.fabric.qos.classes
    budget = classes[cls].loss_budget_percent if cls in classes else None
    sent: Counter[str] = Counter()
    lost: Counter[str] = Counter()
    findings, worst = [], (0, flows[0])
    for flow in flows:
        kind = "lossless" if lossless_by_intent(lab, flow) else "lossy"
        gone = _unexplained(obs, flow)
        sent[kind] += int(flow["sent"])
        lost[kind] += gone
        if kind == "lossless" and gone:
            message = f"{gone} packets lost outside any fault (lossless by the intent)"
            findings.append(
                Finding(f"{flow['src']}->{flow['dst']}", message, f"qp{flow['qp']}", flow["phase"])
            )
        elif gone > worst[0]:
            worst = (gone, flow)
    share = 100 * lost["lossy"] / sent["lossy"] if sent["lossy"] else 0.0
    if budget is not None and share > budget:
        f = worst[1]
        message = f"class {cls} lost {share:.2f} % outside faults > budget {budget:g} %"
        findings.append(Finding(f"{f['src']}->{f['dst']}", message, f"qp{f['qp']}", f["phase"]))
    parts = [
        f"{kind} {lost[kind]} of {sent[kind]} packets lost ({100 * lost[kind] / sent[kind]:.2f} %)"
        for kind in ("lossless", "lossy")
        if sent[kind]
    ]
    figures: dict[str, Figure] = {
        f"{kind}_{what}": counts[kind]
        for kind in ("lossless", "lossy")
        for what, counts in (("sent", sent), ("lost", lost))
    }
    figures["budget_percent"] = "none" if budget is None else budget
    limit = "no budget: best effort" if budget is None else f"budget {budget:g} %"
    ok = "; ".join(parts) + " outside faults" + (f" ({limit})" if sent["lossy"] else "")
    resent = _resent([f for f in flows if not lossless_by_intent(lab, f)])
    if resent:
        figures |= resent
        ok += (
            f"; a reliable transport resent {resent['lossy_retransmitted']} "
            f"({resent['lossy_timeouts']} timeouts) for {resent['lossy_goodput_gbps']} Gb/s "
            "of goodput"
        )
    return verdict(NAME, f"loss {cls}", findings, ok, figures)


def _resent(flows: list[FlowRecord]) -> dict[str, Figure]:
    """What the lossy flows that a transport made reliable (a simulator's `tcp`) resent, the
    timeouts they waited for and the goodput they got; empty when none was."""
    reliable = [f for f in flows if f.get("transport", "open") != "open"]
    if not reliable:
        return {}
    return {
        "lossy_retransmitted": sum(int(f.get("retransmitted", 0)) for f in reliable),
        "lossy_timeouts": sum(int(f.get("timeouts", 0)) for f in reliable),
        "lossy_goodput_gbps": round(sum(float(f.get("goodput_bps", 0)) for f in reliable) / 1e9, 1),
    }


@dynamic(NAME, needs={"flows"}, allow_incast=False)
def check(lab: Lab, obs: Observations, params: Params) -> list[Result]:
    """Scope `bulk`: no flow of a bulk phase (backup, micro-bursts, incast unless
    `allow_incast`) enters a lossless priority at any port of its path, by the DSCPs it was
    seen with. Scope `loss CLASS` per class: packets lost outside faults, none by flows the
    intent makes lossless, at most the class's `loss_budget_percent` (when set) by its lossy
    ones.

    A gap in a flow's sequence belongs to a fault when it began in the fault's span (as
    `failover` counts it): the failover verdict judges that loss, not this one.
    """
    if not obs.flows:
        return [Result(NAME, "bulk", Status.NOT_OBSERVABLE, "the scenario sent no traffic")]
    kinds = {p["label"]: p["kind"] for p in obs.run["phases"]}
    bulk = {
        label
        for label, kind in kinds.items()
        if kind not in NOT_BULK and not (kind == "incast" and params["allow_incast"])
    }
    results = []
    if bulk:
        findings = _bulk(obs, _Paths(lab, obs), bulk)
        ok = f"{len(bulk)} bulk phases stay out of the lossless priorities on every port"
        figures = {"bulk_phases": len(bulk), "ports_in_lossless": len(findings)}
        results.append(verdict(NAME, "bulk", findings, ok, figures))
    else:
        reason = "no bulk phase in the scenario"
        results.append(Result(NAME, "bulk", Status.NOT_OBSERVABLE, reason))
    by_class: dict[str, list[FlowRecord]] = {}
    for flow in obs.flows:
        by_class.setdefault(flow["class"], []).append(flow)
    results += [_loss(lab, obs, cls, flows) for cls, flows in sorted(by_class.items())]
    return results
