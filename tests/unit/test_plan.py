"""labs/plan.py without root: the plan of a netns twin is read from the lab's configs, so an
edited config_db.json or host.json changes what the twin would be built with."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from labs.netns.plan import Plan, Route, build, netns_name
from tests.conftest import SMALL, write_lab
from twin.intent import fabric as intent
from twin.lab import directory as labdir
from twin.lab.directory import Lab

Edit = Callable[[dict[str, Any]], None]


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/small.yaml with two leaf pairs, generated once."""
    return write_lab(tmp_path_factory.mktemp("plan") / "lab", "plantest")


@pytest.fixture
def lab(generated: Path, tmp_path: Path) -> Lab:
    """A private copy of the generated lab, to edit."""
    return Lab.open(Path(shutil.copytree(generated, tmp_path / "lab")))


def edit_json(lab: Lab, node: str, file: str, change: Edit) -> None:
    """Edit configs/<node>/<file> in place."""
    path = lab.path / "configs" / node / file
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2))


def edit_db(lab: Lab, node: str, change: Edit) -> None:
    """Edit a switch's config_db.json in place."""
    edit_json(lab, node, "config_db.json", change)


def differences(before: Plan, after: Plan) -> dict[str, dict[str, tuple[Any, Any]]]:
    """Node -> field -> (before, after), for the fields that differ."""
    found: dict[str, dict[str, tuple[Any, Any]]] = {}
    for name, old in before.nodes.items():
        new = after.nodes[name]
        for key, value in vars(old).items():
            if vars(new)[key] != value:
                found.setdefault(name, {})[key] = (value, vars(new)[key])
    return found


def fabric_port(lab: Lab, leaf: str) -> tuple[str, str]:
    """A routed fabric port of a leaf and its address, from INTERFACE."""
    key = next(k for k in lab.config_db(leaf)["INTERFACE"] if "|" in k)
    port, cidr = key.split("|")
    return port, cidr


def test_the_plan_of_the_generated_lab(lab: Lab) -> None:
    plan = build(lab)
    assert set(plan.nodes) == set(lab.switches()) | set(lab.nodes("server"))
    assert {n.netns for n in plan.nodes.values()} == {netns_name("plantest", n) for n in plan.nodes}
    assert len(plan.veths) == lab.graph.number_of_edges()
    leaf = plan.nodes["leaf1"]
    assert set(leaf.mtu.values()) == {9100} and leaf.down == set()
    port, cidr = fabric_port(lab, "leaf1")
    assert (port, cidr) in leaf.addresses
    assert ("lo", "10.0.0.3/32") in leaf.addresses
    peerlink = next(v.a_if for v in plan.veths if v.kind == "peerlink" and v.a == "leaf1")
    assert leaf.proxy_arp == [peerlink]
    assert (peerlink, "10.2.0.1/29") in leaf.addresses
    assert Route("10.2.0.3/32", dev="Ethernet0") in leaf.routes
    # The SVI's fallback route: held while any member of the VLAN has carrier.
    members = (peerlink, "Ethernet0", "Ethernet8")
    assert Route("10.2.0.0/29", blackhole=True, metric=4000, carriers=members) in leaf.routes
    server = plan.nodes["server1"]
    assert server.mtu == {"nic0": 9000, "nic1": 9000}
    assert server.addresses == [("nic0", "10.2.0.3/32"), ("nic1", "10.2.0.3/32")]
    default = next(r for r in server.routes if r.dst == "0.0.0.0/0")
    assert default.gateways == (("10.2.0.1", "nic0"), ("10.2.0.2", "nic1"))


def test_an_edited_server_port_mtu_changes_that_port_only(lab: Lab) -> None:
    before = build(lab)

    def change(db: dict[str, Any]) -> None:
        db["PORT"]["Ethernet8"]["mtu"] = "1500"

    edit_db(lab, "leaf1", change)
    after = build(lab)  # the same Lab object: configs are read as they are now on disk
    mtu = dict(before.nodes["leaf1"].mtu, Ethernet8=1500)
    assert differences(before, after) == {"leaf1": {"mtu": (before.nodes["leaf1"].mtu, mtu)}}


def test_an_edited_fabric_port_mtu_changes_that_port(lab: Lab) -> None:
    port, _ = fabric_port(lab, "leaf2")
    linux = lab.ifmap["leaf2"][port]["netns"]

    def change(db: dict[str, Any]) -> None:
        db["PORT"][port]["mtu"] = "4000"

    edit_db(lab, "leaf2", change)
    assert build(lab).nodes["leaf2"].mtu[linux] == 4000


@pytest.mark.parametrize("status", ["down", None])
def test_a_port_admin_down_or_without_admin_status_is_down(lab: Lab, status: str | None) -> None:
    def change(db: dict[str, Any]) -> None:
        if status is None:
            del db["PORT"]["Ethernet0"]["admin_status"]  # SONiC's default for a port: down
        else:
            db["PORT"]["Ethernet0"]["admin_status"] = status

    edit_db(lab, "leaf1", change)
    plan = build(lab)
    assert plan.nodes["leaf1"].down == {"Ethernet0"}
    assert plan.nodes["leaf2"].down == set()


def test_an_edited_interface_address_replaces_the_generated_one(lab: Lab) -> None:
    port, cidr = fabric_port(lab, "leaf1")

    def change(db: dict[str, Any]) -> None:
        del db["INTERFACE"][f"{port}|{cidr}"]
        db["INTERFACE"][f"{port}|192.0.2.10/31"] = {}

    edit_db(lab, "leaf1", change)
    addresses = build(lab).nodes["leaf1"].addresses
    assert (port, "192.0.2.10/31") in addresses
    assert (port, cidr) not in addresses


def test_an_edited_loopback_and_vlan_interface_are_what_the_plan_uses(lab: Lab) -> None:
    def change(db: dict[str, Any]) -> None:
        db["LOOPBACK_INTERFACE"] = {"Loopback0": {}, "Loopback0|10.0.9.9/32": {}}
        del db["VLAN_INTERFACE"]["Vlan1001|10.2.0.1/29"]
        db["VLAN_INTERFACE"]["Vlan1001|10.2.0.1/28"] = {}

    edit_db(lab, "leaf1", change)
    leaf = build(lab).nodes["leaf1"]
    assert ("lo", "10.0.9.9/32") in leaf.addresses
    assert (leaf.proxy_arp[0], "10.2.0.1/28") in leaf.addresses
    assert (leaf.proxy_arp[0], "10.2.0.1/29") not in leaf.addresses


def test_an_edited_host_file_changes_the_server(lab: Lab) -> None:
    def change(host: dict[str, Any]) -> None:
        host["mtu"] = 4000
        host["address"] = "10.2.0.6/29"

    edit_json(lab, "server1", "host.json", change)
    server = build(lab).nodes["server1"]
    assert server.mtu == {"nic0": 4000, "nic1": 4000}
    assert server.addresses == [("nic0", "10.2.0.6/32"), ("nic1", "10.2.0.6/32")]


def test_an_address_on_a_port_not_cabled_is_left_out(lab: Lab) -> None:
    def change(db: dict[str, Any]) -> None:
        db["INTERFACE"]["Ethernet56|192.0.2.0/31"] = {}

    before = build(lab)
    edit_db(lab, "leaf1", change)
    assert differences(before, build(lab)) == {}


def test_a_peer_link_without_members_is_down_and_carries_no_vlan(lab: Lab) -> None:
    before = build(lab)
    peer_link = before.nodes["leaf1"].proxy_arp[0]

    def change(db: dict[str, Any]) -> None:
        db["PORTCHANNEL_MEMBER"] = {
            k: v for k, v in db["PORTCHANNEL_MEMBER"].items() if not k.startswith("PortChannel100|")
        }

    edit_db(lab, "leaf1", change)
    leaf1 = build(lab).nodes["leaf1"]
    assert peer_link in leaf1.down and peer_link not in before.nodes["leaf1"].down
    assert leaf1.proxy_arp == [] and all(dev != peer_link for dev, _ in leaf1.addresses)


def test_a_server_port_taken_out_of_its_portchannel_is_down(lab: Lab) -> None:
    before = build(lab)

    def change(db: dict[str, Any]) -> None:
        del db["PORTCHANNEL_MEMBER"]["PortChannel101|Ethernet0"]

    edit_db(lab, "leaf1", change)
    after = build(lab)
    leaf1, server1 = after.nodes["leaf1"], after.nodes["server1"]
    assert "Ethernet0" in leaf1.down and "Ethernet0" not in before.nodes["leaf1"].down
    assert any(r.dev == "Ethernet0" for r in before.nodes["leaf1"].routes)
    assert not any(r.dev == "Ethernet0" for r in leaf1.routes)
    assert server1 == before.nodes["server1"]


@pytest.fixture(scope="module")
def bundled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lab whose leaves bundle two uplinks per spine: one veth per PortChannel."""
    fabric = yaml.safe_load(SMALL.read_text())
    fabric["name"] = "planbundle"
    fabric["leaves"] |= {"count": 4, "uplinks_per_spine": 2}
    fabric["spines"]["ports"] = 16
    out = tmp_path_factory.mktemp("bundled")
    (out / "fabric.yaml").write_text(yaml.safe_dump(fabric))
    labdir.generate(intent.load(out / "fabric.yaml"), out / "lab", "fabric.yaml")
    return out / "lab"


@pytest.fixture
def bundle(bundled: Path, tmp_path: Path) -> tuple[Lab, str, list[str]]:
    """A private copy of the bundled lab; a fabric PortChannel of leaf1 and its members."""
    lab = Lab.open(Path(shutil.copytree(bundled, tmp_path / "lab")))
    members: dict[str, list[str]] = {}
    for key in lab.config_db("leaf1")["PORTCHANNEL_MEMBER"]:
        pc, port = key.split("|")
        members.setdefault(pc, []).append(port)
    pc = next(p for p, ports in members.items() if len(ports) == 2)
    assert pc in build(lab).nodes["leaf1"].mtu  # the veth is named after the PortChannel
    return lab, pc, members[pc]


def test_a_bundle_takes_the_smallest_mtu_of_its_ports_and_portchannel(
    bundle: tuple[Lab, str, list[str]],
) -> None:
    lab, pc, ports = bundle

    def member(db: dict[str, Any]) -> None:
        db["PORT"][ports[0]]["mtu"] = "8000"

    edit_db(lab, "leaf1", member)
    assert build(lab).nodes["leaf1"].mtu[pc] == 8000

    def channel(db: dict[str, Any]) -> None:
        db["PORTCHANNEL"][pc]["mtu"] = "3000"

    edit_db(lab, "leaf1", channel)
    assert build(lab).nodes["leaf1"].mtu[pc] == 3000


def test_a_bundle_stays_up_while_min_links_members_are_up(
    bundle: tuple[Lab, str, list[str]],
) -> None:
    lab, pc, ports = bundle

    def one_down(db: dict[str, Any]) -> None:
        db["PORT"][ports[0]]["admin_status"] = "down"

    edit_db(lab, "leaf1", one_down)
    assert pc not in build(lab).nodes["leaf1"].down

    def needs_two(db: dict[str, Any]) -> None:
        db["PORTCHANNEL"][pc]["min_links"] = "2"

    edit_db(lab, "leaf1", needs_two)
    assert pc in build(lab).nodes["leaf1"].down


def test_a_portchannel_admin_down_takes_its_veth_down(
    bundle: tuple[Lab, str, list[str]],
) -> None:
    lab, pc, _ = bundle

    def change(db: dict[str, Any]) -> None:
        db["PORTCHANNEL"][pc]["admin_status"] = "down"

    edit_db(lab, "leaf1", change)
    assert build(lab).nodes["leaf1"].down == {pc}
