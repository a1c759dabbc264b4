"""`schedulers`: every queue an intent class uses is scheduled as the intent says.

The intent's classes and `qos.rdma_scheduler_weight` fix each queue's scheduler (what
`twin.render.config_db` writes): a queue of a lossless class is DWRR with the RoCE weight,
the CNP queue is STRICT (CNPs go first), a queue of any other class DWRR with the lossy weight
(100 - the RoCE weight). The queue of a class is the one the port's TC -> queue map gives its
TC (`pfc_consistency` judges the maps).
"""

from __future__ import annotations

import math

from twin.configs.qos import cabled_queues
from twin.intent.fabric import Qos
from twin.lab.directory import Lab
from twin.render.config_db import ConfigDb
from validators.registry import Params, static
from validators.result import Finding, Result, merged, verdict

SAI_DEFAULT_TYPE = "WRR"
"""A SCHEDULER entry without `type`: qosorch sets no scheduling type (sonic-swss
orchagent/qosorch.cpp QosOrch::handleSchedulerTable), so SAI's default applies: WRR, by packets
(SAI saischeduler.h SAI_SCHEDULER_ATTR_SCHEDULING_TYPE)."""
Want = tuple[str, int | None, str]
"""A queue's scheduler by the intent: type, DWRR weight (None for STRICT), the class."""


def wanted(qos: Qos, to_queue: dict[int, int]) -> dict[int, Want]:
    """Per queue an intent class uses (and the queue of the DSCPs no class names): its
    scheduler (a lossless class first, then CNP).

    >>> from twin.intent.fabric import Qos
    >>> wanted(Qos(), {})
    {3: ('DWRR', 80, 'roce'), 6: ('STRICT', None, 'cnp'), 1: ('DWRR', 20, 'storage'), \
0: ('DWRR', 20, 'default')}
    """
    weight = qos.rdma_scheduler_weight
    rank = sorted(qos.classes, key=lambda n: (not qos.lossless(n), n != "cnp"))
    tcs = {name: c.tc for name, c in qos.classes.items()}
    if "default" not in tcs:  # the DSCPs no class names go to TC 0 (twin.render.config_db)
        rank.append("default")
        tcs["default"] = 0
    out: dict[int, Want] = {}
    for name in rank:
        tc = tcs[name]
        queue = to_queue.get(tc, tc)
        if queue in out:
            continue
        if qos.lossless(name):
            out[queue] = ("DWRR", weight, name)
        elif name == "cnp":
            out[queue] = ("STRICT", None, name)
        else:
            out[queue] = ("DWRR", 100 - weight, name)
    return out


def _weight(text: object) -> int | None:
    try:
        return int(str(text))
    except ValueError:
        return None


def _port(
    switch: str, db: ConfigDb, port: str, queues: dict[int, dict[str, str]], want: dict[int, Want]
) -> list[Finding]:
    """A port's findings: a queue without a scheduler, of the wrong type, or whose DWRR
    weights are not in the intent's proportions (each queue whose weight is not the
    intent's is named then)."""
    found = []
    dwrr: dict[int, tuple[int | None, str]] = {}
    for q, (kind, weight, name) in sorted(want.items()):
        sched = str(queues.get(q, {}).get("scheduler", "")).strip("[]")
        entry = db.get("SCHEDULER", {}).get(sched) if sched else None
        if entry is None:
            what = f"scheduler {sched} does not exist" if sched else "has no scheduler"
            found.append(Finding(switch, f"queue {q} ({name}) {what}", port, "QUEUE"))
            continue
        where = f"SCHEDULER|{sched}"
        got = entry.get("type", SAI_DEFAULT_TYPE)
        if got != kind:
            says = "STRICT" if weight is None else f"DWRR weight {weight}"
            found.append(
                Finding(switch, f"queue {q} ({name}) is {got}; the intent's {says}", port, where)
            )
        elif weight is not None:
            dwrr[q] = (_weight(entry.get("weight")), where)
    given = {q: w for q, (w, _) in dwrr.items()}
    intended = {q: want[q][1] or 0 for q in dwrr}
    if _proportional(given, intended):
        return found
    for q, (w, where) in dwrr.items():
        if w != intended[q]:
            message = f"queue {q} ({want[q][2]}) has DWRR weight {w}; the intent's {intended[q]}"
            found.append(Finding(switch, message, port, where))
    return found


def _proportional(given: dict[int, int | None], intended: dict[int, int]) -> bool:
    """Whether the weights share the bandwidth as the intent's do (a common factor apart).

    >>> _proportional({3: 160, 0: 40}, {3: 80, 0: 20}), _proportional({3: 1, 0: 99}, {3: 80, 0: 20})
    (True, False)
    """
    if any(w is None or w <= 0 for w in given.values()):
        return False
    total, whole = sum(w or 0 for w in given.values()), sum(intended.values())
    return all(math.isclose((given[q] or 0) / total, intended[q] / whole) for q in given)


@static("schedulers")
def schedulers(lab: Lab, params: Params) -> list[Result]:
    """Every queue an intent class uses is scheduled as its class says, on every cabled port.

    A lossless class's queue (RoCE) is DWRR with `qos.rdma_scheduler_weight`, the CNP queue
    STRICT, any other class's queue (storage, default) DWRR with 100 minus that weight;
    weights in the same proportions pass. A finding names the switch, its ports, the queue and
    its class, and the SCHEDULER entry (QUEUE when the queue has none). Queues no intent class
    uses are not judged. No thresholds.

    >>> from validators.examples import tiny_lab, edit_json
    >>> lab = tiny_lab()
    >>> schedulers(lab, {})[0].status.value
    'pass'
    >>> edit_json(lab, "leaf2", lambda db: db["SCHEDULER"]["scheduler.lossy"].update(type="STRICT"))
    >>> print(schedulers(lab, {})[0].findings[0])  # doctest: +ELLIPSIS
    leaf2 Ethernet0,...,Ethernet32 SCHEDULER|scheduler.lossy: queue 0 (default) is STRICT; ...
    """
    qos = lab.fabric.qos
    findings: list[Finding] = []
    ports = 0
    for switch, db, maps, name, queues in cabled_queues(lab):
        ports += 1
        findings += _port(
            switch, db, name, queues, wanted(qos, maps(name, "tc_to_queue_map") or {})
        )
    return [
        verdict(
            "schedulers",
            "fabric",
            merged(findings),
            f"{ports} ports: RoCE DWRR {qos.rdma_scheduler_weight}, CNP STRICT, "
            f"lossy DWRR {100 - qos.rdma_scheduler_weight}",
            {"switches": len(lab.switches()), "ports": ports},
        )
    ]
