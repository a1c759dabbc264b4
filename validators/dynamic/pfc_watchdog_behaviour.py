"""`pfc_watchdog_behaviour`: a PFC storm is caught by the watchdog and the queue restored, in
the times PFC_WD sets.

For every `pfc-storm` fault of the run (a NIC or port that keeps sending pause frames), the
switch port it storms into must log `watchdog_detect` within its PFC_WD `detection_time`
plus one `POLL_INTERVAL` of the storm's start, and `watchdog_restore` within
`restoration_time` plus one poll of the storm's end (when the run lasted that long).
Without a detection the storm spreads: the findings say how many other ports were paused.
"""

from __future__ import annotations

from typing import Any

from twin.lab.directory import Lab
from twin.model.wiring import shared
from twin.scenario.observations import Observations
from twin.scenario.records import Event
from validators.registry import Params, dynamic
from validators.result import Finding, Result, Status, verdict

NAME = "pfc_watchdog_behaviour"


def times(lab: Lab, node: str, port: str) -> tuple[float, float, float] | None:
    """(detection, restoration, poll) seconds of a port's PFC watchdog, None when it has none."""
    wd = lab.config_db(node).get("PFC_WD", {})
    entry = wd.get(port)
    if not entry or entry.get("action", "drop") not in ("drop", "forward"):
        return None
    poll = float(wd.get("GLOBAL", {}).get("POLL_INTERVAL", 200)) / 1000
    return float(entry["detection_time"]) / 1000, float(entry["restoration_time"]) / 1000, poll


def _first(events: list[Event], kind: str, node: str, port: str, after: float) -> float | None:
    found = [
        float(e["t"])
        for e in events
        if e["event"] == kind
        and e.get("node") == node
        and e.get("port") == port
        and e["t"] >= after
    ]
    return min(found, default=None)


@dynamic(NAME, needs={"deadlock", "pfc"})
def check(lab: Lab, obs: Observations, params: Params) -> list[Result]:
    """One result per PFC storm of the run."""
    storms = [f for f in obs.run.get("faults", []) if f["fault"] == "pfc-storm"]
    if not storms:
        return [Result(NAME, "storms", Status.NOT_OBSERVABLE, "no pfc-storm fault in the scenario")]
    wiring = shared(lab)
    rows: list[dict[str, Any]] = obs.extra("pfc") or []
    results = []
    for storm in storms:
        node, _, name = str(storm["link"]).partition(":")
        member = wiring.physical(node, name)[0]
        peer, peer_port = wiring.cable[(node, member)]
        start = float(storm["t"])
        end = start + float(storm["duration"]) if storm.get("duration") else None
        scope = f"storm {storm['link']} -> {peer}:{peer_port}"
        paused = sorted(
            {r["port"] for r in rows if r["paused_s"] > 0 and r["port"] != f"{peer}:{peer_port}"}
        )
        figures: dict[str, int | float | str] = {"other_ports_paused": len(paused)}
        wd = times(lab, peer, peer_port)
        detected = _first(obs.events, "watchdog_detect", peer, peer_port, start)
        findings = []
        if wd is None:
            findings.append(
                Finding(
                    peer,
                    f"no PFC watchdog: the storm paused {len(paused)} other ports",
                    peer_port,
                    "PFC_WD",
                )
            )
        elif detected is None or detected - start > wd[0] + wd[2]:
            late = "never" if detected is None else f"after {(detected - start) * 1e3:.0f} ms"
            findings.append(
                Finding(
                    peer,
                    f"storm detected {late} (allowed {(wd[0] + wd[2]) * 1e3:.0f} ms)",
                    peer_port,
                    "PFC_WD",
                )
            )
        if wd is not None and detected is not None:
            figures["detected_ms"] = round((detected - start) * 1e3, 2)
            restored = _first(obs.events, "watchdog_restore", peer, peer_port, end or float("inf"))
            if end is not None and end + wd[1] + wd[2] <= float(obs.run["ended"]):
                if restored is None or restored - end > wd[1] + wd[2]:
                    findings.append(
                        Finding(
                            peer, "queue not restored in time after the storm", peer_port, "PFC_WD"
                        )
                    )
                else:
                    figures["restored_ms"] = round((restored - end) * 1e3, 2)
        ok = f"detected after {figures.get('detected_ms', 0)} ms" + (
            f", restored {figures['restored_ms']} ms after the storm"
            if "restored_ms" in figures
            else ""
        )
        results.append(verdict(NAME, scope, findings, ok, figures))
    return results
