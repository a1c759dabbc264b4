"""The starting point of a reproduction, from production telemetry (`twin incident --from`):
the lab production's counters were imported against, the ports and priorities that paused,
received pauses, marked ECN and dropped (by reason), and the traffic classes seen, from a
production run directory (`twin import`); and the scenario to play on that lab with
`production_agreement` in its verdict.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from twin import safeio
from twin.errors import InputError
from twin.scenario.observations import Observations
from twin.telemetry.compare import NAME

CATEGORIES = {
    "paused": "pause_sent",
    "pause received": "pause_received",
    "ecn": "ecn_marks",
}
"""What a reproduction must show -> the pfc.json field counting it."""
SCENARIO_BYTES = 4 << 20


def _busiest(hit: dict[str, Any]) -> tuple[int, str, int]:
    return -int(hit["count"]), str(hit["port"]), int(hit["priority"])


def lab_of(production: Observations) -> Path:
    """The lab the production run was imported against, or one line saying it is gone."""
    run = production.run
    for candidate in (production.path / str(run.get("lab_from_run", "")), Path(run["lab_dir"])):
        if (candidate / "fabric.yaml").is_file():
            return candidate.resolve()
    raise InputError(f"{production.path}/run.json", "lab_dir", f"no lab at {run['lab_dir']}")


def start(production: Observations) -> dict[str, Any]:
    """What production showed, as the starting point of a reproduction."""
    rows = production.extra("pfc") or []
    found: dict[str, list[dict[str, Any]]] = {}
    for category, column in CATEGORIES.items():
        hits = [
            {"port": r["port"], "priority": r["priority"], "count": r[column]}
            for r in rows
            if r[column]
        ]
        found[category] = sorted(hits, key=_busiest)
    drops: list[dict[str, Any]] = [
        {"port": r["port"], "priority": r["priority"], "reason": reason, "count": n}
        for r in rows
        for reason, n in sorted(r["drops"].items())
        if n
    ]
    classes = sorted({r["priority"] for r in rows if r["tx_bytes"] or r["pause_sent"]})
    run = production.run
    windows: Any = run.get("windows") or {}
    return {
        "production": str(production.path.resolve()),
        "lab": str(lab_of(production)),
        "switches": sorted(windows),
        "window_s": round(float(run["ended"]) - float(run["started"]), 6),
        "differenced": run.get("differenced", True),
        **found,
        "drops": sorted(drops, key=_busiest),
        "traffic_classes": classes,
        "lossless_seen": sorted({h["priority"] for h in found["paused"]}),
    }


def markdown(point: dict[str, Any]) -> str:
    """The starting point for a reader: the busiest ports of each category first."""
    lines = [
        f"# Reproduction from {point['production']}",
        "",
        f"- lab: {point['lab']}",
        f"- switches: {', '.join(point['switches'])}; window {point['window_s']:g} s"
        + ("" if point["differenced"] else " (totals: one snapshot)"),
        f"- traffic classes seen: {', '.join(map(str, point['traffic_classes'])) or 'none'}",
        f"- priorities that paused: {', '.join(map(str, point['lossless_seen'])) or 'none'}",
    ]
    for category in (*CATEGORIES, "drops"):
        hits = point[category]
        lines += ["", f"## {category}: {len(hits)} ports and priorities", ""]
        for h in hits[:20]:
            reason = f" {h['reason']}" if "reason" in h else ""
            lines.append(f"- {h['port']} priority {h['priority']}{reason}: {h['count']}")
        if len(hits) > 20:
            lines.append(f"- and {len(hits) - 20} more (start.json)")
    return "\n".join(lines) + "\n"


def scenario(given: Path, production: Path, threshold: float, rank: float) -> str:
    """The given scenario with `production_agreement` against `production` in its verdict."""
    raw = safeio.read(given, SCENARIO_BYTES)
    if raw is None:
        raise InputError(str(given), "", "no such file")
    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise InputError(str(given), "", f"not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(str(given), "", "not a scenario (a mapping)")
    validate = data.get("validate") or {}
    if not isinstance(validate, dict):
        raise InputError(str(given), "validate", "must be a mapping")
    agreement = {"production": str(production.resolve()), "threshold": threshold, "rank": rank}
    data["validate"] = {**validate, NAME: agreement}
    return yaml.safe_dump(data, sort_keys=False)
