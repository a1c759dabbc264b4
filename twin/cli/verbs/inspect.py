"""`twin inspect DIR [--json]`: nodes (with their addresses and, on containerlab, images), BGP
sessions and links of a running twin."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

import yaml

from twin.cli.options import add_backend, running
from twin.cli.text import table
from twin.intent.inputs import LAB_FILE_BYTES, read_text
from twin.lab.directory import Lab

HELP = "show a running twin: nodes and addresses, BGP sessions, links and their state"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument("lab", type=Path, help="lab directory")
    p.add_argument("--json", action="store_true", help="JSON instead of tables")
    add_backend(p)


def run(args: argparse.Namespace) -> int:
    """Print the twin's state."""
    lab = Lab.open(args.lab)
    status = running(args, lab).status(lab)
    where = addresses(lab)
    shown = images(lab) if status.backend in ("clab", "clabernetes") else {}
    if args.json:
        nodes = {n: {"address": where.get(n, "")} | ({"image": shown[n]} if n in shown else {})
                 for n in status.nodes}  # fmt: skip
        print(json.dumps(asdict(status) | {"addresses": nodes}, indent=2))
        return 0
    roles = {n: str(lab.graph.nodes[n]["role"]) for n in status.nodes}
    image = ["image"] if shown else []
    tables = [
        table(
            [
                [n, roles[n], state, where.get(n, ""), *([shown.get(n, "")] if shown else [])]
                for n, state in status.nodes.items()
            ],
            ["node", "role", "state", "address", *image],
        ),
        table(
            [[s.node, s.peer, s.name, s.state, str(s.prefixes)] for s in status.sessions],
            ["node", "peer", "name", "state", "prefixes"],
        ),
        table(
            [[k.a, k.a_port, k.b, k.b_port, "up" if k.up else "down"] for k in status.links],
            ["a", "port", "b", "port", "state"],
        ),
    ]
    print(f"{lab.name} on {status.backend}\n")
    print("\n\n".join("\n".join(t) for t in tables))
    return 0


def addresses(lab: Lab) -> dict[str, str]:
    """Each node's address as the design gives it: a switch's loopback, a server's lab
    address (the one its RoCE traffic comes from)."""
    found = {}
    for node, attrs in lab.graph.nodes(data=True):
        address = attrs.get("loopback") or (
            lab.host(node)["address"] if attrs["role"] == "server" else ""
        )
        found[node] = str(address).split("/")[0]
    return found


def images(lab: Lab) -> dict[str, str]:
    """Each node's container image, from the containerlab topology the lab was deployed with
    (a node's own, else its kind's)."""
    topo = yaml.safe_load(read_text(lab.path / "topology.clab.yml", LAB_FILE_BYTES))["topology"]
    kinds = topo.get("kinds", {})
    return {
        name: str(node.get("image") or kinds.get(node.get("kind"), {}).get("image", ""))
        for name, node in topo.get("nodes", {}).items()
    }
