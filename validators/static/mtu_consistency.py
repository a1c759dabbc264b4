"""`mtu_consistency`: every port, bundle and VLAN between servers carries the servers' packets."""

from __future__ import annotations

from twin.configs.host import mtu as host_mtu
from twin.configs.qos import number, switch_ports
from twin.lab.directory import Lab
from validators.registry import Params, static
from validators.result import Finding, Result, merged, verdict


def _bundles(db: dict[str, dict[str, dict[str, str]]], ports: set[str]) -> dict[str, str]:
    """Bundles and VLANs holding any of `ports` (directly or through a bundle) -> table."""
    holders: dict[str, str] = {}
    for table in ("PORTCHANNEL_MEMBER", "VLAN_MEMBER"):
        for key in db.get(table, {}):
            holder, _, member = key.partition("|")
            if member in ports or member in holders:
                holders[holder] = table.split("_")[0]
    return holders


@static("mtu_consistency", header_bytes=0)
def mtu_consistency(lab: Lab, params: Params) -> list[Result]:
    """The MTU of every port, PortChannel and VLAN servers' traffic crosses carries the largest
    server MTU plus `header_bytes` (0).

    Both are IP MTUs: SONiC adds the Ethernet header, a VLAN tag and the FCS to a port's MTU
    for the ASIC, and Linux counts the IP packet, so only tunnel encapsulation needs room (set
    `header_bytes` to e.g. 50 for VXLAN).

    >>> from validators.examples import tiny_lab, edit_json
    >>> lab = tiny_lab()
    >>> mtu_consistency(lab, {"header_bytes": 0})[0].reason
    'every port carries 9000 B'
    >>> edit_json(lab, "spine2", lambda db: db["PORT"]["Ethernet8"].update(mtu="1500"))
    >>> print(mtu_consistency(lab, {"header_bytes": 0})[0].findings[0])
    spine2 Ethernet8 PORT: MTU 1500 < 9000 (largest server MTU + 0 B of headers)
    """
    hosts = {s: lab.host(s) for s in lab.nodes("server")}
    need = max(host_mtu(h) for h in hosts.values()) + params["header_bytes"]
    findings: list[Finding] = []
    smallest = 65535
    why = f"(largest server MTU + {params['header_bytes']} B of headers)"
    for switch, db, cabled in switch_ports(lab):
        places = dict.fromkeys(cabled, "PORT") | _bundles(db, set(cabled))
        for name, table in places.items():
            mtu = number(db.get(table, {}).get(name, {}).get("mtu"), 9100)
            smallest = min(smallest, mtu)
            if mtu < need:
                findings.append(Finding(switch, f"MTU {mtu} < {need} {why}", name, table))
    return [
        verdict(
            "mtu_consistency",
            "fabric",
            merged(findings),
            f"every port carries {need} B",
            {"required": need, "smallest_mtu": smallest},
        )
    ]
