"""Live netns twins of readable labs whose configs are wrong: deployed and judged, never
refused (root, FRR).

A routing policy that keeps the fabric from converging (an inbound prefix-list dropping a
rack's subnet, `maximum-paths 1`) leaves the twin up: `twin deploy` says what it lacked and
exits 1; `twin run` plays on it and fails its verdict naming leaf and prefix, with its
reports. A PortChannel without members (SONiC's YANG accepts it) is deployed and judged.
Every test uses a small fabric and a short `--timeout`, and removes its twin whatever
happens.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import lab_name, leftovers, recorded_pids, root_and_frr, twin_cli, write_lab
from twin.lab.directory import Lab

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(root_and_frr() is not None, reason=str(root_and_frr())),
]

TIMEOUT = "8"
"""Seconds a deploy waits for convergence here: the small fabric converges in about 3."""

SCENARIO = {
    "name": "short",
    "settle": 0,
    "traffic": [{"at": 0, "duration": 2, "kind": "backup", "src": "server1", "dst": "server3"}],
    "validate": {"bgp_health": {}, "reachability": {}},
}

DROP = """ip prefix-list DROP seq 5 deny {prefix}
ip prefix-list DROP seq 10 permit 0.0.0.0/0 le 32
!
route-map IN permit 10
 match ip address prefix-list DROP
exit
!
"""


def frr_edit(path: Path, node: str, change: Callable[[str], str]) -> None:
    """Edit a switch's frr.conf in place."""
    file = path / "configs" / node / "frr.conf"
    file.write_text(change(file.read_text()))


def db_edit(path: Path, node: str, change: Callable[[dict[str, Any]], None]) -> None:
    """Edit a switch's config_db.json in place."""
    file = path / "configs" / node / "config_db.json"
    db = json.loads(file.read_text())
    change(db)
    file.write_text(json.dumps(db, indent=2))


def subnet(path: Path, leaf: str) -> str:
    """The server subnet of a leaf, from the design."""
    return str(Lab.open(path).graph.nodes[leaf]["subnet"])


def drop_inbound(path: Path) -> None:
    """leaf1 drops leaf3's rack subnet on every session from the spines."""
    policy = DROP.format(prefix=subnet(path, "leaf3"))
    frr_edit(
        path,
        "leaf1",
        lambda text: text.replace("router bgp", policy + "router bgp", 1).replace(
            "  neighbor FABRIC activate\n",
            "  neighbor FABRIC activate\n  neighbor FABRIC route-map IN in\n",
        ),
    )


def one_path(path: Path) -> None:
    """leaf1 installs one path per prefix."""
    frr_edit(path, "leaf1", lambda text: text.replace("maximum-paths 64", "maximum-paths 1"))


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Path]:
    """A small lab of our own; its twin destroyed (and anything left removed by name) after
    the test, whatever happened."""
    path = write_lab(tmp_path / "lab", lab_name("jl"))
    name = Lab.open(path).name
    pids: list[int] = []
    try:
        yield path
    finally:
        pids += recorded_pids(path)
        twin_cli("destroy", str(path))
        if leftovers(name, pids):
            twin_cli("cleanup", name)
        assert leftovers(name, pids) == []


def scenario(tmp_path: Path) -> Path:
    file = tmp_path / "short.yaml"
    file.write_text(yaml.safe_dump(SCENARIO))
    return file


def test_a_deploy_that_does_not_converge_is_left_running_and_exits_1(lab: Path) -> None:
    one_path(lab)
    done = twin_cli("deploy", str(lab), "--timeout", TIMEOUT)
    assert done.returncode == 1, done.stderr
    name = Lab.open(lab).name
    prefix = subnet(lab, "leaf3")
    assert "left running, not converged" in done.stdout
    assert f"lab {name} did not converge in {TIMEOUT} s: leaf1: {prefix} has 1/2 paths" in (
        done.stdout
    )
    assert json.loads((lab / "state.json").read_text())["status"] == "running"
    assert twin_cli("inspect", str(lab)).returncode == 0
    assert twin_cli("destroy", str(lab)).returncode == 0


@pytest.mark.parametrize("breaks", [drop_inbound, one_path], ids=lambda b: b.__name__)
def test_a_run_that_does_not_converge_fails_naming_leaf_and_prefix_with_its_reports(
    lab: Path, tmp_path: Path, breaks: Callable[[Path], None]
) -> None:
    breaks(lab)
    junit = tmp_path / "junit.xml"
    out = tmp_path / "run"
    done = twin_cli(
        "run", str(lab), str(scenario(tmp_path)), "--timeout", TIMEOUT,
        "--out", str(out), "--junit", str(junit), "--no-static",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "did not converge" in done.stderr
    assert (out / "report.md").is_file() and junit.is_file()
    results = json.loads((out / "report.json").read_text())["results"]
    routes = next(r for r in results if (r["validator"], r["scope"]) == ("bgp_health", "routes"))
    assert routes["status"] == "fail"
    prefix = subnet(lab, "leaf3")
    found = {(f["device"], f["message"]) for f in routes["findings"]}
    width = "0/2" if breaks is drop_inbound else "1/2"
    assert ("leaf1", f"{prefix} has {width} paths at the start") in found
    assert 'name="bgp_health' in junit.read_text()


def no_peer_link_members(path: Path) -> None:
    db_edit(path, "leaf1", lambda db: db["PORTCHANNEL_MEMBER"].pop("PortChannel100|Ethernet16"))


def server_port_out(path: Path) -> None:
    db_edit(path, "leaf1", lambda db: db["PORTCHANNEL_MEMBER"].pop("PortChannel101|Ethernet0"))


@pytest.mark.parametrize(
    ("breaks", "finding"),
    [
        (no_peer_link_members, "peer_link PortChannel100 has no member ports"),
        (server_port_out, "PortChannel101 has no member ports"),
    ],
    ids=["no_peer_link_members", "server_port_out"],
)
def test_a_portchannel_without_members_is_deployed_and_judged(
    lab: Path, tmp_path: Path, breaks: Callable[[Path], None], finding: str
) -> None:
    breaks(lab)
    out = tmp_path / "run"
    done = twin_cli(
        "run", str(lab), str(scenario(tmp_path)), "--timeout", TIMEOUT, "--out", str(out)
    )
    assert done.returncode == 1, done.stderr
    results = json.loads((out / "report.json").read_text())["results"]
    mlag = next(r for r in results if r["validator"] == "mlag_consistency")
    assert mlag["status"] == "fail"
    assert ("leaf1", finding) in {(f["device"], f["message"]) for f in mlag["findings"]}
