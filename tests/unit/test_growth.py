"""Stable growth (docs/design.md, "Growing a fabric"): each example fabric, and the 16-server
fabric of issue 38 (with racks of 9 for servers added in place), grown by servers in its
existing racks, by one rack (a leaf pair, or one scalable unit on rails) or by one pod keeps
every existing port, link, address, ASN and BGP session. Only the racks that gain servers
change when servers are added; only the switches cabled to the new leaves or spines change
when a rack or pod is added. A rack's size comes from the intent and its sizing
(`servers.per_rack`, the most servers a leaf keeps, or an even split of `leaves.count`); what
must not move is compared between the two designs and their generated configs."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import pytest
import yaml

from twin.design.graph import Design
from twin.design.sizing import size
from twin.intent import fabric as intent
from twin.lab import directory as labdir

REPO = Path(__file__).resolve().parents[2]
FILES = ("config_db.json", "frr.conf", "host.json")
NODE_FACTS = ("role", "asn", "loopback", "subnet", "svi", "address", "vlan", "pod")
EDGE_FACTS = ("a", "a_port", "b", "b_port", "a_bundle", "b_bundle", "a_ip", "b_ip", "prefix")
GPU: dict[str, Any] = {
    "name": "gpu",
    "spines": {"count": 2},
    "leaves": {"count": 4},
    "servers": {"count": 16, "name_prefix": "gpu", "nic_speed": "100G"},
}
"""Issue 38's fabric: 16 servers named gpu*, 2 x 100G dual-homed, 4 leaves, 2 spines."""


def fabric(name: str) -> dict[str, Any]:
    """An example's intent, the issue's fabric, or that fabric with racks of 9 servers."""
    if name == "gpu":
        return GPU
    if name == "gpu-per-rack":
        return {**GPU, "servers": {**GPU["servers"], "per_rack": 9}}
    data: dict[str, Any] = yaml.safe_load((REPO / "examples" / f"{name}.yaml").read_text())
    return data


def resized(data: dict[str, Any], servers: int, leaves: int | None = None) -> dict[str, Any]:
    """The intent with this many servers (and leaves, when the intent counts them)."""
    new = {**data, "servers": {**data["servers"], "count": servers}}
    if leaves is not None and "count" in data["leaves"]:
        new["leaves"] = {**data["leaves"], "count": leaves}
    return new


def per_rack(data: dict[str, Any]) -> int:
    """Servers a rack of this intent holds."""
    return size(intent.parse(data, "fabric.yaml"), "fabric.yaml").server_ports_per_leaf


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


def grown(
    tmp_path: Path, before: dict[str, Any], after: dict[str, Any]
) -> tuple[Design, Design, dict[str, int], set[str]]:
    """Both labs, the lines changed per existing device, and the new nodes; asserts that no
    existing node's facts and no existing link moved."""
    labs = []
    for name, data in (("before", before), ("after", after)):
        source = tmp_path / f"{name}.yaml"
        source.write_text(yaml.safe_dump(data))
        labs.append(labdir.generate(intent.load(source), tmp_path / name, str(source)))
    (old_nodes, old_links), (new_nodes, new_links) = placed(labs[0]), placed(labs[1])
    assert {n: new_nodes[n] for n in old_nodes} == old_nodes
    assert old_links <= new_links
    changed, added = changed_lines(tmp_path / "before", tmp_path / "after")
    sizes = [f"{d['servers']['count']} servers" for d in (before, after)]
    print(f"\n{tmp_path.name}: {' -> '.join(sizes)}: {sum(changed.values())} changed lines")
    print(f"  in existing devices ({len(changed)}), {added} lines of new devices")
    return labs[0], labs[1], changed, set(new_nodes) - set(old_nodes)


SERVERS = ("small", "reference", "rail", "big", "gpu-per-rack")


@pytest.mark.parametrize("example", SERVERS)
def test_servers_added_to_existing_racks_move_nothing(tmp_path: Path, example: str) -> None:
    """Two servers more in the existing racks (when the example's racks are full, the example
    is the grown lab): only the leaves that take them change, not a spine nor a server."""
    data = fabric(example)
    count = data["servers"]["count"]
    racks = -(-count // per_rack(data))
    base = count if racks * per_rack(data) >= count + 2 else count - 2
    before, after, changed, new = grown(tmp_path, resized(data, base), resized(data, base + 2))
    assert before.nodes("leaf") == after.nodes("leaf")
    assert {after.graph.nodes[n]["role"] for n in new} == {"server"}
    assert len({after.graph.nodes[n].get("server", n) for n in new}) == 2
    assert set(changed) == {leaf for n in new for leaf in after.graph.nodes[n]["leaves"]}


RACKS = {"small": (2, 0), "reference": (2, -1), "rail": (8, -1), "big": (2, 0), "gpu": (2, 0)}
"""Leaves per rack (a leaf pair, or on rails a scalable unit of 8 single-homed rail leaves),
and the racks the smaller lab has against the example: the reference's and the rail fabric's
spines are full (every port a downlink), so there the grown lab has the example's racks."""


def with_racks(data: dict[str, Any], rack_leaves: int, racks: int) -> dict[str, Any]:
    """The intent with `racks` full racks."""
    return resized(data, racks * per_rack(data), racks * rack_leaves)


def racks_of(data: dict[str, Any], rack_leaves: int) -> int:
    return size(intent.parse(data, "fabric.yaml"), "fabric.yaml").leaves // rack_leaves


def assert_only_cabled_switches_changed(
    after: Design, changed: dict[str, int], new: set[str], roles: set[str]
) -> None:
    """The existing devices that changed are those cabled to a new switch, of these roles."""
    switches = {n for n in new if after.graph.nodes[n]["role"] != "server"}
    cabled = {p for n in switches for p in after.graph.neighbors(n) if p not in new}
    assert set(changed) == cabled
    assert {after.graph.nodes[n]["role"] for n in cabled} == roles


@pytest.mark.parametrize("example", sorted(RACKS))
def test_growing_by_one_rack_moves_nothing(tmp_path: Path, example: str) -> None:
    data = fabric(example)
    rack_leaves, shift = RACKS[example]
    racks = racks_of(data, rack_leaves) + shift
    before, after, changed, new = grown(
        tmp_path, with_racks(data, rack_leaves, racks), with_racks(data, rack_leaves, racks + 1)
    )
    assert len(set(after.nodes("leaf")) - set(before.nodes("leaf"))) == rack_leaves
    assert_only_cabled_switches_changed(after, changed, new, {"spine"})


def test_growing_by_one_pod_moves_nothing(tmp_path: Path) -> None:
    """The big example's full pods (8 leaves each) and one rack more: a new pod, its spines
    cabled to every super-spine, which alone change."""
    data = fabric("big")
    sizing = size(intent.parse(data, "fabric.yaml"), "fabric.yaml")
    racks = (sizing.pods - 1) * sizing.leaves_per_pod // 2
    before, after, changed, new = grown(
        tmp_path, with_racks(data, 2, racks), with_racks(data, 2, racks + 1)
    )
    assert after.sizing.pods == before.sizing.pods + 1
    assert len(set(after.nodes("spine")) - set(before.nodes("spine"))) == sizing.spines_per_pod
    assert_only_cabled_switches_changed(after, changed, new, {"superspine"})
