"""`ecn_behaviour`: on the lossless priorities ECN acts before PFC, and marks follow the WRED
curve the configs set.

- `ecn before pfc, priority P`, for each lossless priority P of the intent
  (`qos.lossless_priorities`, whatever the configs enable): DCQCN needs marks to slow
  senders before buffers reach the XOFF threshold. Judged per switch: every switch whose
  ports paused their upstream on P must have marked first, at most `max_pause_share` (0.1)
  pause frames sent per ECN mark the switch made on P (pauses leave by the ingress port whose
  buffer filled, marks by the egress queue that filled it: the switch is where the two
  meet). A switch with pauses and no mark (ECN off, or thresholds above XOFF) fails, named
  with the ports that paused most, whatever the other switches marked.
- `wred curve`: on every switch queue with at least `min_marks` (100) marks that was never
  paused (a paused queue holds bytes without sending), the marks are at most `tolerance`
  (3) times what its WRED_PROFILE (linear from green_min_threshold to green_max_threshold up
  to green_drop_probability, certain above) predicts from its sampled occupancy
  (`queues.json`) over the packets it sent. Fewer is normal: packets marked upstream are not
  marked again. More means the switch marks above its curve (or the config on disk is not
  what ran).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from twin.lab.directory import Lab
from twin.render.config_db import wred
from twin.scenario.observations import Observations
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


def curve_check(lab: Lab, obs: Observations, rows: list[dict[str, Any]], params: Params) -> Result:
    """Marks counted against marks the WRED curve predicts from the sampled queues."""
    queues: dict[str, Any] = (obs.extra("queues") or {}).get("queues", {})
    packet = int((obs.extra("sim") or {}).get("packet_bytes", 4096))
    tolerance = float(params["tolerance"])
    findings, checked, worst = [], 0, 0.0
    for r in rows:
        if r["ecn_marks"] < int(params["min_marks"]) or r["paused_s"]:
            continue
        series = [q for q in queues.get(r["port"], {}).get(str(r["priority"]), []) if q > 0]
        node, port = r["port"].split(":")
        curve = wred(lab.config_db(node), port, r["priority"]) if series else None
        if curve is None:
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


def _per_switch(rows: list[dict[str, Any]], prio: int, limit: float) -> list[Finding]:
    """Switches on priority `prio` that sent more than `limit` pause frames per ECN mark."""
    marks: dict[str, int] = defaultdict(int)
    pauses: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r["priority"] == prio:
            node = r["port"].split(":")[0]
            marks[node] += r["ecn_marks"]
            if r["pause_sent"]:
                pauses[node].append(r)
    findings = []
    for node, paused in sorted(pauses.items()):
        sent = sum(r["pause_sent"] for r in paused)
        if sent > limit * marks[node]:
            top = sorted(paused, key=lambda r: -r["pause_sent"])[:4]
            ports = ",".join(r["port"].split(":")[1] for r in top)
            what = f"{sent} pause frames sent for {marks[node]} ECN marks"
            findings.append(
                Finding(node, f"{what} (at most {limit} per mark)", ports, f"queue {prio}")
            )
    return findings


@dynamic(NAME, needs={"ecn", "pfc", "queues"}, max_pause_share=0.1, min_marks=100, tolerance=3.0)
def check(lab: Lab, obs: Observations, params: Params) -> list[Result]:
    """ECN before PFC per lossless priority of the intent and switch, and marks along the WRED
    curve."""
    rows = _switch_rows(lab, obs)
    limit = float(params["max_pause_share"])
    results = []
    for prio in lab.fabric.qos.lossless_priorities:
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
        findings = _per_switch(rows, prio, limit)
        pausing = len(
            {r["port"].split(":")[0] for r in rows if r["priority"] == prio and r["pause_sent"]}
        )
        figures["switches_pausing"] = pausing
        figures["switches_over"] = len(findings)
        ok = (
            f"{marks} ECN marks, {pauses} pause frames: every switch that paused "
            f"({pausing}) marked first (at most {limit} pauses per mark)"
            if pauses
            else f"{marks} ECN marks, no pause frame"
        )
        results.append(verdict(NAME, scope, findings, ok, figures))
    results.append(curve_check(lab, obs, rows, params))
    return results
