"""`pfc_consistency`: the lossless class is lossless on every port servers' traffic can cross."""

from __future__ import annotations

from twin.configs.host import dscp as host_dscp
from twin.configs.qos import Maps, cabled_queues, host_dscps, map_name, pfc_enabled
from twin.intent.fabric import Qos
from twin.lab.directory import Lab
from validators.registry import Params, static
from validators.result import Finding, Result, merged, verdict

ECN_ON_GREEN = {"ecn_green", "ecn_green_yellow", "ecn_green_red", "ecn_all"}


def _maps(switch: str, maps: Maps, port: str, lossless: list[int]) -> list[Finding]:
    """TC -> PG and TC -> queue of each lossless priority agree with the PFC maps."""
    found = []
    pairs = (
        ("tc_to_pg_map", "pfc_to_pg_map", "priority group"),
        ("tc_to_queue_map", "pfc_to_queue_map", "queue"),
    )
    for tc_field, pfc_field, what in pairs:
        by_tc, by_pfc = maps(port, tc_field), maps(port, pfc_field)
        if by_tc is None:
            found.append(Finding(switch, f"no {tc_field}", port, "PORT_QOS_MAP"))
            continue
        for p in lossless:
            if by_pfc is not None and by_pfc.get(p) != by_tc.get(p):
                found.append(
                    Finding(
                        switch,
                        f"TC {p} goes to {what} {by_tc.get(p)} but PFC priority {p} to "
                        f"{by_pfc.get(p)}",
                        port,
                        f"{tc_field} / {pfc_field}",
                    )
                )
    return found


def _lossy(switch: str, maps: Maps, port: str, qos: Qos) -> list[Finding]:
    """The DSCP of each class the intent makes lossy (CNP apart: checked with RoCE) stays out
    of the lossless TCs and out of the TCs the port enables PFC on."""
    found = []
    lossless = set(qos.lossless_priorities) | pfc_enabled(maps.db, port)
    where = f"DSCP_TO_TC_MAP|{map_name(maps.db, port, 'dscp_to_tc_map')}"
    to_tc = maps(port, "dscp_to_tc_map") or {}
    for name, cls in sorted(qos.classes.items()):
        tc = to_tc.get(cls.dscp, 0)
        if name != "cnp" and not qos.lossless(name) and tc in lossless:
            message = (
                f"DSCP {cls.dscp} (class {name}, lossy by the intent) maps to lossless TC {tc}"
            )
            found.append(Finding(switch, message, port, where))
    return found


def _hosts(lab: Lab, qos: Qos) -> list[Finding]:
    """Each server marks every class with the intent's DSCP for it (RDMA: RoCE and CNP;
    `dscp_marking` rules: their class), naming the class whose DSCP it took instead."""
    owner = {c.dscp: name for name, c in qos.classes.items()}
    found = []
    for server in lab.nodes("server"):
        host = lab.host(server)
        rdma = host.get("rdma")
        marks = []
        if isinstance(rdma, dict):
            marks += [
                ("roce", host_dscp(rdma, "dscp"), "rdma dscp"),
                ("cnp", host_dscp(rdma, "cnp_dscp"), "rdma"),
            ]
        rules = host.get("dscp_marking")
        marks += [
            (str(r.get("class")), host_dscp(r, "dscp"), f"dscp_marking[{i}]")
            for i, r in enumerate(rules if isinstance(rules, list) else [])
            if isinstance(r, dict)
        ]
        for cls, value, where in marks:
            want = qos.classes.get(cls)
            if want is None or value == want.dscp:
                continue
            if value is None:
                message = f"no DSCP for class {cls} (the NIC's default); the intent's {want.dscp}"
                found.append(Finding(server, message, "", f"host.json {where}"))
                continue
            taken = owner.get(value)
            whose = ""
            if taken is not None:
                whose = f", class {taken}'s ({'lossless' if qos.lossless(taken) else 'lossy'})"
            message = (
                f"marks class {cls} with DSCP {value}{whose}; "
                f"the intent gives {cls} DSCP {want.dscp}"
            )
            found.append(Finding(server, message, "", f"host.json {where}"))
    return found


def _classes(
    switch: str, maps: Maps, port: str, lossless: list[int], roce: set[int], cnp: set[int]
) -> list[Finding]:
    """RoCE DSCPs land in a lossless TC; CNP DSCPs in a lossy TC on a higher queue."""
    found = []
    enabled = pfc_enabled(maps.db, port)
    queues = maps(port, "tc_to_queue_map") or {}
    to_tc = maps(port, "dscp_to_tc_map")
    if to_tc is None:
        return [
            Finding(switch, "no dscp_to_tc_map (every DSCP goes to TC 0)", port, "PORT_QOS_MAP")
        ]
    roce_queues = set()
    for dscp in sorted(roce):
        tc = to_tc.get(dscp, 0)
        roce_queues.add(queues.get(tc, tc))
        if tc not in lossless:
            found.append(
                Finding(
                    switch,
                    f"RoCE DSCP {dscp} maps to TC {tc}, not a lossless priority "
                    f"({','.join(map(str, lossless))})",
                    port,
                    "DSCP_TO_TC_MAP",
                )
            )
    for dscp in sorted(cnp):
        tc = to_tc.get(dscp, 0)
        queue = queues.get(tc, tc)
        if tc in lossless or tc in enabled:
            found.append(
                Finding(switch, f"CNP DSCP {dscp} maps to lossless TC {tc}", port, "DSCP_TO_TC_MAP")
            )
        if roce_queues and queue <= max(roce_queues):
            found.append(
                Finding(
                    switch,
                    f"CNP DSCP {dscp} goes to queue {queue}, not above the RoCE queue "
                    f"{max(roce_queues)}",
                    port,
                    "TC_TO_QUEUE_MAP",
                )
            )
    return found


def _ecn(
    switch: str, maps: Maps, port: str, entries: dict[int, dict[str, str]], lossless: list[int]
) -> list[Finding]:
    """Each lossless queue has a WRED profile that marks ECN on green packets."""
    found = []
    db = maps.db
    queues = maps(port, "tc_to_queue_map") or {}
    for p in lossless:
        q = queues.get(p, p)
        profile = entries.get(q, {}).get("wred_profile")
        wred = db.get("WRED_PROFILE", {}).get(profile or "")
        where = f"QUEUE|{port}|{q}"
        if profile is None:
            found.append(Finding(switch, f"lossless queue {q} has no WRED profile", port, where))
        elif wred is None:
            found.append(Finding(switch, f"WRED profile {profile} does not exist", port, where))
        elif (
            wred.get("ecn", "ecn_none") not in ECN_ON_GREEN
            or wred.get("wred_green_enable") != "true"
        ):
            found.append(
                Finding(
                    switch,
                    f"ECN is off on lossless queue {q} (ecn {wred.get('ecn', 'ecn_none')}, "
                    f"wred_green_enable {wred.get('wred_green_enable', 'false')})",
                    port,
                    f"WRED_PROFILE|{profile}",
                )
            )
    return found


@static("pfc_consistency")
def pfc_consistency(lab: Lab, params: Params) -> list[Result]:
    """Every port servers' traffic can cross keeps the RoCE class lossless and ECN-marked.

    On every cabled port of every switch (server, fabric and MLAG peer-link ports: the paths
    between servers, failovers included): PFC is enabled on the intent's lossless priorities;
    the DSCP servers use for RoCE maps to a lossless TC; the lossless TCs' priority group and
    queue agree with the PFC maps; CNP DSCPs map to a lossy TC on a higher queue; the lossless
    queue has a WRED profile with ECN on; no class the intent makes lossy maps into a lossless
    TC. The RoCE DSCPs are the intent's lossless classes' and what the servers mark for RDMA.
    Scope `hosts`: every server marks each class with the intent's DSCP for it (a backup
    marked into DSCP 26 rides the lossless class). No thresholds.

    >>> from validators.examples import tiny_lab, edit_json
    >>> lab = tiny_lab()
    >>> pfc_consistency(lab, {})[0].status.value
    'pass'
    >>> edit_json(lab, "spine1", lambda db: db["PORT_QOS_MAP"]["Ethernet0"].update(pfc_enable=""))
    >>> print(pfc_consistency(lab, {})[0].findings[0])
    spine1 Ethernet0 PORT_QOS_MAP: PFC is not enabled on priority 3 (pfc_enable '')
    """
    qos = lab.fabric.qos
    lossless = qos.lossless_priorities
    marks = host_dscps(lab)
    roce = marks["roce"] | {c.dscp for name, c in qos.classes.items() if qos.lossless(name)}
    findings: list[Finding] = []
    ports = 0
    for switch, db, maps, name, queues in cabled_queues(lab):
        ports += 1
        enabled = pfc_enabled(db, name)
        findings += [
            Finding(
                switch,
                f"PFC is not enabled on priority {p} (pfc_enable "
                f"'{db.get('PORT_QOS_MAP', {}).get(name, {}).get('pfc_enable', '')}')",
                name,
                "PORT_QOS_MAP",
            )
            for p in lossless
            if p not in enabled
        ]
        findings += _classes(switch, maps, name, lossless, roce, marks["cnp"])
        findings += _lossy(switch, maps, name, qos)
        findings += _maps(switch, maps, name, lossless)
        findings += _ecn(switch, maps, name, queues, lossless)
    return [
        verdict(
            "pfc_consistency",
            "fabric",
            merged(findings),
            f"{ports} ports lossless on priority {','.join(map(str, lossless))} with ECN",
            {"switches": len(lab.switches()), "ports": ports},
        ),
        verdict(
            "pfc_consistency",
            "hosts",
            _hosts(lab, qos),
            f"{len(lab.nodes('server'))} servers mark every class with the intent's DSCP",
            {"servers": len(lab.nodes("server"))},
        ),
    ]
