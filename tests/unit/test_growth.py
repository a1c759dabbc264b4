"""Stable growth (docs/design.md, "Growing a fabric" and "Growing a lab").

With `servers.per_rack` (each example given its own rack size, and the 16-server fabric of
issue 38 with racks of 9), servers added to the existing racks, one rack (a leaf pair, or a
scalable unit on rails) or one pod more keep every existing port, link, address, ASN and BGP
session. Without it (every example as written, and issue 38's fabric as its user wrote it),
`twin generate --grow-from OLD` does: each example grown by one rack and by two servers keeps
every node and link of OLD, and only the racks that take the new servers and the switches
cabled to the new leaves change. The changed lines and `twin diff`'s config differences are
printed with and without `--grow-from`. What must not move is compared between the designs
and their generated configs; what may change is derived from the old lab and the intent.

"""

from __future__ import annotations

import difflib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from twin.cli import main as cli
from twin.design.graph import Design
from twin.design.sizing import Sizing, size
from twin.errors import DesignError
from twin.intent import fabric as intent
from twin.lab import directory as labdir
from twin.lab.diff import differences, lab_configs, rendered_configs

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


EXAMPLES = tuple(sorted(p.stem for p in (REPO / "examples").glob("*.yaml")))


def fabric(name: str) -> dict[str, Any]:
    """An example's intent (`NAME+per_rack`: with its own rack size as `servers.per_rack`),
    the issue's fabric, or that fabric with racks of 9 servers."""
    if name == "gpu":
        return GPU
    if name == "gpu-per-rack":
        return {**GPU, "servers": {**GPU["servers"], "per_rack": 9}}
    example, _, fixed = name.partition("+")
    data: dict[str, Any] = yaml.safe_load((REPO / "examples" / f"{example}.yaml").read_text())
    if fixed:
        data = {**data, "servers": {**data["servers"], "per_rack": per_rack(data)}}
    return data


def resized(data: dict[str, Any], servers: int, leaves: int | None = None) -> dict[str, Any]:
    """The intent with this many servers (and leaves, when the intent counts them)."""
    new = {**data, "servers": {**data["servers"], "count": servers}}
    if leaves is not None and "count" in data["leaves"]:
        new["leaves"] = {**data["leaves"], "count": leaves}
    return new


def size_of(data: dict[str, Any]) -> Sizing:
    return size(intent.parse(data, "fabric.yaml"), "fabric.yaml")


def per_rack(data: dict[str, Any]) -> int:
    """Servers a rack of this intent holds."""
    return size_of(data).server_ports_per_leaf


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


def write(tmp_path: Path, name: str, data: dict[str, Any], grow_from: str = "") -> Design:
    """The lab `name` of this intent, grown from the lab `grow_from` when given."""
    source = tmp_path / f"{name}.yaml"
    source.write_text(yaml.safe_dump(data))
    old = tmp_path / grow_from if grow_from else None
    return labdir.generate(intent.load(source), tmp_path / name, str(source), grow_from=old)


def report(tmp_path: Path, after: str, how: str) -> dict[str, int]:
    """The lines changed per existing device from lab `before` to lab `after`, printed with
    the lines of new devices and the count of `twin diff`'s config differences."""
    changed, added = changed_lines(tmp_path / "before", tmp_path / after)
    labs = [labdir.Lab.open(tmp_path / name) for name in ("before", after)]
    found = len(differences(lab_configs(labs[0]), lab_configs(labs[1])))
    test = os.environ.get("PYTEST_CURRENT_TEST", "").split("::")[-1].split(" ")[0]
    print(
        f"\n{test} {how}: {sum(changed.values())} changed lines in {len(changed)} existing "
        f"devices, {added} lines of new devices, {found} config differences (twin diff)"
    )
    return changed


def grown(
    tmp_path: Path, before: dict[str, Any], after: dict[str, Any], keep: bool = False
) -> tuple[Design, Design, dict[str, int], set[str]]:
    """Both labs (the second grown from the first with `keep`), the lines changed per
    existing device, and the new nodes; asserts that no existing node's facts and no
    existing link moved."""
    old = write(tmp_path, "before", before)
    new = write(tmp_path, "after", after, "before" if keep else "")
    (old_nodes, old_links), (new_nodes, new_links) = placed(old), placed(new)
    assert {n: new_nodes[n] for n in old_nodes} == old_nodes
    assert old_links <= new_links
    changed = report(tmp_path, "after", "--grow-from" if keep else "alone")
    return old, new, changed, set(new_nodes) - set(old_nodes)


SERVERS = ("small+per_rack", "reference+per_rack", "rail+per_rack", "big+per_rack", "gpu-per-rack")


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


RACKS = {
    "small": (2, 0),
    "small-100g": (2, 0),
    "reference": (2, -1),
    "rail": (8, -1),
    "big": (2, 0),
    "gpu": (2, 0),
}
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


@pytest.mark.parametrize(
    "example", ["small+per_rack", "reference+per_rack", "rail+per_rack", "big+per_rack", "gpu"]
)
def test_growing_by_one_rack_moves_nothing(tmp_path: Path, example: str) -> None:
    data = fabric(example)
    rack_leaves, shift = RACKS[example.partition("+")[0]]
    racks = racks_of(data, rack_leaves) + shift
    before, after, changed, new = grown(
        tmp_path, with_racks(data, rack_leaves, racks), with_racks(data, rack_leaves, racks + 1)
    )
    assert len(set(after.nodes("leaf")) - set(before.nodes("leaf"))) == rack_leaves
    assert_only_cabled_switches_changed(after, changed, new, {"spine"})


def test_growing_by_one_pod_moves_nothing(tmp_path: Path) -> None:
    """The big example's full pods (8 leaves each) and one rack more, grown from the smaller
    lab: a new pod, its spines cabled to every super-spine, which alone change (a design
    from the intent alone numbers the switches' MACs anew: the new pod's spines come before
    every leaf)."""
    data = fabric("big+per_rack")
    sizing = size(intent.parse(data, "fabric.yaml"), "fabric.yaml")
    racks = (sizing.pods - 1) * sizing.leaves_per_pod // 2
    before, after, changed, new = grown(
        tmp_path, with_racks(data, 2, racks), with_racks(data, 2, racks + 1), keep=True
    )
    assert after.sizing.pods == before.sizing.pods + 1
    assert len(set(after.nodes("spine")) - set(before.nodes("spine"))) == sizing.spines_per_pod
    assert_only_cabled_switches_changed(after, changed, new, {"superspine"})


def racks_with_room(d: Design) -> set[str]:
    """The leaves of the lab's racks that hold fewer servers than their server ports."""
    held: dict[str, int] = {}
    for *_, e in d.graph.edges(data=True):
        if e["kind"] == "server":
            held[e["a"]] = held.get(e["a"], 0) + 1
    return {n for n in d.nodes("leaf") if held.get(n, 0) < d.sizing.server_ports_per_leaf}


def grown_both_ways(
    tmp_path: Path, before: dict[str, Any], after: dict[str, Any]
) -> tuple[Design, Design, dict[str, int], set[str]]:
    """`grown` with `--grow-from`, and the same intent designed alone (`plain`), whose
    counts are printed beside."""
    result = grown(tmp_path, before, after, keep=True)
    write(tmp_path, "plain", after)
    report(tmp_path, "plain", "alone")
    return result


@pytest.mark.parametrize("example", [*EXAMPLES, "gpu"])
def test_grow_from_keeps_everything_when_a_rack_is_added(tmp_path: Path, example: str) -> None:
    """One rack more (and a rack's servers), grown from the lab: the new servers take the
    racks' free server ports first, then the new rack; only the spines (or super-spines)
    cabled to the new leaves and the leaves of racks that had room change."""
    data = fabric(example)
    rack_leaves, shift = RACKS[example]
    count, spare = data["servers"]["count"], per_rack(data)
    leaves = data["leaves"].get("count")
    base = resized(data, count + shift * spare, leaves and leaves + shift * rack_leaves)
    after_leaves = leaves and leaves + (shift + 1) * rack_leaves
    more = resized(data, count + (shift + 1) * spare, after_leaves)
    before, after, changed, new = grown_both_ways(tmp_path, base, more)
    assert len(set(after.nodes("leaf")) - set(before.nodes("leaf"))) == rack_leaves
    assert {after.graph.nodes[n]["role"] for n in new} - {"server", "spine"} == {"leaf"}
    cabled = {n for n in changed if after.graph.nodes[n]["role"] in ("spine", "superspine")}
    assert set(changed) - cabled <= racks_with_room(before)
    assert cabled


@pytest.mark.parametrize("example", [*EXAMPLES, "gpu"])
def test_grow_from_keeps_everything_when_two_servers_are_added(
    tmp_path: Path, example: str
) -> None:
    """Two servers more, grown from the lab (on rails, from the example less its last
    scalable unit and two servers: its spines and units are full, so two servers more would
    take a new unit): only the leaves that take them change."""
    data = fabric(example)
    count, leaves = data["servers"]["count"], data["leaves"].get("count")
    if example == "rail":
        data = resized(data, count - per_rack(data) - 2)
    count = data["servers"]["count"]
    _, after, changed, new = grown_both_ways(tmp_path, data, resized(data, count + 2, leaves))
    assert {after.graph.nodes[n]["role"] for n in new} == {"server"}
    assert len({after.graph.nodes[n].get("server", n) for n in new}) == 2
    assert {after.graph.nodes[n]["role"] for n in changed} == {"leaf"}
    assert set(changed) == {leaf for n in new for leaf in after.graph.nodes[n]["leaves"]}


def test_a_grown_lab_renders_as_its_intent_grown_again(tmp_path: Path) -> None:
    """A grown lab (two servers past issue 38's full racks, on ports after the uplinks)
    re-designs to itself, so config_drift and twin diff see it as generated; grown again it
    keeps its switches' MAC numbers, new switches numbered after them."""
    write(tmp_path, "before", GPU)
    write(tmp_path, "grown", resized(GPU, 18), "before")
    lab = labdir.Lab.open(tmp_path / "grown")
    assert rendered_configs(lab) == lab_configs(lab)
    leaf1 = lab.graph.nodes["gpu18"]["leaves"][0]
    ports = sorted(e["a_index"] for *_, e in lab.graph.edges(leaf1, data=True))
    assert ports[-1] == per_rack(GPU) + 2 + size_of(GPU).uplinks + 1
    again = write(tmp_path, "again", resized(GPU, 24, 6), "grown")
    numbers = json.loads((tmp_path / "grown" / "design.json").read_text())["grown"]
    assert {s: again.number(s) for s in numbers["mac_numbers"]} == numbers["mac_numbers"]
    assert sorted(again.number(s) for s in ("leaf5", "leaf6")) == [6, 7]


REFUSED = {
    "not a lab": ({}, "empty", "{tmp}/empty: not a lab directory (fabric.yaml missing"),
    "design.json not JSON": ({}, "garbled", "{tmp}/garbled/design.json: line 1: not valid JSON"),
    "design.json sizing": ({}, "unsized", "{tmp}/unsized/design.json: sizing: must hold"),
    "design.json rack": ({}, "moved", "{tmp}/moved/design.json: graph.nodes.gpu1: not a"),
    "leaves.count": ({"leaves": {"count": 5}}, "lab", "{src}: leaves.count: 5: not whole racks"),
    "speed": (
        {"servers": {**GPU["servers"], "nic_speed": "200G"}},
        "lab",
        "{src}: servers.nic_speed: 200G here, 100G in",
    ),
    "spines": ({"spines": {"count": 3}}, "lab", "{src}: spines.count: 3 here, 2 in"),
    "fewer servers": (
        {"servers": {**GPU["servers"], "count": 14}},
        "lab",
        "{src}: servers.count: 14, fewer than the 16",
    ),
    "fewer leaves": ({"leaves": {"count": 2}}, "lab", "{src}: leaves.count: 2, fewer than the 4"),
    "no room": (
        {"servers": {**GPU["servers"], "count": 40}},
        "lab",
        "{src}: servers.count: 40 servers do not fit",
    ),
}
"""Issue 38's fabric changed so, grown from its lab (or from a directory so broken), and the
start of the refusal."""


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_what_cannot_be_kept_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    """One line, exit 2, and no lab directory written."""
    change, old, expected = REFUSED[case]
    write(tmp_path, "lab", GPU)
    (tmp_path / "empty").mkdir()
    recorded = json.loads((tmp_path / "lab" / "design.json").read_text())
    server = next(n for n in recorded["graph"]["nodes"] if n["id"] == "gpu1")
    server["group"] = 2  # of 2 racks
    broken = {"garbled": "{", "unsized": '{"sizing": {}, "graph": {}}', "moved": recorded}
    for name, text in broken.items():
        shutil.copytree(tmp_path / "lab", tmp_path / name)
        (tmp_path / name / "design.json").write_text(
            text if isinstance(text, str) else json.dumps(text)
        )
    source = tmp_path / "grown.yaml"
    source.write_text(yaml.safe_dump({**GPU, **change}))
    capsys.readouterr()
    args = ["generate", str(source), "-o", str(tmp_path / "new"), "--grow-from"]
    assert cli.main([*args, str(tmp_path / old)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("twin: " + expected.format(tmp=tmp_path, src=source))
    assert not (tmp_path / "new").exists()


def test_a_third_tier_is_refused(tmp_path: Path) -> None:
    """The reference's spines are full: one rack more would need pods and super-spines."""
    data = fabric("reference")
    write(tmp_path, "before", data)
    with pytest.raises(DesignError, match=r"spines\.ports: 10 leaves need more than the 32"):
        write(tmp_path, "after", resized(data, data["servers"]["count"] + 13), "before")
