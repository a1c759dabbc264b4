"""Portable scenarios: servers, links and nodes by selector (twin.scenario.select), and the
example scenarios running unchanged on fabrics of other sizes and server names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from labs import registry
from tests.conftest import REPO
from tests.simlab import small_lab
from twin.cli import main as cli
from twin.errors import InputError
from twin.intent import fabric as intent
from twin.lab import check as labcheck
from twin.lab import directory as labdir
from twin.lab.directory import Lab
from twin.scenario import model as scenarios
from twin.scenario.select import resolve

EXAMPLES = sorted((REPO / "examples" / "scenarios").glob("*.yaml"))
GPU_FABRIC = {
    "name": "gfab",
    "spines": {"count": 2, "ports": 16},
    "leaves": {"count": 6, "ports": 16, "peer_link_ports": 1, "uplinks_per_spine": 1},
    "servers": {"count": 16, "name_prefix": "gpu", "nic_speed": "100G"},
}


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    return Lab.open(small_lab(tmp_path_factory.mktemp("select") / "small"))


def generated(out: Path, fabric: dict[str, Any] | Path) -> Path:
    source = fabric if isinstance(fabric, Path) else out.parent / f"{out.name}.yaml"
    if isinstance(fabric, dict):
        source.write_text(yaml.safe_dump(fabric))
    labdir.generate(intent.load(source), out, str(source))
    return out


@pytest.fixture(scope="module")
def gpu(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generated(tmp_path_factory.mktemp("select") / "gfab", GPU_FABRIC)


def phase(lab: Lab, **given: Any) -> dict[str, Any]:
    out = resolve({"traffic": [{"kind": "backup", **given}]}, lab, "s.yaml")
    resolved: dict[str, Any] = out["traffic"][0]
    return resolved


def link(lab: Lab, spec: str) -> str:
    out = resolve({"faults": [{"at": 0, "fault": "link-down", "link": spec}]}, lab, "s.yaml")
    return str(out["faults"][0]["link"])


def test_servers_by_leaf_rack_pair_and_index(small: Lab) -> None:
    assert phase(small, servers={"behind": "leaf3"})["servers"] == ["server3", "server4"]
    assert phase(small, servers={"behind": "leaves[0]"})["servers"] == ["server1", "server2"]
    assert phase(small, servers={"rack": -1})["servers"] == ["server3", "server4"]
    assert phase(small, servers={"pair": "leaf2"})["servers"] == ["server1", "server2"]
    assert phase(small, src="servers[-1]", dst="servers[0]") | {} == {
        "kind": "backup",
        "src": "server4",
        "dst": "server1",
    }
    # one endpoint from a selector of several: the first that is not the other end
    assert phase(small, src={"rack": 0}, dst={"rack": 0}) == {
        "kind": "backup",
        "src": "server1",
        "dst": "server2",
    }
    assert phase(small, src={"behind": "leaf1", "index": 1}, dst="servers[0]")["src"] == "server2"
    assert phase(small, servers="all")["servers"] == "all"
    assert phase(small, servers=["servers[0]", {"rack": 1}])["servers"] == [
        "server1",
        "server3",
        "server4",
    ]


def test_the_first_few_and_all_but_some(small: Lab) -> None:
    assert phase(small, servers={"rack": -1, "first": 1})["servers"] == ["server3"]
    assert phase(small, servers={"rack": 0, "first": 8})["servers"] == ["server1", "server2"]
    assert phase(small, servers={"except": "servers[2]"})["servers"] == [
        "server1",
        "server2",
        "server4",
    ]
    but = {"rack": -1, "except": {"rack": 1, "index": 0}}
    assert phase(small, servers=but)["servers"] == ["server4"]
    assert phase(small, src={"except": ["servers[0]", "servers[1]"]}, dst="servers[0]")["src"] == (
        "server3"
    )


def test_the_default_scenario_names_the_same_servers_by_selector(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The main job's servers, chosen by selector, are those it was measured with on the
    reference: All-Reduce without server14, the incast from server1-8 and server39-46 into
    server14, the backup from server27 to server40."""
    source = REPO / "twin" / "defaults" / "reference.yaml"
    lab = Lab.open(generated(tmp_path_factory.mktemp("select") / "reference", source))
    data = yaml.safe_load((REPO / "twin" / "defaults" / "default-scenario.yaml").read_text())
    traffic = {t["name"]: t for t in resolve(data, lab, "default-scenario.yaml")["traffic"]}
    servers = [f"server{i}" for i in range(1, 51)]
    assert traffic["allreduce"]["servers"] == [s for s in servers if s != "server14"]
    assert traffic["incast"]["src"] == servers[0:8] + servers[38:46]
    assert traffic["incast"]["dst"] == "server14"
    assert (traffic["backup"]["src"], traffic["backup"]["dst"]) == ("server27", "server40")


def test_otherwise_falls_back_only_when_a_selector_selects_none(small: Lab) -> None:
    """`otherwise` stands in for a selector that selects no server of this lab (an index
    past a rack's servers, a rack the lab lacks); a well-selecting one keeps its pick, and a
    malformed one is refused, not replaced."""
    fallback = {"rack": -1, "index": 5, "otherwise": {"rack": -1}}
    assert phase(small, src="servers[0]", dst=fallback)["dst"] == "server3"
    kept = {"rack": -1, "index": 1, "otherwise": {"rack": 0}}
    assert phase(small, src="servers[0]", dst=kept)["dst"] == "server4"
    assert phase(small, servers={"rack": 7, "otherwise": "all"})["servers"] == [
        "server1", "server2", "server3", "server4",
    ]  # fmt: skip
    with pytest.raises(InputError, match="rack must be an index"):
        phase(small, src="servers[0]", dst={"rack": "x", "otherwise": {"rack": 0}})
    with pytest.raises(InputError) as refused:
        phase(small, src="servers[0]", dst={"rack": 9, "otherwise": {"rack": 8}})
    assert refused.value.key == "traffic.0.dst.otherwise"


def test_random_picks_follow_the_seed(small: Lab) -> None:
    def picks(seed: int) -> list[str]:
        data = {"seed": seed, "traffic": [{"kind": "all_reduce", "servers": {"any": 2}}]}
        servers: list[str] = resolve(data, small, "s.yaml")["traffic"][0]["servers"]
        return servers

    assert picks(1) == picks(1)
    assert len(set(picks(1))) == 2 and set(picks(1)) <= set(small.nodes("server"))
    assert len({tuple(picks(seed)) for seed in range(20)}) > 1
    src_dst = phase(small, src="any", dst="any")
    assert src_dst["src"] != src_dst["dst"]


def test_links_by_role(small: Lab) -> None:
    assert link(small, "uplink of leaf1") == "leaf1:Ethernet24"
    assert link(small, "uplink 1 of leaves[0]") == "leaf1:Ethernet32"
    assert link(small, "server link of servers[1]") == "server2:nic0"
    assert link(small, "server link 1 of {behind leaf3}") == "server3:nic1"
    assert link(small, "leaf1:spine1") == "leaf1:spine1"
    data = {
        "seed": 4,
        "faults": [
            {"at": 0, "fault": "link-down", "link": "server link of any"},
            {"at": 1, "fault": "link-up", "link": "server link of any"},
            {"at": 2, "fault": "node-down", "node": "spines[-1]"},
        ],
    }
    down, up, node = resolve(data, small, "s.yaml")["faults"]
    assert down["link"] == up["link"] and node["node"] == "spine2"


@pytest.mark.parametrize(
    ("given", "key", "problem"),
    [
        ({"servers": {"behind": "spine1"}}, "traffic.0.servers", "no leaf 'spine1'"),
        ({"servers": {"rack": 7}}, "traffic.0.servers", "rack 7: lab small has 2 racks"),
        ({"servers": "servers[9]"}, "traffic.0.servers", "has 4 servers"),
        ({"servers": {"near": "leaf1"}}, "traffic.0.servers", "a server selector has keys"),
        ({"src": {"rack": 0, "any": 5}, "dst": "servers[3]"}, "traffic.0.src.any", "5:"),
        ({"servers": {"rack": 0, "first": 0}}, "traffic.0.servers.first", "0: at least 1"),
        ({"servers": {"except": "all"}}, "traffic.0.servers", "selects no server"),
        ({"servers": {"except": "servers[7]"}}, "traffic.0.servers.except", "has 4 servers"),
    ],
)
def test_bad_selectors_are_one_line(
    small: Lab, given: dict[str, Any], key: str, problem: str
) -> None:
    with pytest.raises(InputError) as refused:
        phase(small, **given)
    assert refused.value.key == key and problem in refused.value.problem


def test_bad_link_selector(small: Lab) -> None:
    with pytest.raises(InputError, match=r"faults.0.link: 'uplink 5 of leaf1': leaf1 has 2"):
        link(small, "uplink 5 of leaf1")


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.stem for e in EXAMPLES])
def test_examples_run_unchanged_on_other_fabrics(
    example: Path, small: Lab, gpu: Path, tmp_path: Path
) -> None:
    """Each example scenario plays on the fake backend on the small fabric and on one whose
    16 servers are gpu1..gpu16 on 100G ports (exit 0 or 1: a verdict, never a refusal)."""
    for lab in (small.path, gpu):
        out = tmp_path / lab.name
        code = cli.main(["run", str(lab), str(example), "--backend", "fake", "--out", str(out)])
        assert code in (0, 1), (lab, example)
        assert (out / "report.json").is_file()
    played = yaml.safe_load((tmp_path / "gfab" / "scenario.yaml").read_text())
    named = [t.get("src") for t in played["traffic"]] + [t.get("dst") for t in played["traffic"]]
    assert all(str(n).startswith("gpu") for n in named if isinstance(n, str))


@pytest.mark.parametrize("fabric", ["reference", "big"])
def test_examples_load_on_the_reference_and_big(
    fabric: str, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the reference (50 servers) every example resolves and passes the scenario's checks;
    on big (2,048 servers, 138 leaves) every one whose rates fit one machine: an ECMP probe of
    3,000 tuples into each of 138 leaves does not, nor All-Reduce with 4 QPs of 25 pps from
    every server (`MAX_PPS`), refused for that reason only. The lab's files, unchanged between
    the loads, are checked once (the check of big's costs seconds)."""
    source = REPO / (
        "twin/defaults/reference.yaml" if fabric == "reference" else "examples/big.yaml"
    )
    lab = Lab.open(generated(tmp_path_factory.mktemp("select") / fabric, source))
    labcheck.check(lab, live=True)
    monkeypatch.setattr(labcheck, "check", lambda checked, live, applied: None)
    for example in EXAMPLES:
        try:
            scenarios.load(example, lab)
        except InputError as refused:
            assert fabric == "big" and "this machine sends at most" in refused.problem, refused


@pytest.mark.parametrize("servers", [240, 1024])
def test_the_frame_rate_bounds_only_backends_that_send_frames(
    servers: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default scenario on 36 leaves (the reference intent with 240 servers) and on 1,024
    servers (examples/big.yaml's shape: 70 leaves) sends more frames a second than one machine
    can: refused for netns, played on the simulator and the fake, which send none
    (`Backend.computed`), as `twin run` and `twin diff` load it."""
    source = REPO / ("examples/reference.yaml" if servers == 240 else "examples/big.yaml")
    fabric = yaml.safe_load(source.read_text())
    fabric["name"] = f"many{servers}"
    fabric["servers"]["count"] = servers
    lab = Lab.open(generated(tmp_path / fabric["name"], fabric))
    assert len(lab.nodes("leaf")) > 33
    labcheck.check(lab, live=True)
    monkeypatch.setattr(labcheck, "check", lambda checked, live, applied: None)
    scenario = REPO / "twin" / "defaults" / "default-scenario.yaml"
    with pytest.raises(InputError, match="this machine sends at most 100,000"):
        scenarios.load(scenario, lab, frames=not registry.get("netns").computed)
    for name in ("sim", "fake"):
        loaded = scenarios.load(scenario, lab, frames=not registry.get(name).computed)
        assert loaded.name == "default"
