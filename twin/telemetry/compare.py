"""A run beside production: which ports paused, marked ECN and dropped, per priority, in each.

Both sides are read from pfc.json (the twin's run, and a production run `twin import` wrote),
on the switches production covers (SONiC counts nothing on servers). Per category, the set of
(port, priority) where it happened in each:
- `paused`: the port sent pause frames (its ingress was congested);
- `pause received`: its egress was paused by its peer;
- `ecn`: it marked ECN;
- `lossless drops`, `lossy drops`, `watchdog drops`.

Agreement on a category is the two sets' overlap (Jaccard: shared / either), judged against
`threshold`; a category where nothing happened on either side is not judged (nothing to
compare: no vacuous pass). Pause frames per port are compared by rank (Spearman's rho over
the ports either side paused, at least 3), against `rank`. Watermarks are figures only: the
ratio of the twin's largest occupancy to production's bound (a watermark is a maximum since
someone cleared it, an upper bound, never a window's figure). What differs in meaning
(docs/telemetry.md): production's paused time is what pause quanta asked for or the
watchdog's estimate, the twin's is time held, so paused time is not compared; ECN marks are
per queue in SONiC, mapped to priorities through the lab's maps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twin.scenario.observations import Observations
from validators.result import Figure, Finding, Result, Status

NAME = "production_agreement"
Cell = tuple[str, int]
CATEGORIES: dict[str, Callable[[dict[str, Any]], bool]] = {
    "paused": lambda r: int(r.get("pause_sent", 0)) > 0,
    "pause received": lambda r: int(r.get("pause_received", 0)) > 0,
    "ecn": lambda r: int(r.get("ecn_marks", 0)) > 0,
    "lossless drops": lambda r: int(r.get("drops", {}).get("lossless", 0)) > 0,
    "lossy drops": lambda r: int(r.get("drops", {}).get("lossy", 0)) > 0,
    "watchdog drops": lambda r: int(r.get("drops", {}).get("watchdog", 0)) > 0,
}


def switches_of(production: Observations) -> set[str]:
    """The switches a production run covers."""
    windows = production.run.get("windows")
    if isinstance(windows, dict) and windows:
        return set(windows)
    return {str(r["port"]).split(":")[0] for r in production.extra("pfc") or []}


def _rows(obs: Observations, switches: set[str]) -> list[dict[str, Any]]:
    rows = obs.extra("pfc") or []
    return [r for r in rows if str(r.get("port", "")).split(":")[0] in switches]


def rank_correlation(xs: list[float], ys: list[float]) -> float | None:
    """Spearman's rho (average ranks for ties); None when either side is constant.

    >>> rank_correlation([1, 2, 3], [10, 20, 30]), rank_correlation([1, 2, 3], [3, 2, 1])
    (1.0, -1.0)
    """

    def ranks(values: list[float]) -> list[float]:
        order = sorted(range(len(values)), key=values.__getitem__)
        out = [0.0] * len(values)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
                j += 1
            for k in range(i, j + 1):
                out[order[k]] = (i + j) / 2 + 1
            i = j + 1
        return out

    rx, ry = ranks(xs), ranks(ys)
    n = len(xs)
    mx, my = sum(rx) / n, sum(ry) / n
    sx = sum((a - mx) ** 2 for a in rx) ** 0.5
    sy = sum((b - my) ** 2 for b in ry) ** 0.5
    if not sx or not sy:
        return None
    rho: float = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True)) / (sx * sy)
    return round(rho, 6)


def _finding(cell: Cell, side: str, category: str) -> Finding:
    node, _, port = cell[0].partition(":")
    return Finding(node, f"{category} in {side} only", port, f"priority {cell[1]}")


def compare(
    twin: Observations, production: Observations, threshold: float, rank: float
) -> list[Result]:
    """The verdicts of the twin's run against production's (module doc)."""
    switches = switches_of(production)
    mine, theirs = _rows(twin, switches), _rows(production, switches)
    results: list[Result] = []
    overlaps: list[float] = []
    for category, happened in CATEGORIES.items():
        a = {(str(r["port"]), int(r["priority"])) for r in mine if happened(r)}
        b = {(str(r["port"]), int(r["priority"])) for r in theirs if happened(r)}
        if not a and not b:
            continue
        overlap = round(len(a & b) / len(a | b), 4)
        overlaps.append(overlap)
        findings = [_finding(c, "the twin", category) for c in sorted(a - b)]
        findings += [_finding(c, "production", category) for c in sorted(b - a)]
        figures: dict[str, Figure] = {
            "overlap": overlap,
            "both": len(a & b),
            "twin_only": len(a - b),
            "production_only": len(b - a),
        }
        status = Status.PASS if overlap >= threshold else Status.FAIL
        reason = (
            f"overlap {overlap:.2f} (threshold {threshold:g}): {len(a & b)} ports and priorities "
            f"in both, {len(a - b)} in the twin only, {len(b - a)} in production only"
        )
        results.append(Result(NAME, category, status, reason, figures, findings))
    if not overlaps:
        why = f"neither run paused, marked ECN or dropped on the {len(switches)} switches"
        return [Result(NAME, "agreement", Status.NOT_OBSERVABLE, why)]
    score = round(sum(overlaps) / len(overlaps), 4)
    status = Status.PASS if score >= threshold else Status.FAIL
    reason = f"agreement {score:.2f} over {len(overlaps)} categories (threshold {threshold:g})"
    results.insert(0, Result(NAME, "agreement", status, reason, {"agreement": float(score)}))
    results.append(_ranks(mine, theirs, rank))
    results.append(_watermarks(twin, production, switches))
    return results


def _pauses(rows: list[dict[str, Any]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for r in rows:
        out[str(r["port"])] = out.get(str(r["port"]), 0.0) + float(r.get("pause_sent", 0))
    return out


def _ranks(mine: list[dict[str, Any]], theirs: list[dict[str, Any]], rank: float) -> Result:
    a, b = _pauses(mine), _pauses(theirs)
    ports = sorted(p for p in set(a) | set(b) if a.get(p) or b.get(p))
    rho = (
        rank_correlation([a.get(p, 0.0) for p in ports], [b.get(p, 0.0) for p in ports])
        if len(ports) >= 3
        else None
    )
    if rho is None:
        why = f"{len(ports)} ports paused in either run: too few, or all alike, to rank"
        return Result(NAME, "pause frames by port", Status.NOT_OBSERVABLE, why)
    status = Status.PASS if rho >= rank else Status.FAIL
    reason = f"rank correlation {rho:.2f} over {len(ports)} ports (threshold {rank:g})"
    return Result(NAME, "pause frames by port", status, reason, {"rho": rho, "ports": len(ports)})


def _watermarks(twin: Observations, production: Observations, switches: set[str]) -> Result:
    bounds = production.extra("watermarks") or {}
    seen = twin.extra("queues") or {}
    ratios: list[float] = []
    for kind in ("queues", "pgs"):
        for key, by_priority in (bounds.get(kind) or {}).items():
            if key.split(":")[0] not in switches:
                continue
            for priority, bound in by_priority.items():
                series = (seen.get(kind) or {}).get(key, {}).get(priority)
                if series and bound:
                    ratios.append(max(series) / bound)
    if not ratios:
        why = "no queue or PG both the twin's occupancy and production's watermark cover"
        return Result(NAME, "watermarks", Status.NOT_OBSERVABLE, why)
    ratios.sort()
    median = round(ratios[len(ratios) // 2], 4)
    reason = (
        f"the twin's largest occupancy is {median:.2f}x production's watermark (median of "
        f"{len(ratios)}; a watermark is a bound, so figures only)"
    )
    return Result(NAME, "watermarks", Status.INFO, reason, {"median_ratio": median,
                  "compared": len(ratios), "max_ratio": round(ratios[-1], 4)})  # fmt: skip
