"""Labs for the validators' doctests and tests, and the edits a person makes to their configs.

>>> lab = tiny_lab()
>>> lab.switches()
['spine1', 'spine2', 'leaf1', 'leaf2']
>>> edit_json(lab, "spine1", lambda db: db["PORT"]["Ethernet0"].update(mtu="1500"))
>>> lab.config_db("spine1")["PORT"]["Ethernet0"]["mtu"]
'1500'
>>> neighbor_address(lab, "spine1", "leaf2")
'10.1.0.4'
"""

from __future__ import annotations

import functools
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from twin.intent import fabric as intent
from twin.lab import directory as labdir
from twin.lab.directory import Lab

TINY = {
    "name": "tiny",
    "spines": {"count": 2, "ports": 8},
    "leaves": {"count": 2, "ports": 8, "peer_link_ports": 1, "uplinks_per_spine": 1},
    "servers": {"count": 2},
}
"""Two spines, one MLAG pair of leaves, two dual-homed servers."""


@functools.cache
def _root() -> tempfile.TemporaryDirectory[str]:
    """A temporary directory for tiny labs, made on first use and removed at exit."""
    return tempfile.TemporaryDirectory(prefix="twin-examples-")


def generate(out: Path, source: Path | dict[str, Any], **changes: Any) -> Lab:
    """Generate an intent (a file or its data), top-level keys replaced by `changes`."""
    data = yaml.safe_load(source.read_text()) if isinstance(source, Path) else source
    labdir.generate(intent.parse({**data, **changes}, str(source)), out, str(source))
    return Lab.open(out)


def tiny_lab(**changes: Any) -> Lab:
    """A fresh lab of the tiny fabric in a temporary directory."""
    return generate(Path(tempfile.mkdtemp(dir=_root().name)) / "lab", TINY, **changes)


def edit_json(
    lab: Lab, node: str, edit: Callable[[Any], Any], name: str = "config_db.json"
) -> None:
    """Load a device's JSON config, apply `edit` to it in place, and save it as a person would."""
    path = lab.path / "configs" / node / name
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data, indent=4) + "\n")


def roce_weight_1_against_99(db: dict[str, Any]) -> None:
    """A config_db edit: the RoCE queues' DWRR weight 1 against 99 for the lossy ones."""
    db["SCHEDULER"]["scheduler.rdma"]["weight"] = "1"
    db["SCHEDULER"]["scheduler.lossy"]["weight"] = "99"


def strict_bulk_queue(db: dict[str, Any]) -> None:
    """A config_db edit: the storage queue (1) of every port on a STRICT scheduler of its own."""
    db["SCHEDULER"]["scheduler.bulk"] = {"type": "STRICT"}
    for key, entry in db["QUEUE"].items():
        if key.endswith("|1"):
            entry["scheduler"] = "scheduler.bulk"


def add_frr_line(lab: Lab, node: str, line: str) -> None:
    """Add a top-level line (an `ip route`) to a switch's frr.conf."""
    path = lab.path / "configs" / node / "frr.conf"
    path.write_text(f"{line}\n{path.read_text()}")


def add_frr_policy(lab: Lab, node: str, binding: str, definitions: str) -> None:
    """Bind a policy in a switch's IPv4 unicast family (`binding`: e.g. `  neighbor FABRIC
    route-map NAME in`, after `neighbor FABRIC activate`) and define it at the top level."""
    path = lab.path / "configs" / node / "frr.conf"
    text = path.read_text()
    anchor = "  neighbor FABRIC activate\n"
    if anchor not in text:
        raise ValueError(f"{path}: no {anchor.strip()!r} to bind a policy after")
    path.write_text(text.replace(anchor, f"{anchor}{binding}\n") + definitions)


def neighbor_address(lab: Lab, switch: str, name: str) -> str:
    """The address a switch's BGP_NEIGHBOR table gives a neighbour, as a person looks it up."""
    neighbors = lab.config_db(switch)["BGP_NEIGHBOR"]
    return next(address for address, n in neighbors.items() if n["name"] == name)
