"""`ecn_thresholds`: WRED/ECN marking thresholds of lossless queues that DCQCN can work with."""

from __future__ import annotations

from twin.configs.qos import by_port, number, qos_map, switch_ports
from twin.design.headroom import frame_bytes
from twin.lab.directory import Lab
from twin.render.config_db import ConfigDb
from validators.registry import Params, static
from validators.result import Finding, Result, merged, verdict


def _queue_limit(db: ConfigDb, entry: dict[str, str]) -> int | None:
    """Bytes a queue may hold: its BUFFER_QUEUE profile's static_th, else its pool's size."""
    profile = db.get("BUFFER_PROFILE", {}).get(entry.get("profile", ""), {})
    if "static_th" in profile:
        return number(profile["static_th"])
    pool = db.get("BUFFER_POOL", {}).get(profile.get("pool", ""), {})
    return number(pool["size"]) if "size" in pool else None


def _check(
    switch: str,
    port: str,
    name: str,
    wred: dict[str, str],
    bdp: int,
    limit: int | None,
    min_kmin: int,
    params: Params,
) -> list[Finding]:
    kmin, kmax = number(wred.get("green_min_threshold")), number(wred.get("green_max_threshold"))
    pmax = number(wred.get("green_drop_probability"), 100)
    where = f"WRED_PROFILE|{name}"
    rules = [
        (kmin < kmax, f"Kmin {kmin} B is not below Kmax {kmax} B"),
        (limit is None or kmax <= limit, f"Kmax {kmax} B exceeds the queue's buffer {limit} B"),
        (kmin >= min_kmin, f"Kmin {kmin} B is below one frame ({min_kmin} B): marks every packet"),
        (
            kmin <= params["kmin_max_bdp"] * bdp,
            f"Kmin {kmin} B is above {params['kmin_max_bdp']} x BDP ({bdp} B): marks too late",
        ),
        (
            kmax >= params["kmax_min_bdp"] * bdp,
            f"Kmax {kmax} B is below {params['kmax_min_bdp']} x BDP ({bdp} B): starves the link",
        ),
        (0 < pmax <= 100, f"Pmax {pmax} % is outside 1..100"),
    ]
    return [Finding(switch, message, port, where) for ok, message in rules if not ok]


@static("ecn_thresholds", rtt_us=10.0, kmin_max_bdp=4.0, kmax_min_bdp=1.0)
def ecn_thresholds(lab: Lab, params: Params) -> list[Result]:
    """Kmin < Kmax, within the queue's buffer, and sensible against the link's BDP.

    For every lossless queue with a WRED profile, on every cabled port, with BDP = port speed
    x `rtt_us` (10 us): Kmin is at least one frame and at most `kmin_max_bdp` (4) x BDP;
    Kmax is at least `kmax_min_bdp` (1) x BDP and at most the queue's buffer (BUFFER_QUEUE
    profile static_th, else its pool); Pmax is 1..100 %. Queues without ECN are
    `pfc_consistency`'s findings.

    >>> from validators.examples import tiny_lab, edit_json
    >>> from validators.registry import get
    >>> lab = tiny_lab()
    >>> params = get("ecn_thresholds").params({})
    >>> ecn_thresholds(lab, params)[0].figures
    {'queues': 14, 'bdp_bytes_max': 500000}
    >>> edit_json(lab, "leaf2", lambda db: db["WRED_PROFILE"]["RDMA_ECN"].update(
    ...     green_max_threshold="100000"))
    >>> r = ecn_thresholds(lab, params)[0]
    >>> [f.message for f in r.findings]  # doctest: +NORMALIZE_WHITESPACE
    ['Kmin 153600 B is not below Kmax 100000 B',
     'Kmax 100000 B is below 1.0 x BDP (500000 B): starves the link']
    """
    lossless = lab.fabric.qos.lossless_priorities
    findings: list[Finding] = []
    queues, worst_bdp = 0, 0
    for switch, db, cabled in switch_ports(lab):
        queue_table, buffers = by_port(db, "QUEUE"), by_port(db, "BUFFER_QUEUE")
        for port in cabled:
            attrs = db.get("PORT", {}).get(port, {})
            bdp = int(number(attrs.get("speed")) * 1e6 * params["rtt_us"] * 1e-6 / 8)
            min_kmin = frame_bytes(number(attrs.get("mtu"), 9100))
            to_queue = qos_map(db, port, "tc_to_queue_map") or {}
            for p in lossless:
                q = to_queue.get(p, p)
                name = queue_table.get(port, {}).get(q, {}).get("wred_profile", "")
                wred = db.get("WRED_PROFILE", {}).get(name)
                if wred is None:
                    continue
                queues += 1
                worst_bdp = max(worst_bdp, bdp)
                limit = _queue_limit(db, buffers.get(port, {}).get(q, {}))
                findings += _check(switch, port, name, wred, bdp, limit, min_kmin, params)
    figures = {"queues": queues, "bdp_bytes_max": worst_bdp}
    ok = f"{queues} lossless queues mark ECN between sensible thresholds"
    return [verdict("ecn_thresholds", "fabric", merged(findings), ok, figures)]
