"""`host_rdma`: every server's host file holds the RDMA, congestion-control and MTU settings
the intent implies.

What is expected comes from the intent (`qos`, `mtu.host`) and the design (each NIC's
speed), never from the host file under test. The DSCPs a server marks (RoCE, CNP and each
`dscp_marking` rule) are `pfc_consistency`'s scope `hosts`.
"""

from __future__ import annotations

import json
import math
from typing import Any

from twin.configs.host import LINUX_MTU
from twin.configs.host import mtu as host_mtu
from twin.intent.fabric import Fabric
from twin.lab.directory import Lab
from twin.render.host_conf import ECT0
from validators.registry import Params, static
from validators.result import Finding, Result, merged, verdict

ECN_BITS = {0: "Not-ECT", 1: "ECT(1)", 2: "ECT(0)", 3: "CE"}
LINE_RATE_KEYS = ("min_rate_mbps", "r_ai_mbps", "r_hai_mbps")
"""DCQCN rates that must stay below a NIC's line rate for DCQCN to cut or raise anything."""


def _traffic_class(value: int) -> str:
    """A traffic class as its DSCP and ECN bits.

    >>> _traffic_class(106)
    'DSCP 26, ECT(0)'
    """
    return f"DSCP {value >> 2}, {ECN_BITS[value & 3]}"


def _differs(got: Any, want: Any) -> bool:
    """Whether a host-file value is not the intent's (numbers compared as numbers)."""
    if isinstance(want, bool) or not isinstance(want, int | float):
        return bool(got != want)
    if isinstance(got, bool) or not isinstance(got, int | float):
        return True
    return not math.isclose(float(got), float(want), rel_tol=1e-9)


def _dcqcn(server: str, given: Any, fabric: Fabric, speeds: dict[str, int]) -> list[Finding]:
    """Each DCQCN parameter as the intent's; its rates below each NIC's line rate."""
    where = "host.json rdma.dcqcn"
    if not isinstance(given, dict):
        return [Finding(server, "no DCQCN parameters (the NIC's own defaults)", "", where)]
    found = []
    for key, want in fabric.qos.dcqcn.model_dump().items():
        got = given.get(key)
        if got is None:
            found.append(
                Finding(server, f"{key} missing; the intent's {want}", "", f"{where}.{key}")
            )
        elif _differs(got, want):
            found.append(
                Finding(server, f"{key} is {got}, the intent's {want}", "", f"{where}.{key}")
            )
    for key in LINE_RATE_KEYS:
        got = given.get(key)
        if isinstance(got, bool) or not isinstance(got, int | float):
            continue
        for nic, speed in speeds.items():
            if got >= speed:
                message = (
                    f"{key} {got} is not below the NIC's line rate ({speed} Mb/s): "
                    f"DCQCN cannot {'slow it' if key == 'min_rate_mbps' else 'pace its increases'}"
                )
                found.append(Finding(server, message, nic, f"{where}.{key}"))
    return found


def _rdma(
    server: str, rdma: dict[str, Any], fabric: Fabric, speeds: dict[str, int]
) -> list[Finding]:
    """The RDMA stack's settings: RoCEv2, its traffic class with ECT, the RoCE priority, ECN,
    DCQCN, one RDMA device per NIC."""
    qos = fabric.qos
    roce = qos.classes["roce"]
    found = []

    def check(key: str, want: Any, message: str) -> None:
        if _differs(rdma.get(key), want):
            found.append(Finding(server, message, "", f"host.json rdma.{key}"))

    check("mode", "RoCEv2", f"mode {rdma.get('mode')!r}; the intent's RoCE is routed: RoCEv2")
    tclass, want_tclass = rdma.get("traffic_class"), roce.dscp << 2 | ECT0
    shown = _traffic_class(tclass) if isinstance(tclass, int) and 0 <= tclass < 256 else "none"
    check(
        "traffic_class",
        want_tclass,
        f"traffic_class {tclass} ({shown}); the intent's {want_tclass} "
        f"({_traffic_class(want_tclass)}: RoCE ECN-capable)",
    )
    lossless = qos.lossless_priorities
    where_to = "a lossless priority" if rdma.get("pfc_priority") in lossless else "lossy"
    check(
        "pfc_priority",
        roce.tc,
        f"pfc_priority {rdma.get('pfc_priority')} ({where_to}); the intent's RoCE priority is "
        f"{roce.tc}: the NIC holds RoCE on the priority the switches pause",
    )
    check(
        "ecn",
        True,
        f"ecn is {rdma.get('ecn')}: the NIC neither reacts to CNPs nor sends them (DCQCN off); "
        "the intent's RoCE class is ECN-controlled",
    )
    found += _dcqcn(server, rdma.get("dcqcn"), fabric, speeds)
    devices = rdma.get("devices") or []
    covered = {d.get("netdev") for d in devices if isinstance(d, dict)}
    found += [
        Finding(server, "no RDMA device on this NIC", nic, "host.json rdma.devices")
        for nic in speeds
        if nic not in covered
    ]
    return found


def _host(lab: Lab, server: str) -> list[Finding]:
    """One server's findings."""
    fabric = lab.fabric
    host = lab.host(server)
    speeds = {p.name: p.speed for p in lab.ports(server)}
    found = []
    mtu = host.get("mtu")
    if _differs(mtu, fabric.mtu.host):
        shown = f"MTU {json.dumps(mtu)}" if "mtu" in host else "no MTU"
        if mtu != host_mtu(host):
            shown += f" (the NICs take Linux's {LINUX_MTU})"
        message = f"{shown}; the intent's {fabric.mtu.host}"
        found.append(Finding(server, message, "", "host.json mtu"))
    rdma = host.get("rdma")
    if not isinstance(rdma, dict):
        return [*found, Finding(server, "no RDMA settings (no RoCE)", "", "host.json rdma")]
    return found + _rdma(server, rdma, fabric, speeds)


@static("host_rdma")
def host_rdma(lab: Lab, params: Params) -> list[Result]:
    """Every server's host file has the RDMA, DCQCN and MTU settings the intent implies.

    Per server: `mtu` is the intent's `mtu.host`; `rdma.mode` is RoCEv2; `rdma.traffic_class`
    is the RoCE DSCP with ECT(0); `rdma.pfc_priority` is the RoCE class's TC (the priority the
    switches pause it on); `rdma.ecn` is on (the NIC reacts to CNPs and sends them); every
    `rdma.dcqcn` parameter is the intent's `qos.dcqcn`, and its minimum rate and increase
    steps are below each NIC's line rate (the design's speed); each NIC has an RDMA device. A
    finding names the server, the NIC where the setting is the NIC's, and the host-file key.
    No thresholds.

    >>> from validators.examples import tiny_lab, edit_json
    >>> lab = tiny_lab()
    >>> host_rdma(lab, {})[0].reason
    '2 servers: RoCEv2 with ECN, DCQCN and MTU as the intent says'
    >>> edit_json(lab, "server1", lambda h: h["rdma"].update(ecn=False), "host.json")
    >>> print(host_rdma(lab, {})[0].findings[0])  # doctest: +ELLIPSIS
    server1 host.json rdma.ecn: ecn is False: the NIC neither reacts to CNPs nor sends them ...
    """
    servers = lab.nodes("server")
    findings = [f for server in servers for f in _host(lab, server)]
    return [
        verdict(
            "host_rdma",
            "hosts",
            merged(findings),
            f"{len(servers)} servers: RoCEv2 with ECN, DCQCN and MTU as the intent says",
            {"servers": len(servers)},
        )
    ]
