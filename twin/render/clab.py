"""Render `topology.clab.yml`: the same lab as SONiC-VS switches and Linux hosts.

Containerlab wires `ethN` endpoints; docker-sonic-vs maps `eth1` to its first front-panel port,
so a switch's ports get `eth1`, `eth2`, ... in port order, and a server's NICs likewise. Each
switch's `config_db.json` and `frr.conf` are bound into the container; each server is set up by
`exec` commands derived from its host file.
"""

from __future__ import annotations

from typing import Any

import yaml

from twin.design.graph import Design, platform

SERVER_IMAGE = "ghcr.io/hellt/network-multitool:latest"


def endpoint(index: int) -> str:
    """Containerlab's interface name for the `index`-th data port (0-based)."""
    return f"eth{index + 1}"


def server_exec(host: dict[str, Any]) -> list[str]:
    """Commands that set a Linux container up as the host file says (L3 dual-homing)."""
    address = host["address"].split("/")[0]
    cmds = []
    for i, nic in enumerate(host["interfaces"]):
        dev = endpoint(i)
        cmds += [f"ip link set {dev} mtu {host['mtu']} up", f"ip addr add {address}/32 dev {dev}"]
        cmds.append(f"ip route add {nic['gateway']}/32 dev {dev} scope link")
    hops = " ".join(
        f"nexthop via {nic['gateway']} dev {endpoint(i)} weight 1"
        for i, nic in enumerate(host["interfaces"])
    )
    cmds.append(f"ip route replace default {hops}")
    return cmds


def render(d: Design, hosts: dict[str, dict[str, Any]], ifmap: dict[str, dict[str, Any]]) -> str:
    """The containerlab topology file of the lab."""
    nodes: dict[str, Any] = {}
    for switch in d.switches():
        nodes[switch] = {
            "kind": "sonic-vs",
            "group": d.graph.nodes[switch]["role"],
            "binds": [
                f"configs/{switch}/config_db.json:/etc/sonic/config_db.json:ro",
                f"configs/{switch}/frr.conf:/etc/sonic/frr/frr.conf:ro",
            ],
        }
    for server in d.nodes("server"):
        nodes[server] = {
            "kind": "linux",
            "group": "server",
            "exec": server_exec(hosts[server]),
        }
    links = []
    for _, _, e in d.graph.edges(data=True):
        a = ifmap[e["a"]][e["a_port"]]["clab"]
        b = ifmap[e["b"]][e["b_port"]]["clab"]
        links.append({"endpoints": [f"{e['a']}:{a}", f"{e['b']}:{b}"], "mtu": 9500})
    topology = {
        "name": d.fabric.name,
        "topology": {
            "kinds": {
                "sonic-vs": {"image": platform()["image"]},
                "linux": {"image": SERVER_IMAGE},
            },
            "nodes": nodes,
            "links": links,
        },
    }
    return yaml.dump(topology, Dumper=yaml.CSafeDumper, sort_keys=False)
