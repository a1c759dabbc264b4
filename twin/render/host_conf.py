"""Render each server's host file: what the server's own network setup must be.

A dual-homed server bonds its two NICs (LACP to the MLAG pair) and holds one address in its
pair's server VLAN, with the two leaves' SVI addresses as gateways; RoCE is marked by the RDMA
stack with the traffic class (DSCP << 2 | ECT(0)), other classes by DSCP rules on ports.
"""

from __future__ import annotations

from typing import Any

from twin.design.graph import Design, ports_of

ECT0 = 0b10


def render(d: Design, node: str) -> dict[str, Any]:
    """The host file (JSON) of one server."""
    f = d.fabric
    attrs = d.graph.nodes[node]
    nics = [p for p in ports_of(d.graph, node)]
    gateways = {leaf: d.graph.nodes[leaf]["svi"].split("/")[0] for leaf in attrs["leaves"]}
    interfaces = [
        {
            "name": p.name,
            "peer": p.peer,
            "peer_port": p.peer_port,
            "speed": p.speed,
            "gateway": gateways[p.peer],
        }
        for p in nics
    ]
    roce = f.qos.classes["roce"]
    return {
        "hostname": node,
        "mtu": f.mtu.host,
        "address": attrs["address"],
        "bond": (
            {"name": "bond0", "mode": "802.3ad", "members": [p.name for p in nics]}
            if len(nics) > 1
            else None
        ),
        "interfaces": interfaces,
        "routes": [
            {
                "dst": "0.0.0.0/0",
                "nexthops": [{"gateway": i["gateway"], "dev": i["name"]} for i in interfaces],
            }
        ],
        "dscp_marking": [
            {"class": name, "dscp": c.dscp, "ports": c.ports}
            for name, c in f.qos.classes.items()
            if c.ports
        ],
        "rdma": {
            "mode": "RoCEv2",
            "traffic_class": roce.dscp << 2 | ECT0,
            "dscp": roce.dscp,
            "pfc_priority": roce.tc,
            "cnp_dscp": f.qos.classes["cnp"].dscp,
            "ecn": True,
            "dcqcn": f.qos.dcqcn.model_dump(),
            "devices": [{"name": f"rxe_{p.name}", "netdev": p.name} for p in nics],
        },
    }
