"""`failover`: how much traffic each fault cost, how long until it flowed again, and whether
any flow stayed black-holed.

For each fault that takes something away (link down or flap, node down, daemon kill, loss),
the loss window is the longest sequence gap of any flow that the fault caused (gaps that
began after the fault and before the next one, whenever they closed: a loss is often cleared
by the next fault), in milliseconds at the flow's rate; recovery is the time from the fault
until the last such gap closed. A flap counts from its first down. Fails above the loss
limit or `recovery_s` (default 5). The loss limit is `max_loss_ms` when given; by default
(0) it comes from the configs: the dead-neighbour detection time of the switches at the
fault (BFD detect multiplier x receive interval in their frr.conf, or the BGP hold time
without BFD; `validators.frr_timers`) plus `margin_ms` (default 500: BGP withdrawal and FIB
programming after detection), so a fabric working as designed passes. A flow black-holed after
convergence (nothing received during its last `blackhole_s`, default 1 s, or nothing at all)
fails the `convergence` scope.
"""

from __future__ import annotations

from typing import Any

from twin.labdir import Lab
from twin.scenario.observations import Observations
from validators.frr_timers import detection
from validators.registry import Params, dynamic
from validators.result import Finding, Result, Status, verdict

NAME = "failover"
TAKES = ("link-down", "link-flap-done", "node-down", "daemon-kill", "loss", "rate")


def _began(fault: dict[str, Any]) -> float:
    """When a fault started acting: when the run fired it (the event log's time comes once
    the action is done; a flap is logged once it is over)."""
    if "began" in fault:
        return float(fault["began"])
    if fault["fault"] == "link-flap-done":
        return float(fault["t"]) - 2 * float(fault["period"]) * int(fault["count"])
    return float(fault["t"])


def spans(obs: Observations) -> list[tuple[dict[str, Any], float, float]]:
    """Per fault that takes something away: (fault, from, until), the time during which a gap
    that begins belongs to it: from half a second before it fired until half a second before
    the next fault (a minute after the run for the last one)."""
    faults = sorted(obs.run.get("faults", []), key=_began)
    ends = [_began(f) - 0.5 for f in faults[1:]] + [obs.run["ended"] + 60] * bool(faults)
    return [
        (fault, _began(fault) - 0.5, until)
        for fault, until in zip(faults, ends, strict=True)
        if fault["fault"] in TAKES
    ]


def windows(obs: Observations) -> list[tuple[dict[str, Any], float, float, list[Finding]]]:
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
                    recovered = max(recovered, t - start - 0.5)
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


def limit(lab: Lab, fault: dict[str, Any], margin_ms: float) -> tuple[float, str]:
    """The default loss limit for a fault, and where it comes from: the slowest detection of
    the switches at its link ends (or the node), plus the margin."""
    named = [e.split(":")[0] for e in fault.get("ends", [])] or [fault.get("node", "")]
    switches = [n for n in named if n in lab.switches()] or lab.switches()
    found = {n: detection(lab, n) for n in switches}
    slowest = max(found.values(), key=lambda d: d.ms)
    where = ", ".join(n for n, d in found.items() if d == slowest)
    return slowest.ms + margin_ms, f"{slowest.source} on {where} + {margin_ms:.0f} ms"


@dynamic(
    NAME,
    needs={"flows"},
    max_loss_ms=0.0,
    margin_ms=500.0,
    recovery_s=5.0,
    blackhole_s=1.0,
)
def check(lab: Lab, obs: Observations, params: Params) -> list[Result]:
    """One result per fault, and one for black-holed flows after convergence."""
    given_ms, margin_ms = float(params["max_loss_ms"]), float(params["margin_ms"])
    max_recovery = float(params["recovery_s"])
    blackhole_s = float(params["blackhole_s"])
    if not obs.flows:
        return [Result(NAME, "run", Status.NOT_OBSERVABLE, "the scenario sent no traffic")]
    results = []
    for i, (fault, loss_ms, recovery, hit) in enumerate(windows(obs)):
        target = fault.get("link") or fault.get("node", "")
        scope = f"fault{i + 1} {fault['fault']} {target}"
        max_loss_ms, source = (given_ms, "") if given_ms else limit(lab, fault, margin_ms)
        figures: dict[str, int | float | str] = {
            "loss_window_ms": round(loss_ms, 1),
            "limit_ms": round(max_loss_ms, 1),
            "recovery_s": round(recovery, 3),
            "flows_hit": len(hit),
        }
        problems = []
        if loss_ms > max_loss_ms:
            why = f" ({source})" if source else ""
            problems.append(f"loss window {loss_ms:.0f} ms > {max_loss_ms:.0f} ms{why}")
        if recovery > max_recovery:
            problems.append(f"recovery {recovery:.2f} s > {max_recovery} s")
        status = Status.FAIL if problems else Status.PASS
        reason = "; ".join(problems) or (
            f"worst loss window {loss_ms:.0f} ms, traffic flowing again after {recovery:.2f} s"
        )
        results.append(Result(NAME, scope, status, reason, figures, hit if problems else []))
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
    results.append(
        verdict(
            NAME,
            "convergence",
            holes,
            "no flow black-holed after convergence",
            {"flows": len(obs.flows), "black_holed": len(holes)},
        )
    )
    return results
