"""`failover`: how much traffic each fault cost, how long until it flowed again, whether
any flow stayed black-holed, and what giving the element back cost, judged from probe flows
pinned through the faulted element.

For each fault that takes something away (link down or flap, node down, daemon kill, loss,
rate), the backend probed it (`failover_probes.json`, capability "failover-probes"): flows
at 1,000 pps or more that, traced on the twin just before the fault, crossed the faulted
element, sending from before the fault until the next one. The loss window is the longest
run of packets any probe flow lost from the fault on, in ms at its rate (1 ms at 1,000 pps);
recovery is the time from the fault until the last such run closed. Fails above the loss
limit or `recovery_s` (default 5); fails "never recovered" when a probe flow was still
losing everything when its probe ended (a run of at least `OPEN_TAIL_S`), or got through
again only once the next fault had begun (a `clear` or `link-up` ended the loss, not the
fabric). A pass names the ports the probe flows crossed; without probe flows through the
element (the backend cannot pin them, or no flow crosses it) the fault is not-observable,
saying why. The collective flows' worst gap during the fault is kept as a secondary figure
(`flows_loss_window_ms`, at their own, coarser, rate).

A fault that gives back what the fault right before it took (`RESTORES`: `link-up` of its
link, `node-up` of its node) is judged from that fault's probe flows, which the backend
followed until they crossed the element again (`restore` in their record): they may lose
at most `max_loss_ms` (default `margin_ms`) from the restore until the next fault, and none
may be black-holed once back; not-observable when none came back in time or another fault
came between. Scopes are numbered by the run's faults, in time order.

The loss limit is `max_loss_ms` when given; by default (0) it is the intent's failover
budget, never the timers of the configs under test: `failover.link_ms` for a link, flap or
node that goes down, `failover.gray_ms` for a gray failure (daemon kill, loss, rate); both
default to BFD's detection (3 x 300 ms) plus 500 ms. A switch whose BFD was removed detects
with the BGP hold time and fails here (and in the static `failover_budget`). A collective
flow black-holed after convergence (nothing received during its last `blackhole_s`, default
1 s, or nothing at all) fails the `convergence` scope; it passes only when the scenario's
traffic crossed a fault that takes something away (`crossing`), else it is not-observable,
saying why for each fault. A fault its probes cannot judge that no traffic crossed either
is `not exercised` (on the simulator: fired after the collective was done). A fault that
takes every link the design gives a server (a single-homed server's only link, a rail NIC's:
docs/rails.md) leaves nothing to fail over to: not-observable, saying so (its restore is
judged).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from labs.registry import how_to_observe
from twin.lab.directory import Lab
from twin.scenario.observations import Observations
from twin.scenario.records import FaultRecord
from validators.dynamic import crossing
from validators.dynamic.collective_efficiency import cut_off
from validators.registry import Params, dynamic
from validators.result import Finding, Result, Status, verdict

NAME = "failover"
TAKES = ("link-down", "link-flap-done", "node-down", "daemon-kill", "loss", "rate")
RESTORES = ("link-up", "node-up")
LINK_LOSS = ("link-down", "link-flap-done", "node-down")
"""Faults the neighbours see as loss of signal (the intent's `failover.link_ms`); the other
taking faults are gray (`failover.gray_ms`)."""
MIN_BACK_S = 1.0
"""A restore is judged from probe flows that sent at least this long after they were back."""
EXACT = 1e-9
"""Seconds by which a gap's start, rebuilt from when it closed and the flow's rate, may miss
the instant it began (the simulator drops at a fault's very instant, `fault_margin` 0)."""
OPEN_TAIL_S = 0.05
"""A probe flow whose last run of losses, still open when it ended, is this long or longer
never recovered (a shorter one is its last packets still in flight)."""


def fault_began(fault: FaultRecord) -> float:
    """When a fault started acting: when the run fired it (the event log's time comes once
    the action is done; a flap is logged once it is over)."""
    if "began" in fault:
        return float(fault["began"])
    if fault["fault"] == "link-flap-done":
        return float(fault["t"]) - 2 * float(fault["period"]) * int(fault["count"])
    return float(fault["t"])


def _margin(obs: Observations) -> float:
    """run.json's `fault_margin`, at least `EXACT`."""
    return max(float(obs.run.get("fault_margin", 0.5)), EXACT)


def spans(obs: Observations) -> list[tuple[FaultRecord, float, float]]:
    """Per fault that takes something away: (fault, from, until), the time during which a gap
    that begins belongs to it: from half a second before it fired until half a second before
    the next fault (a minute after the run for the last one). Half a second is run.json's
    `fault_margin` (the live twins' default; the simulator's fault and drop times are exact: 0)."""
    margin = _margin(obs)
    faults = sorted(obs.run.get("faults", []), key=fault_began)
    ends = [fault_began(f) - margin for f in faults[1:]] + [obs.run["ended"] + 60] * bool(faults)
    return [
        (fault, fault_began(fault) - margin, until)
        for fault, until in zip(faults, ends, strict=True)
        if fault["fault"] in TAKES
    ]


def restoring(obs: Observations) -> list[tuple[float, float]]:
    """Per fault that gives something back: (from, until), the time its routing takes to
    settle, whose losses are its own (judged from its probes above, not loss outside
    faults): from `fault_margin` before it fired until `fault_margin` after the FIB snapshot
    that follows it (on the simulator, the FIBs it applies `sim.convergence` later; live,
    half a second on), or after it fired when there is none."""
    margin = _margin(obs)
    taken = obs.run.get("fibs", {})
    after = {i: float(taken[label]) for label, i in obs.run.get("fib_faults", {}).items()}
    return [
        (fault_began(f) - margin, after.get(int(f["index"]), fault_began(f)) + margin)
        for f in obs.run.get("faults", [])
        if f["fault"] in RESTORES
    ]


def windows(obs: Observations) -> list[tuple[FaultRecord, float, float, list[Finding]]]:
    """Per taking fault: (fault, worst loss window ms, recovery s, flows hit).

    A gap is (arrival time of the packet after it, packets missing); it began `missing / pps`
    seconds before that packet arrived, and belongs to the fault in force when it began.
    """
    out = []
    for fault, start, until in spans(obs):
        worst_ms, recovered, hit = 0.0, 0.0, []
        for flow in obs.flows:
            for t, missing in flow.get("gaps", []):
                if start <= t - missing / flow["pps"] < until:
                    ms = missing / flow["pps"] * 1000
                    worst_ms = max(worst_ms, ms)
                    recovered = max(recovered, t - fault_began(fault))
                    hit.append(
                        Finding(
                            f"{flow['src']}->{flow['dst']}",
                            f"{missing} packets lost ({ms:.0f} ms)",
                            port=f"qp{flow['qp']}",
                            where=flow["phase"],
                        )
                    )
        out.append((fault, worst_ms, max(0.0, recovered), hit))
    return out


def limit(lab: Lab, fault: FaultRecord) -> tuple[float, str]:
    """The intent's loss budget for a fault, and its name."""
    key = "link_ms" if fault["fault"] in LINK_LOSS else "gray_ms"
    return float(getattr(lab.fabric.failover, key) or 0), f"intent failover.{key}"


@dataclass(frozen=True)
class Probed:
    """What a fault's probe flows lost from the fault on."""

    flows: list[dict[str, Any]]
    window_ms: float
    recovery_s: float
    never: list[tuple[dict[str, Any], float, int]]  # (flow, gap start, packets) open at the end
    hit: list[Finding]


def probed(
    record: dict[str, Any], began: float, next_began: float, since: float = -math.inf
) -> Probed:
    """Loss windows, recovery and flows never recovered from a fault's probe record: each
    flow's runs of losses that were still open at the fault (`[first lost sent at, packets,
    first packet after it arrived at | null]`) and began at `since` or later. A run that
    closed only once the next fault had begun (`next_began`: a `clear` or `link-up` ended
    it, not the fabric) never recovered."""
    window, recovery = 0.0, 0.0
    never, hit = [], []
    for flow in record["flows"]:
        pps = float(flow["pps"])
        for t, lost, closed in flow["gaps"]:
            if (closed is not None and closed < began) or not since <= t < next_began:
                continue  # over before the fault, begun before `since`, or the next fault's
            after = None if closed is None or closed >= next_began else closed
            window = max(window, lost / pps * 1000)
            if after is None:
                if lost / pps >= OPEN_TAIL_S:
                    never.append((flow, float(t), int(lost)))
            else:
                recovery = max(recovery, after - began)
            hit.append(
                Finding(
                    f"{flow['src']}->{flow['dst']}",
                    f"{lost} packets lost ({lost / pps * 1000:.0f} ms)"
                    + (", never recovered" if after is None else ""),
                    port=f"udp {flow['sport']}",
                    where=f"crossed {flow['crossed']}",
                )
            )
    return Probed(record["flows"], window, recovery, never, hit)


def unpinned(backend: str) -> str:
    """Why a backend without failover probes cannot judge a fault, and where it can be."""
    how = how_to_observe({"failover-probes"}, backend)
    return f"the {backend} backend cannot pin probe flows through a fault: {how}"


def unobserved(
    obs: Observations, fault: FaultRecord, record: dict[str, Any] | None, began: float
) -> str | None:
    """Why a fault's probes show nothing about it, or None when they do."""
    if record is None:
        if "failover-probes" not in obs.capabilities:
            return unpinned(str(obs.run["backend"]))
        return "the run has no failover probes"
    if not record["flows"]:
        return str(record.get("why") or "no probe flow crossed the faulted element")
    if float(record.get("started", began)) > began:
        return "the probe flows started only after the fault"
    done = float(fault["t"]) if fault["fault"] != "link-flap-done" else began
    if float(record.get("ends", math.inf)) < done + 0.1:
        return "the probe flows had stopped before the fault was done (a slow fault verb)"
    return None


@dynamic(
    NAME,
    needs={"flows"},
    max_loss_ms=0.0,
    margin_ms=500.0,
    recovery_s=5.0,
    blackhole_s=1.0,
)
def check(lab: Lab, obs: Observations, params: Params) -> list[Result]:
    """One result per fault that takes something away or gives it back, and one for
    black-holed flows."""
    records = {int(r["index"]): r for r in obs.extra("failover_probes") or []}
    order = sorted(obs.run.get("faults", []), key=fault_began)
    number = {id(f): n for n, f in enumerate(order, 1)}
    results = []
    for fault, flows_ms, _, flows_hit in windows(obs):
        scope = f"fault{number[id(fault)]} {fault['fault']} {target_of(fault)}"
        figures: dict[str, int | float | str] = {
            "flows_loss_window_ms": round(flows_ms, 1),
            "flows_hit": len(flows_hit),
        }
        results.append((number[id(fault)], taken(lab, obs, fault, scope, figures, records, params)))
    for n, fault in enumerate(order, 1):
        if fault["fault"] in RESTORES:
            scope = f"fault{n} {fault['fault']} {target_of(fault)}"
            results.append((n, restored(lab, obs, fault, n - 1, scope, records, params)))
    return [r for _, r in sorted(results, key=lambda nr: nr[0])] + [
        convergence(lab, obs, float(params["blackhole_s"]))
    ]


def target_of(fault: FaultRecord) -> str:
    """The link or node a fault acts on."""
    return str(fault.get("link") or fault.get("node", ""))


def _next_began(obs: Observations, began: float) -> float:
    later = [fault_began(f) for f in obs.run.get("faults", []) if fault_began(f) > began]
    return min(later, default=math.inf)


def _never(seen: Probed, began: float, what: str) -> str:
    """The problem of probe flows that lost everything until they ended."""
    flow, t, lost = seen.never[0]
    return (
        f"never recovered: {len(seen.never)} of {len(seen.flows)} probe flows "
        f"({flow['src']}->{flow['dst']} udp {flow['sport']}, ...) lost everything from "
        f"{max(0.0, t - began):.2f} s after the {what} until they ended "
        f"({lost / float(flow['pps']):.2f} s later)"
    )


def _cut_by_design(
    lab: Lab, obs: Observations, fault: FaultRecord, record: dict[str, Any]
) -> list[str]:
    """The servers the fault left with no link of the design (a single-homed server's only
    link, a rail NIC's, a dual-homed server's second), with the faults before it (not those
    after it at the same time), when every probe flow ends at one of them: no fabric can fail
    that over."""
    at = float(fault["t"])
    ends = {str(f[side]) for f in record["flows"] for side in ("src", "dst")}
    index = int(fault.get("index", 0))
    cut = {s for start, end, s in cut_off(lab, obs, ends, index) if start <= at < end}
    if not record["flows"] or not all(f["src"] in cut or f["dst"] in cut for f in record["flows"]):
        return []
    return sorted(cut)


def taken(
    lab: Lab,
    obs: Observations,
    fault: FaultRecord,
    scope: str,
    figures: dict[str, int | float | str],
    records: dict[int, dict[str, Any]],
    params: Params,
) -> Result:
    """The verdict on a fault that takes something away, from its probe flows."""
    given_ms = float(params["max_loss_ms"])
    max_recovery = float(params["recovery_s"])
    began = fault_began(fault)
    max_loss_ms, source = (given_ms, "") if given_ms else limit(lab, fault)
    head: dict[str, int | float | str] = {"limit_ms": round(max_loss_ms, 1)}
    figures = head | figures
    record = records.get(int(fault.get("index", -1)))
    why = unobserved(obs, fault, record, began)
    if why is not None or record is None:
        why = _exercised(lab, obs, fault, str(why))
        return Result(NAME, scope, Status.NOT_OBSERVABLE, why, figures)
    alone = _cut_by_design(lab, obs, fault, record)
    if alone:
        why = (
            f"nothing to fail over to: the fault took every link the design gives "
            f"{', '.join(alone)}, which waits for the restore (judged there)"
        )
        return Result(NAME, scope, Status.NOT_OBSERVABLE, why, figures)
    seen = probed(record, began, _next_began(obs, began))
    crossed = sorted({str(f["crossed"]) for f in seen.flows})
    figures |= {
        "loss_window_ms": round(seen.window_ms, 1),
        "recovery_s": round(seen.recovery_s, 3),
        "probe_pps": float(record["pps"]),
        "probe_flows": len(seen.flows),
        "never_recovered": len(seen.never),
        "crossed": ", ".join(crossed),
    }
    problems = [_never(seen, began, "fault")] if seen.never else []
    if seen.window_ms > max_loss_ms:
        why_limit = f" ({source})" if source else ""
        problems.append(f"loss window {seen.window_ms:.0f} ms > {max_loss_ms:.0f} ms{why_limit}")
    if seen.recovery_s > max_recovery:
        problems.append(f"recovery {seen.recovery_s:.2f} s > {max_recovery} s")
    status = Status.FAIL if problems else Status.PASS
    reason = "; ".join(problems) or (
        f"{len(seen.flows)} probe flows at {float(record['pps']):g} pps crossed "
        f"{', '.join(crossed)} before the fault: worst loss window {seen.window_ms:.0f} ms "
        f"(limit {max_loss_ms:.0f} ms), flowing again after {seen.recovery_s:.2f} s"
    )
    return Result(NAME, scope, status, reason, figures, seen.hit if problems else [])


def _given_back(
    obs: Observations, fault: FaultRecord, index: int, records: dict[int, dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any]] | str:
    """The probe record of the fault that took away what `fault` gives back, and its
    `restore` (the flows followed until they crossed the element again); or why there is
    none to judge from."""
    target, backend = target_of(fault), obs.run["backend"]
    if "failover-probes" not in obs.capabilities:
        return unpinned(str(backend))
    index = int(fault.get("index", index))
    for record in records.values():
        back = record.get("restore") or {}
        if back.get("index") != index:
            continue
        if back.get("why"):
            return str(back["why"])
        if back.get("back") is None:
            waited = float(back["watched_s"])
            return (
                f"no probe flow was routed back through {target} within {waited:.1f} s of "
                "the restore"
            )
        if record.get("ends", math.inf) < float(back["back"]) + MIN_BACK_S:
            return f"the probe flows ended less than {MIN_BACK_S:g} s after they were back"
        return record, back
    earlier = [r for i, r in sorted(records.items()) if i < index and r["element"] == target]
    if not earlier or not earlier[-1]["flows"]:
        return f"no probe flow went through {target} before it was taken away"
    taken = int(earlier[-1]["index"]) + 1
    if taken != index:
        return f"the probe flows of fault{taken} ended at the fault after it, before this one"
    return f"the {backend} backend did not follow the probe flows of fault{taken} back"


def restored(
    lab: Lab,
    obs: Observations,
    fault: FaultRecord,
    index: int,
    scope: str,
    records: dict[int, dict[str, Any]],
    params: Params,
) -> Result:
    """The verdict on a fault that gives back a link or node: the probe flows of the fault
    that took it, followed until the fabric routed them through it again, lost at most
    `max_loss_ms` (default `margin_ms`: moving traffic back should cost next to nothing)
    from the restore on, and none was black-holed."""
    target, began = target_of(fault), fault_began(fault)
    max_loss_ms = float(params["max_loss_ms"]) or float(params["margin_ms"])
    figures: dict[str, int | float | str] = {"limit_ms": round(max_loss_ms, 1)}
    found = _given_back(obs, fault, index, records)
    if isinstance(found, str):
        return Result(
            NAME, scope, Status.NOT_OBSERVABLE, _exercised(lab, obs, fault, found), figures
        )
    record, back = found
    margin = float(obs.run.get("fault_margin", 0.5))
    seen = probed(record, began, _next_began(obs, began), since=began - margin)
    back_s = float(back["back"]) - began
    figures |= {
        "loss_window_ms": round(seen.window_ms, 1),
        "back_s": round(back_s, 3),
        "probe_pps": float(record["pps"]),
        "probe_flows": len(seen.flows),
        "flows_back": int(back["flows_back"]),
        "never_recovered": len(seen.never),
    }
    problems = [_never(seen, began, "restore")] if seen.never else []
    if seen.window_ms > max_loss_ms:
        problems.append(f"loss window {seen.window_ms:.0f} ms > {max_loss_ms:.0f} ms")
    reason = "; ".join(problems) or (
        f"{len(seen.flows)} probe flows at {float(record['pps']):g} pps, routed back through "
        f"{target} {back_s:.2f} s after the restore: worst loss window "
        f"{seen.window_ms:.0f} ms (limit {max_loss_ms:.0f} ms)"
    )
    status = Status.FAIL if problems else Status.PASS
    return Result(NAME, scope, status, reason, figures, seen.hit if problems else [])


def _exercised(lab: Lab, obs: Observations, fault: FaultRecord, why: str) -> str:
    """Why a fault is not judged: `why` its probes show nothing, and first, when none of
    the scenario's traffic crossed it either, that the run did not exercise it."""
    seen = crossing.crossed(lab, obs, fault, fault_began(fault))
    if seen.flows or not obs.flows:
        return why
    return f"not exercised: {seen.why}; {why}"


def convergence(lab: Lab, obs: Observations, blackhole_s: float) -> Result:
    """The collective flows black-holed after convergence: a pass needs flows that crossed
    a fault that takes something away (else nothing was there to converge)."""
    if not obs.flows:
        return Result(NAME, "convergence", Status.NOT_OBSERVABLE, "the scenario sent no traffic")
    holes = [
        Finding(
            f"{f['src']}->{f['dst']}",
            f"{f['tail_lost']} final packets never arrived" if f["received"] else "nothing arrived",
            port=f"qp{f['qp']}",
            where=f["phase"],
        )
        for f in obs.flows
        if f["received"] == 0 or f["tail_lost"] / f["pps"] > blackhole_s
    ]
    numbered = enumerate(sorted(obs.run.get("faults", []), key=fault_began), 1)
    taking = [(n, f) for n, f in numbered if f["fault"] in TAKES]
    crossings = {n: crossing.crossed(lab, obs, f, fault_began(f)) for n, f in taking}
    exercised = [n for n, c in crossings.items() if c.flows]
    figures: dict[str, int | float | str] = {
        "flows": len(obs.flows),
        "black_holed": len(holes),
        "faults_crossed": len(exercised),
    }
    if not holes and not exercised:
        why = (
            "no traffic crossed a fault that takes something away: "
            + "; ".join(f"fault{n}: {c.why}" for n, c in crossings.items())
            if crossings
            else "no fault took anything away: nothing to converge from"
        )
        return Result(NAME, "convergence", Status.NOT_OBSERVABLE, why, figures)
    flows = len({id(f) for n in exercised for f in crossings[n].flows})
    ok = (
        f"{flows} flows crossed {', '.join(f'fault{n}' for n in exercised)}: "
        "none black-holed after convergence"
    )
    return verdict(NAME, "convergence", holes, ok, figures)
