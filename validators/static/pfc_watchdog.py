"""`pfc_watchdog`: the PFC watchdog guards every lossless queue, with timers that act in time."""

from __future__ import annotations

from twin.configs.qos import number, port_qos, priorities, switch_ports
from twin.lab.directory import Lab
from validators.registry import Params, static
from validators.result import Finding, Result, merged, verdict

POLL_RANGE = range(100, 1001)
"""POLL_INTERVAL bounds (ms) of sonic-pfcwd.yang."""


def _timers(
    switch: str, port: str, entry: dict[str, str], poll: int, params: Params
) -> list[Finding]:
    detection = number(entry.get("detection_time"))
    restoration = number(entry.get("restoration_time"))
    action = entry.get("action", "drop")
    rules = [
        (action in params["actions"], f"action {action} does not stop a storm"),
        (
            poll <= detection <= params["max_detection_ms"],
            f"detection_time {detection} ms is outside {poll}..{params['max_detection_ms']} ms",
        ),
        (
            poll <= restoration <= params["max_restoration_ms"],
            f"restoration_time {restoration} ms is outside {poll}.."
            f"{params['max_restoration_ms']} ms",
        ),
    ]
    return [Finding(switch, message, port, "PFC_WD") for ok, message in rules if not ok]


@static(
    "pfc_watchdog", actions=["drop", "forward"], max_detection_ms=1000, max_restoration_ms=10000
)
def pfc_watchdog(lab: Lab, params: Params) -> list[Result]:
    """The PFC watchdog is on for the lossless queues of every cabled port, with sane timers.

    Per switch: PFC_WD GLOBAL POLL_INTERVAL is 100..1000 ms. Per cabled port: PORT_QOS_MAP
    `pfcwd_sw_enable` covers the intent's lossless priorities; PFC_WD has the port, with an
    action in `actions` (drop, forward: `alert` only logs), detection_time between the poll
    interval and `max_detection_ms` (1000) and restoration_time between the poll interval and
    `max_restoration_ms` (10000).

    >>> from validators.examples import tiny_lab, edit_json
    >>> from validators.registry import get
    >>> lab = tiny_lab()
    >>> params = get("pfc_watchdog").params({})
    >>> pfc_watchdog(lab, params)[0].reason
    'watchdog on 14 ports, detection up to 200 ms'
    >>> edit_json(lab, "leaf1", lambda db: db["PFC_WD"]["Ethernet0"].update(detection_time="5000"))
    >>> print(pfc_watchdog(lab, params)[0].findings[0])
    leaf1 Ethernet0 PFC_WD: detection_time 5000 ms is outside 200..1000 ms
    """
    lossless = lab.fabric.qos.lossless_priorities
    findings: list[Finding] = []
    ports, slowest = 0, 0
    for switch, db, cabled in switch_ports(lab):
        table = db.get("PFC_WD", {})
        poll = number(table.get("GLOBAL", {}).get("POLL_INTERVAL"), 200)
        if poll not in POLL_RANGE:
            findings.append(
                Finding(
                    switch, f"POLL_INTERVAL {poll} ms is outside 100..1000", "", "PFC_WD|GLOBAL"
                )
            )
        for port in cabled:
            ports += 1
            guarded = priorities(port_qos(db, port).get("pfcwd_sw_enable", ""))
            missing = [str(p) for p in lossless if p not in guarded]
            if missing:
                findings.append(
                    Finding(
                        switch,
                        f"watchdog off on priority {','.join(missing)}",
                        port,
                        "PORT_QOS_MAP",
                    )
                )
            if port not in table:
                findings.append(Finding(switch, "no watchdog entry", port, "PFC_WD"))
                continue
            findings += _timers(switch, port, table[port], poll, params)
            slowest = max(slowest, number(table[port].get("detection_time")))
    ok = f"watchdog on {ports} ports, detection up to {slowest} ms"
    return [
        verdict(
            "pfc_watchdog",
            "fabric",
            merged(findings),
            ok,
            {"ports": ports, "max_detection_ms": slowest},
        )
    ]
