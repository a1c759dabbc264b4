"""`twin generate`: the golden lab, SONiC YANG and FRR validity, the containerlab file, atomicity.

`tests/golden/small/` is the lab directory of examples/small.yaml, compared file by file.
After an intended change, run `tests/regenerate_golden.py` and review the diff.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from twin.errors import LabError
from twin.intent import fabric as intent
from twin.lab import directory as labdir
from twin.lab.directory import Lab
from twin.render import frr_conf, host_conf

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden"
ENDPOINT = re.compile(r"^(?P<node>[a-z][a-z0-9-]*):eth(?P<n>[1-9][0-9]*)$")


def _generate(name: str, out: Path) -> Path:
    source = Path("examples") / f"{name}.yaml"
    labdir.generate(intent.load(REPO / source), out, str(source))
    return out


@pytest.fixture(scope="module", params=["reference", "small"])
def lab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Lab:
    """The generated lab of examples/reference.yaml and of examples/small.yaml."""
    name: str = request.param
    return Lab.open(_generate(name, tmp_path_factory.mktemp(name) / name))


def _files(root: Path) -> dict[str, bytes]:
    files = sorted(p for p in root.rglob("*") if p.is_file())
    return {str(p.relative_to(root)): p.read_bytes() for p in files}


# --------------------------------------------------------------------------- golden lab
def test_small_lab_matches_golden_file_by_file(tmp_path: Path) -> None:
    expected = _files(GOLDEN / "small")
    actual = _files(_generate("small", tmp_path / "small"))
    assert sorted(actual) == sorted(expected), "files differ; see tests/regenerate_golden.py"
    for name in expected:
        assert actual[name].decode() == expected[name].decode(), name


def test_golden_lab_has_every_part() -> None:
    names = set(_files(GOLDEN / "small"))
    top = {"fabric.yaml", "design.json", "ifmap.json", "topology.clab.yml", "clabernetes.yml"}
    assert top <= names
    switches = ("spine1", "spine2", "leaf1", "leaf2", "leaf3", "leaf4")
    for switch in switches:
        for folder in ("configs", "clab"):
            assert {f"{folder}/{switch}/config_db.json", f"{folder}/{switch}/frr.conf"} <= names
    for server in ("server1", "server2", "server3", "server4"):
        assert {f"configs/{server}/host.json", f"clab/{server}/host.json"} <= names
    assert len(names) == len(top) + 2 * (2 * len(switches) + 4)


def test_generation_is_deterministic(tmp_path: Path) -> None:
    first = _files(_generate("reference", tmp_path / "a"))
    assert first == _files(_generate("reference", tmp_path / "b"))


def test_resolved_intent_rebuilds_the_same_lab(lab: Lab, tmp_path: Path) -> None:
    again = tmp_path / "again"
    labdir.generate(intent.load(lab.path / "fabric.yaml"), again)
    assert _files(again) == _files(lab.path)


# --------------------------------------------------------------------------- validity
def test_every_config_db_validates_against_sonic_yang(lab: Lab) -> None:
    pytest.importorskip("libyang", reason="SONiC YANG validation needs libyang==2.7.1")
    from twin.yang.check import validate_config_db

    switches = lab.switches()
    assert switches
    problems = {s: validate_config_db(lab.config_db(s)) for s in switches}
    assert {s: p for s, p in problems.items() if p} == {}


def test_yang_check_catches_a_broken_config(lab: Lab) -> None:
    """The validator is not vacuous on our output: a bad MTU on a leaf is reported."""
    pytest.importorskip("libyang", reason="SONiC YANG validation needs libyang==2.7.1")
    from twin.yang.check import validate_config_db

    config = lab.config_db("leaf1")
    config["PORT"]["Ethernet0"]["mtu"] = "99999"
    problems = validate_config_db(config)
    assert problems and "Ethernet0" in problems[0] and "mtu" in problems[0]


def _vtysh() -> str:
    path = shutil.which("vtysh")
    if path is None:
        pytest.skip("vtysh (FRR) is not installed")
    return path


# --------------------------------------------------------------------------- containerlab
def _clab(lab: Lab) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((lab.path / "topology.clab.yml").read_text())
    return data


def test_clab_topology_names_nodes_and_links(lab: Lab) -> None:
    topo = _clab(lab)
    assert topo["name"] == lab.name
    nodes = topo["topology"]["nodes"]
    links = topo["topology"]["links"]
    assert set(nodes) == set(lab.switches()) | set(lab.nodes("server"))
    assert len(links) == lab.graph.number_of_edges()
    used: set[str] = set()
    for link in links:
        assert len(link["endpoints"]) == 2
        for endpoint in link["endpoints"]:
            match = ENDPOINT.match(endpoint)
            assert match, endpoint
            assert match["node"] in nodes, endpoint
            assert endpoint not in used, f"{endpoint} wired twice"
            used.add(endpoint)
    kinds = topo["topology"]["kinds"]
    assert {n["kind"] for n in nodes.values()} <= set(kinds)


def test_clab_links_follow_the_design(lab: Lab) -> None:
    """Each design edge appears as a link between the ethN the ifmap gives its two ports."""
    expected = set()
    for _, _, e in lab.graph.edges(data=True):
        a = f"{e['a']}:{lab.ifmap[e['a']][e['a_port']]['clab']}"
        b = f"{e['b']}:{lab.ifmap[e['b']][e['b_port']]['clab']}"
        expected.add(frozenset((a, b)))
    assert {frozenset(link["endpoints"]) for link in _clab(lab)["topology"]["links"]} == expected


def test_clab_binds_each_switch_its_configs(lab: Lab) -> None:
    nodes = _clab(lab)["topology"]["nodes"]
    for switch in lab.switches():
        sources = [bind.split(":")[0] for bind in nodes[switch]["binds"]]
        assert sources == [f"clab/{switch}/config_db.json", f"clab/{switch}/frr.conf"]
        assert all((lab.path / source).is_file() for source in sources)


def test_linux_names_fit_and_are_unique(lab: Lab) -> None:
    for node, ports in lab.ifmap.items():
        netns = {names["netns"] for names in ports.values()}
        assert all(len(name) <= 15 for name in netns), node
        clab = [names["clab"] for names in ports.values()]
        assert len(clab) == len(set(clab)), node


# --------------------------------------------------------------------------- atomic writes
def test_failure_while_writing_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: object) -> str:
        raise RuntimeError("disk full")

    monkeypatch.setattr(frr_conf, "render", broken)
    with pytest.raises(RuntimeError):
        _generate("small", tmp_path / "lab")
    assert list(tmp_path.iterdir()) == []


def test_failure_while_replacing_keeps_the_old_lab(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _generate("small", tmp_path / "lab")
    before = _files(out)

    def broken(*_: object) -> dict[str, Any]:
        raise RuntimeError("disk full")

    monkeypatch.setattr(host_conf, "render", broken)
    with pytest.raises(RuntimeError):
        labdir.generate(intent.load(REPO / "examples" / "reference.yaml"), out, force=True)
    assert _files(out) == before
    assert [p.name for p in tmp_path.iterdir()] == ["lab"]


def test_running_lab_is_not_replaced(tmp_path: Path) -> None:
    out = _generate("small", tmp_path / "lab")
    (out / labdir.STATE_FILE).write_text("{}\n")
    with pytest.raises(LabError) as info:
        labdir.generate(intent.load(REPO / "examples" / "small.yaml"), out, force=True)
    assert "is running; destroy it first" in str(info.value)
    assert (out / labdir.STATE_FILE).is_file()


def test_a_lab_holds_its_design_until_the_design_changes(tmp_path: Path) -> None:
    small = intent.load(REPO / "examples" / "small.yaml")
    out = _generate("small", tmp_path / "lab")
    assert labdir.holds(out, small)
    assert not labdir.holds(out, intent.load(REPO / "examples" / "reference.yaml"))
    assert not labdir.holds(tmp_path / "none", small)
    design = json.loads((out / "design.json").read_text())
    design["graph"]["nodes"][0]["address"] = "10.9.9.9/32"
    (out / "design.json").write_text(json.dumps(design))
    assert not labdir.holds(out, small)


def test_a_lab_whose_headroom_was_sized_in_bytes_no_longer_holds_its_design(
    tmp_path: Path,
) -> None:
    # generated before the headroom was counted in the SKU's cells: its design.json has no
    # basis, and its 400G 5 m profiles are short in cells, so `twin run` regenerates it
    small = intent.load(REPO / "examples" / "small.yaml")
    out = _generate("small", tmp_path / "lab")
    design = json.loads((out / "design.json").read_text())
    assert design.pop("headroom") == {
        "sku": "Force10-S6000",
        "cell_bytes": 208,
        "frame_bytes": 4158,
    }
    (out / "design.json").write_text(json.dumps(design))
    assert not labdir.holds(out, small)


def test_a_lab_regenerated_with_keep_keeps_its_runs_logs_and_events(tmp_path: Path) -> None:
    out = _generate("small", tmp_path / "lab")
    (out / "runs" / "earlier").mkdir(parents=True)
    (out / "runs" / "earlier" / "report.md").write_text("kept\n")
    (out / "events.jsonl").write_text("{}\n")
    (out / "configs" / "leaf1" / "frr.conf").write_text("edited\n")
    labdir.generate(intent.load(REPO / "examples" / "small.yaml"), out, force=True, keep=True)
    assert (out / "runs" / "earlier" / "report.md").read_text() == "kept\n"
    assert (out / "events.jsonl").read_text() == "{}\n"
    assert (out / "configs" / "leaf1" / "frr.conf").read_text() != "edited\n"
    labdir.generate(intent.load(REPO / "examples" / "small.yaml"), out, force=True)
    assert not (out / "runs").exists()


def test_lab_reads_back_what_was_written(lab: Lab) -> None:
    design = json.loads((lab.path / "design.json").read_text())
    assert lab.figures == design["figures"]
    assert lab.fabric == intent.load(lab.path / "fabric.yaml")
    assert sorted(lab.switches()) == sorted(
        p.parent.name for p in (lab.path / "configs").glob("*/config_db.json")
    )
    assert sorted(lab.nodes("server")) == sorted(
        p.parent.name for p in (lab.path / "configs").glob("*/host.json")
    )
    assert lab.figures["servers"] == len(lab.nodes("server")) == lab.fabric.servers.count
