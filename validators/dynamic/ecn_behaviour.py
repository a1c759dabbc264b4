"""`ecn_behaviour`: on the lossless priorities ECN acts before PFC, and marks follow the WRED
curve the configs set.

- `ecn before pfc, priority P`: DCQCN needs marks to slow senders before buffers reach the
  XOFF threshold; pause frames the switches sent per ECN mark on P must stay under
  `max_pause_share` (0.1). Pauses with no mark at all fail (ECN off, or thresholds above
  XOFF).
- `wred curve`: on every switch queue with at least `min_marks` (100) marks that was never
  paused (a paused queue holds bytes without sending), the marks are at most `tolerance`
  (3) times what its WRED_PROFILE (linear from green_min_threshold to green_max_threshold up
  to green_drop_probability, certain above) predicts from its sampled occupancy
  (`queues.json`) over the packets it sent. Fewer is normal: packets marked upstream are not
  marked again. More means the switch marks above its curve (or the config on disk is not
  what ran).
"""

from __future__ import annotations

from typing import Any

from twin.labdir import Lab
from twin.render.config_db import wred
from twin.scenario.observations import Observations
from validators.qos_config import pfc_enabled
from validators.registry import Params, dynamic
from validators.result import Finding, Result, Status, verdict

NAME = "ecn_behaviour"


def probability(curve: tuple[float, float, float], occupancy: float) -> float:
    """The marking probability at an occupancy in bytes.

    >>> probability((100.0, 200.0, 0.1), 150.0), probability((100.0, 200.0, 0.1), 250.0)
    (0.05, 1.0)
    """
    kmin, kmax, pmax = curve
    if occupancy <= kmin:
        return 0.0
    if occupancy > kmax:
        return 1.0
    return pmax * (occupancy - kmin) / (kmax - kmin)


def _switch_rows(lab: Lab, obs: Observations) -> list[dict[str, Any]]:
    switches = set(lab.switches())
    rows: list[dict[str, Any]] = obs.extra("pfc") or []
    return [r for r in rows if r["port"].split(":")[0] in switches]


def _lossless(lab: Lab) -> set[int]:
    out: set[int] = set()
    for switch in lab.switches():
        db = lab.config_db(switch)
        for port in db.get("PORT_QOS_MAP", {}):
            out |= set(pfc_enabled(db, port))
    return out


def curve_check(lab: Lab, obs: Observations, rows: list[dict[str, Any]], params: Params) -> Result:
    """Marks counted against marks the WRED curve predicts from the sampled queues."""
    queues: dict[str, Any] = (obs.extra("queues") or {}).get("queues", {})
    packet = int((obs.extra("sim") or {}).get("packet_bytes", 4096))
    tolerance = float(params["tolerance"])
    findings, checked, worst = [], 0, 0.0
    for r in rows:
        node, port = r["port"].split(":")
        curve = wred(lab.config_db(node), port, r["priority"])
        series = [q for q in queues.get(r["port"], {}).get(str(r["priority"]), []) if q > 0]
        if (
            curve is None
            or r["ecn_marks"] < int(params["min_marks"])
            or not series
            or r["paused_s"]
        ):
            continue
        checked += 1
        expected = r["tx_bytes"] / packet * sum(probability(curve, q) for q in series) / len(series)
        ratio = r["ecn_marks"] / expected if expected else float("inf")
        worst = max(worst, ratio)
        if ratio > tolerance:
            findings.append(
                Finding(
                    node,
                    f"{r['ecn_marks']} marks, WRED curve predicts {expected:.0f}",
                    port,
                    f"queue {r['priority']}",
                )
            )
    if not checked:
        return Result(
            NAME,
            "wred curve",
            Status.NOT_OBSERVABLE,
            f"no unpaused marking queue reached {params['min_marks']} marks",
        )
    ok = f"marks on {checked} queues at most {tolerance}x the WRED curve (highest {worst:.2f}x)"
    return verdict(
        NAME, "wred curve", findings, ok, {"queues": checked, "worst_factor": round(worst, 2)}
    )


@dynamic(NAME, needs={"ecn", "pfc", "queues"}, max_pause_share=0.1, min_marks=100, tolerance=3.0)
def check(lab: Lab, obs: Observations, params: Params) -> list[Result]:
    """ECN before PFC per lossless priority, and marks along the WRED curve."""
    rows = _switch_rows(lab, obs)
    limit = float(params["max_pause_share"])
    results = []
    for prio in sorted(_lossless(lab)):
        marks = sum(r["ecn_marks"] for r in rows if r["priority"] == prio)
        pauses = sum(r["pause_sent"] for r in rows if r["priority"] == prio)
        scope = f"ecn before pfc, priority {prio}"
        figures: dict[str, int | float | str] = {"ecn_marks": marks, "pause_frames": pauses}
        if not marks and not pauses:
            results.append(
                Result(
                    NAME,
                    scope,
                    Status.NOT_OBSERVABLE,
                    "no queue congested: no mark, no pause",
                    figures,
                )
            )
            continue
        share = pauses / marks if marks else float("inf")
        figures["pauses_per_mark"] = round(share, 4) if marks else "inf"
        findings = []
        if share > limit:
            top = max((r for r in rows if r["priority"] == prio), key=lambda r: r["pause_sent"])
            node, port = top["port"].split(":")
            what = (
                f"{pauses} pause frames for {marks} ECN marks"
                if marks
                else f"{pauses} pauses, no mark"
            )
            findings.append(Finding(node, f"{what} (most pauses here: {top['pause_sent']})", port))
        ok = f"{marks} ECN marks, {pauses} pause frames ({share:.3f} per mark, at most {limit})"
        results.append(verdict(NAME, scope, findings, ok, figures))
    results.append(curve_check(lab, obs, rows, params))
    return results
