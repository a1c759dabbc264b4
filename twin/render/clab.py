"""Render `topology.clab.yml` and its Clabernetes form: the lab as SONiC-VS and Linux containers.

Containerlab wires `ethN` endpoints (`eth0` is management); a switch's port at index i is
`eth<i+1>`, which the image attaches to the i-th row of its SKU's port table (containerlab
nodes/sonic/sonic.go, sonic-buildimage generate_vs_hwsku.py). Each switch runs its SKU
(`HWSKU`) and gets the container flavour of its configs (`clab/<switch>/`, see
`twin.render.sonic_vs`) bound where the image reads them: `config_db.json` at
`/var/sonic/config_db.json`, which start.sh copies to a writable `/etc/sonic/config_db.json`
before loading it, and `frr.conf` at `/etc/twin/frr.conf`, which the backend pushes with vtysh
once FRR runs. Servers are Linux containers that the backend configures through their network
namespace. The management network is the lab's own, sized to its node count, at a subnet of
its own (the block its name hashes to, or at deploy one no Docker network overlaps).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml

from twin import safeio
from twin.render import sonic_vs
from twin.render.source import LabSource

LINK_MTU = 9500
"""Containerlab's default veth MTU (docs/manual/network.md), above the switches' 9100."""
CLABERNETES_API = "clabernetes.containerlab.dev/v1alpha1"
POD_SECURITY = {"pod-security.kubernetes.io/enforce": "privileged"}
"""The namespace label clabverter writes: the launcher pods run privileged (Docker in the
pod), which a cluster enforcing the baseline or restricted Pod Security Standard refuses."""


def endpoint(index: int) -> str:
    """Containerlab's interface name for the `index`-th data port (0-based)."""
    return f"eth{index + 1}"


def network(lab_name: str) -> str:
    """The lab's own management network (the default `clab` network is shared by labs)."""
    return f"twin-{lab_name}"


def topology(lab: LabSource, taken: Sequence[str] = ()) -> dict[str, Any]:
    """The containerlab topology of a lab whose container flavour is written (its management
    subnet overlapping none of `taken`)."""
    facts = sonic_vs.image()
    nodes: dict[str, Any] = {}
    for switch in lab.switches():
        nodes[switch] = {
            "kind": "sonic-vs",
            "group": lab.graph.nodes[switch]["role"],
            "env": {"HWSKU": sonic_vs.sku_for(lab, switch).name},
            "binds": [
                f"{sonic_vs.FLAVOUR}/{switch}/config_db.json:{facts['config_db_path']}:ro",
                f"{sonic_vs.FLAVOUR}/{switch}/frr.conf:{facts['frr_conf_path']}:ro",
            ],
        }
    for server in lab.nodes("server"):
        nodes[server] = {"kind": "linux", "group": "server", "restart-policy": "no"}
    links = []
    for _, _, e in lab.graph.edges(data=True):
        a = lab.ifmap[e["a"]][e["a_port"]]["clab"]
        b = lab.ifmap[e["b"]][e["b_port"]]["clab"]
        links.append({"endpoints": [f"{e['a']}:{a}", f"{e['b']}:{b}"], "mtu": LINK_MTU})
    return {
        "name": lab.name,
        "mgmt": {
            "network": network(lab.name),
            "ipv4-subnet": sonic_vs.mgmt_subnet(lab.name, lab.graph.number_of_nodes(), taken),
        },
        "topology": {
            "kinds": {
                "sonic-vs": {"image": facts["image"]},
                "linux": {"image": facts["server_image"]},
            },
            "nodes": nodes,
            "links": links,
        },
    }


def dump(data: dict[str, Any]) -> str:
    """YAML text, keys in insertion order."""
    return yaml.dump(data, Dumper=yaml.CSafeDumper, sort_keys=False)


def clabernetes(lab: LabSource, topo: dict[str, Any]) -> str:
    """The Clabernetes form: a namespace (labelled to admit privileged pods), one ConfigMap
    per switch holding its bound files, and a Topology resource wrapping the same
    containerlab topology (clabernetes apis/v1alpha1/topologyspec.go; the shape clabverter
    writes)."""
    namespace = network(lab.name)
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": namespace, "labels": dict(POD_SECURITY)},
        }
    ]
    files: dict[str, list[dict[str, str]]] = {}
    for switch in lab.switches():
        name = f"{lab.name}-{switch}-files"
        folder = lab.path / sonic_vs.FLAVOUR / switch
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": namespace},
                "data": {f: (folder / f).read_text() for f in ("config_db.json", "frr.conf")},
            }
        )
        files[switch] = [
            {
                "filePath": f"{sonic_vs.FLAVOUR}/{switch}/{f}",
                "configMapName": name,
                "configMapPath": f,
                "mode": "read",
            }
            for f in ("config_db.json", "frr.conf")
        ]
    docs.append(
        {
            "apiVersion": CLABERNETES_API,
            "kind": "Topology",
            "metadata": {"name": lab.name, "namespace": namespace},
            "spec": {
                "definition": {"containerlab": dump(topo)},
                "deployment": {"filesFromConfigMap": files},
            },
        }
    )
    return yaml.dump_all(docs, Dumper=yaml.CSafeDumper, sort_keys=False)


def write(lab: LabSource, taken: Sequence[str] = ()) -> None:
    """Write the container flavour, `topology.clab.yml` and `clabernetes.yml` into the lab
    directory (the management subnet overlapping none of `taken`), or raise
    `sonic_vs.Refused` (writing nothing) when it cannot run there."""
    sonic_vs.check(lab)
    sonic_vs.write(lab, lab.path)
    topo = topology(lab, taken)
    safeio.write(lab.path / "topology.clab.yml", dump(topo))
    safeio.write(lab.path / "clabernetes.yml", clabernetes(lab, topo))
