"""Stable growth (docs/design.md, "Growing a fabric"): each example fabric grown by one rack
(a leaf pair, or one scalable unit on rails) keeps every existing port, link, address, ASN and
BGP session; only the new rack's devices and the spines' new downlinks and sessions change.
A rack's size comes from the example's intent and sizing (leaves per rack, the servers of its
smallest rack); what must not move is compared between the two designs and their configs."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import pytest
import yaml

from twin.design.graph import Design, design
from twin.intent import fabric as intent
from twin.lab import directory as labdir

REPO = Path(__file__).resolve().parents[2]
FILES = ("config_db.json", "frr.conf", "host.json")
NODE_FACTS = ("role", "asn", "loopback", "subnet", "svi", "address", "vlan", "pod")
EDGE_FACTS = ("a", "a_port", "b", "b_port", "a_bundle", "b_bundle", "a_ip", "b_ip", "prefix")


def with_racks(data: dict[str, Any], rack_leaves: int, more: int) -> dict[str, Any]:
    """The intent with `more` racks more (or fewer): `rack_leaves` leaves each (when the
    count is given), and as many servers as the smallest existing rack holds."""
    servers = data["servers"]["count"]
    racks = len(design(intent.parse(data, "fabric.yaml")).nodes("leaf")) // rack_leaves
    new = {**data, "servers": {**data["servers"], "count": servers + more * (servers // racks)}}
    if "count" in data["leaves"]:
        new["leaves"] = {**data["leaves"], "count": data["leaves"]["count"] + more * rack_leaves}
    return new


def placed(d: Design) -> tuple[dict[str, tuple[Any, ...]], set[tuple[Any, ...]]]:
    """Each node's assigned facts, and each link's ports, bundles and addresses."""
    nodes = {n: tuple(a.get(k) for k in NODE_FACTS) for n, a in d.graph.nodes(data=True)}
    links = {tuple(e[k] for k in EDGE_FACTS) for *_, e in d.graph.edges(data=True)}
    return nodes, links


def changed_lines(before: Path, after: Path) -> tuple[dict[str, int], int]:
    """(lines changed per existing device whose configs changed, lines of new devices)."""
    changed: dict[str, int] = {}
    added = 0
    for new in sorted((after / "configs").glob("*/*")):
        if new.name not in FILES:
            continue
        old = before / new.relative_to(after)
        lines = new.read_text().splitlines()
        if not old.exists():
            added += len(lines)
            continue
        diff = difflib.unified_diff(old.read_text().splitlines(), lines, n=0, lineterm="")
        count = sum(1 for ln in diff if ln[:1] in "+-" and ln[:3] not in ("+++", "---"))
        if count:
            changed[new.parent.name] = changed.get(new.parent.name, 0) + count
    return changed, added


RACKS = {"small": (2, 0), "reference": (2, -1), "rail": (8, -1), "big": (2, 0)}
"""Leaves per rack (a leaf pair, or on rails a scalable unit of 8 single-homed rail leaves),
and the racks the smaller lab has against the example: the reference's and the rail fabric's
spines are full (every port a downlink), so there the example is the grown lab."""


@pytest.mark.parametrize("example", sorted(RACKS))
def test_growing_by_one_rack_moves_nothing(tmp_path: Path, example: str) -> None:
    example_data = yaml.safe_load((REPO / "examples" / f"{example}.yaml").read_text())
    rack_leaves, shift = RACKS[example]
    data = with_racks(example_data, rack_leaves, shift)
    bigger = with_racks(example_data, rack_leaves, shift + 1)
    labs = []
    for name, intent_data in (("before", data), ("after", bigger)):
        source = tmp_path / f"{name}.yaml"
        source.write_text(yaml.safe_dump(intent_data))
        labs.append(labdir.generate(intent.load(source), tmp_path / name, str(source)))
    (old_nodes, old_links), (new_nodes, new_links) = placed(labs[0]), placed(labs[1])
    assert {n: new_nodes[n] for n in old_nodes} == old_nodes
    assert old_links <= new_links
    leaves = [n for n in new_nodes if new_nodes[n][0] == "leaf" and n not in old_nodes]
    assert len(leaves) == rack_leaves
    changed, added = changed_lines(tmp_path / "before", tmp_path / "after")
    print(f"{example}: {sum(changed.values())} changed lines in existing devices, {added} new")
    cabled = {p for leaf in leaves for p in labs[1].graph.neighbors(leaf) if p in old_nodes}
    assert set(changed) == cabled
    assert {labs[1].graph.nodes[n]["role"] for n in cabled} == {"spine"}
