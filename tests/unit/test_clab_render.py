"""The containerlab form of a lab: one test per point of issue 12, and containerlab's schema.

What the image does is taken from sonic-net/sonic-buildimage @086b03b:
`platform/vs/docker-sonic-vs/start.sh` (lanemap/port_config filtering by the ethN present,
`/var/sonic/config_db.json` copied to `/etc/sonic/` and merged with `mv`),
`src/sonic-device-data/src/generate_vs_hwsku.py` (`eth<i>` = lanes of the i-th port_config row),
`dockers/docker-fpm-frr/frr/supervisord/supervisord.conf.common.j2` (no bfdd program unless
`frr_mgmt_framework_config`), and from srl-labs/containerlab @39ff2b7: `nodes/sonic/sonic.go`
(no startup-config, post-deploy `supervisord` + `supervisorctl start bgpd`),
`schemas/clab.schema.json` (copied to tests/data/).
"""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit import test_rails
from twin.intent import fabric as intent
from twin.lab import directory as labdir
from twin.lab.directory import Lab
from twin.render import sonic_vs

REPO = Path(__file__).resolve().parents[2]
RAIL = test_rails.SMALL
SCHEMA = REPO / "tests" / "data" / "clab.schema.json"


ALL_100G = {"speed": "100G", "uplink_speed": "100G"}
"""examples/small.yaml with every port at 100G (leaves and spines): Arista-7060CX-32S-C32."""


@pytest.fixture(scope="module", params=["small", "reference", "small-100g", "rail"])
def lab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Lab:
    """A generated lab that fits the image."""
    name: str = request.param
    out = tmp_path_factory.mktemp(name) / name
    if name == "small-100g":
        fabric = yaml.safe_load((REPO / "examples" / "small.yaml").read_text())
        fabric["leaves"].update(ALL_100G)
        fabric["spines"]["speed"] = "100G"
        fabric["servers"]["nic_speed"] = "100G"
        labdir.generate(intent.parse(fabric, name), out)
    elif name == "rail":
        labdir.generate(intent.parse(RAIL, name), out)  # 4 servers x 4 NICs on rails
    else:
        labdir.generate(intent.load(REPO / "examples" / f"{name}.yaml"), out)
    return Lab.open(out)


def _topology(lab: Lab) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((lab.path / "topology.clab.yml").read_text())
    return data


def _container_db(lab: Lab, node: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((lab.path / "clab" / node / "config_db.json").read_text())
    return data


def _lanemap(sku: str) -> dict[str, str]:
    """`lanemap.ini` as generate_vs_hwsku.py writes it: eth<i> -> lanes of the i-th row."""
    rows = sonic_vs.image()["skus"][sku]["ports"]
    return {f"eth{i + 1}": row[1] for i, row in enumerate(rows)}


# --------------------------------------------------------------------------- schema
def test_topology_passes_containerlabs_json_schema(lab: Lab) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft7Validator(json.loads(SCHEMA.read_text()))
    topo = _topology(lab)
    assert [e.message for e in validator.iter_errors(topo)] == []
    topo["topology"]["nodes"]["spine1"]["startup_config"] = "x"  # not a containerlab key
    assert list(validator.iter_errors(topo))


# --------------------------------------------------------------------------- 1. ports bind
def test_every_wired_port_binds_to_its_eth_by_lanes(lab: Lab) -> None:
    """The image attaches a port to the ethN whose lanemap line holds the port's lanes: every
    wired port's PORT entry has the lanes of its ifmap ethN, and is that SKU row exactly."""
    nodes = _topology(lab)["topology"]["nodes"]
    for switch in lab.switches():
        sku = nodes[switch]["env"]["HWSKU"]
        db = _container_db(lab, switch)
        assert db["DEVICE_METADATA"]["localhost"]["hwsku"] == sku
        lanemap = _lanemap(sku)
        rows = {row[0]: row for row in sonic_vs.image()["skus"][sku]["ports"]}
        assert set(db["PORT"]) == set(lab.ifmap[switch])
        for port, names in lab.ifmap[switch].items():
            entry = db["PORT"][port]
            assert entry["lanes"] == lanemap[names["clab"]], (switch, port)
            _, lanes, alias, index, speed = rows[port]
            assert (entry["lanes"], entry["alias"], entry["index"], entry["speed"]) == (
                lanes,
                alias,
                str(index),
                str(speed),
            )


def test_ifmap_follows_the_images_eth_to_ethernet_mapping(lab: Lab) -> None:
    """eth2 carries the second port_config row (Ethernet8 on the 400G SKUs), not Ethernet4."""
    leaf = lab.nodes("leaf")[0]
    sku = _container_db(lab, leaf)["DEVICE_METADATA"]["localhost"]["hwsku"]
    second, *_, speed = sonic_vs.image()["skus"][sku]["ports"][1]
    assert second == {400000: "Ethernet8", 100000: "Ethernet4"}[speed]
    assert lab.ifmap[leaf][second]["clab"] == "eth2"


def test_the_lab_keeps_its_design(lab: Lab) -> None:
    """The lab's own configs keep the design's speeds and lanes (8 at 400G, 4 at 100G)."""
    speed = lab.fabric.leaves.speed
    for switch in lab.switches():
        own = lab.config_db(switch)["PORT"]
        lanes = {400000: 8, 100000: 4}[speed]
        assert all(p["speed"] == str(speed) and len(p["lanes"].split(",")) == lanes
                   for p in own.values())  # fmt: skip
        assert (
            len(own)
            == getattr(
                lab.fabric, {"leaf": "leaves", "spine": "spines"}[lab.graph.nodes[switch]["role"]]
            ).ports
        )


# --------------------------------------------------------------------------- 2. config delivery
def test_config_is_bound_where_start_sh_copies_it_from(lab: Lab) -> None:
    """Nothing is bound on /etc/sonic (start.sh `mv`s onto that path); the config goes to
    /var/sonic/config_db.json, which start.sh copies to a writable place."""
    for switch in lab.switches():
        binds = _topology(lab)["topology"]["nodes"][switch]["binds"]
        targets = {b.split(":")[1]: b.split(":")[0] for b in binds}
        assert not any(t.startswith("/etc/sonic") for t in targets)
        assert targets["/var/sonic/config_db.json"] == f"clab/{switch}/config_db.json"
        assert (lab.path / targets["/var/sonic/config_db.json"]).is_file()


# --------------------------------------------------------------------------- 3. FRR
def test_frr_config_is_in_the_form_sonic_consumes(lab: Lab) -> None:
    for switch in lab.switches():
        db = _container_db(lab, switch)
        assert db["DEVICE_METADATA"]["localhost"]["docker_routing_config_mode"] == "split-unified"
        assert (
            lab.config_db(switch)["DEVICE_METADATA"]["localhost"]["docker_routing_config_mode"]
            == "split-unified"
        )
        assert "BGP_NEIGHBOR" not in db  # bgpcfgd would add its own neighbours
        conf = (lab.path / "clab" / switch / "frr.conf").read_text()
        assert "service integrated-vtysh-config" in conf.splitlines()
        binds = _topology(lab)["topology"]["nodes"][switch]["binds"]
        assert f"clab/{switch}/frr.conf:/etc/twin/frr.conf:ro" in binds


def test_container_configs_validate_against_sonic_yang(lab: Lab) -> None:
    pytest.importorskip("libyang", reason="SONiC YANG validation needs libyang==2.7.1")
    from twin.yang.check import validate_config_db

    problems = {s: validate_config_db(_container_db(lab, s)) for s in lab.switches()}
    assert {s: p for s, p in problems.items() if p} == {}


# --------------------------------------------------------------------------- 4. server links
def test_server_links_are_routed_31s_the_leaves_route_and_advertise(lab: Lab) -> None:
    for server in lab.nodes("server"):
        host = json.loads((lab.path / "clab" / server / "host.json").read_text())
        address = host["address"].split("/")[0]
        assert address == lab.host(server)["address"].split("/")[0]
        assert [hop["dev"] for hop in host["routes"][0]["nexthops"]] == [
            i["name"] for i in host["interfaces"]
        ]
        for nic in host["interfaces"]:
            mine = ipaddress.IPv4Interface(nic["address"])
            assert mine.network.prefixlen == 31
            leaf_db = _container_db(lab, nic["peer"])
            theirs = [
                k.split("|")[1]
                for k in leaf_db["INTERFACE"]
                if k.startswith(f"{nic['peer_port']}|")
            ]
            assert len(theirs) == 1
            assert ipaddress.IPv4Interface(theirs[0]).network == mine.network
            assert str(ipaddress.IPv4Interface(theirs[0]).ip) == nic["gateway"]
            conf = (lab.path / "clab" / nic["peer"] / "frr.conf").read_text().splitlines()
            assert f"ip route {address}/32 {mine.ip}" in conf
            assert f"  network {address}/32" in conf


def test_no_lag_or_mlag_towards_servers(lab: Lab) -> None:
    """LACP to a Linux NIC never forms and the image has no MCLAG daemon."""
    for leaf in lab.nodes("leaf"):
        db = _container_db(lab, leaf)
        assert not {"MCLAG_DOMAIN", "MCLAG_INTERFACE", "MCLAG_UNIQUE_IP", "VLAN"} & set(db)
        server_ports = {
            p for p, n in lab.ifmap[leaf].items() if _peer_role(lab, leaf, p) == "server"
        }
        members = {k.split("|")[1] for k in db.get("PORTCHANNEL_MEMBER", {})}
        assert server_ports and not server_ports & members
        subnet = lab.graph.nodes[leaf]["subnet"]
        assert f"  network {subnet}" not in (lab.path / "clab" / leaf / "frr.conf").read_text()


def _peer_role(lab: Lab, node: str, port: str) -> str:
    for _, peer, e in lab.graph.edges(node, data=True):
        if e["a_port" if e["a"] == node else "b_port"] == port:
            return str(lab.graph.nodes[peer]["role"])
    raise AssertionError(port)


# --------------------------------------------------------------------------- 5. mgmt, refusal
def test_mgmt_network_is_the_labs_own_and_holds_its_nodes(lab: Lab) -> None:
    mgmt = _topology(lab)["mgmt"]
    assert mgmt["network"] == f"twin-{lab.name}"
    subnet = ipaddress.IPv4Network(mgmt["ipv4-subnet"])
    assert subnet.num_addresses - 3 >= lab.graph.number_of_nodes()


def test_mgmt_grows_with_the_node_count() -> None:
    assert sonic_vs.mgmt_size(253) == 24
    assert sonic_vs.mgmt_size(254) == 23
    assert sonic_vs.mgmt_size(2362) == 20
    assert sonic_vs.mgmt_subnet("x", 2362).endswith("/20")
    with pytest.raises(sonic_vs.Refused, match="exceed the largest management network"):
        sonic_vs.mgmt_size(70000)


def test_two_labs_render_different_mgmt_subnets(tmp_path: Path) -> None:
    """Not containerlab's one 172.20.20.0/24: Docker refuses a second network overlapping it."""
    subnets = []
    for name in ("i22-a", "i22-b"):
        out = tmp_path / name
        fabric = yaml.safe_load((REPO / "examples" / "small.yaml").read_text())
        labdir.generate(intent.parse({**fabric, "name": name}, name), out)
        topo = _topology(Lab.open(out))
        subnets.append(ipaddress.IPv4Network(topo["mgmt"]["ipv4-subnet"]))
    assert not subnets[0].overlaps(subnets[1]), subnets
    assert not any(s.overlaps(ipaddress.IPv4Network("172.20.20.0/24")) for s in subnets)
    pool = ipaddress.IPv4Network(sonic_vs.image()["mgmt_pool"])
    assert all(s.subnet_of(pool) for s in subnets)
    # At deploy a subnet Docker already has is avoided.
    taken = [str(subnets[0])]
    assert not ipaddress.IPv4Network(sonic_vs.mgmt_subnet("i22-a", 10, taken)).overlaps(subnets[0])


def test_a_fabric_beyond_the_port_tables_gets_no_clab_form(tmp_path: Path) -> None:
    out = tmp_path / "big"
    labdir.generate(intent.load(REPO / "examples" / "big.yaml"), out)
    lab = Lab.open(out)
    assert not (out / "topology.clab.yml").exists() and not (out / "clab").exists()
    assert labdir.clab_refusal(lab) == (
        "superspine1: 144 ports up to Ethernet1144 at 400G are beyond the port tables of the "
        "image's SKUs (DellEMC-Z9332f-O32 34 ports, Arista-7060DX5-64S 66 ports, "
        "Arista-7060CX-32S-C32 32 ports)"
    )


# --------------------------------------------------------------------------- Clabernetes
def test_clabernetes_form_wraps_the_same_topology(lab: Lab) -> None:
    docs = list(yaml.safe_load_all((lab.path / "clabernetes.yml").read_text()))
    topology = docs[-1]
    assert topology["kind"] == "Topology"
    assert topology["apiVersion"] == "clabernetes.containerlab.dev/v1alpha1"
    wrapped = yaml.safe_load(topology["spec"]["definition"]["containerlab"])
    assert wrapped == _topology(lab)
    maps = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}
    files = topology["spec"]["deployment"]["filesFromConfigMap"]
    for switch in lab.switches():
        for entry in files[switch]:
            data = maps[entry["configMapName"]]["data"][entry["configMapPath"]]
            assert data == (lab.path / entry["filePath"]).read_text()


def test_a_mixed_speed_fabric_is_refused_for_the_true_reason(tmp_path: Path) -> None:
    """100G server ports and 400G uplinks: no SKU the image ships has rows of those names
    and speeds (its 400G SKUs run Ethernet0 at 400G), which is what the refusal says, not
    that the ports are beyond the port tables."""
    fabric = yaml.safe_load((REPO / "examples" / "small.yaml").read_text())
    fabric["leaves"].update(speed="100G", uplink_speed="400G")
    fabric["servers"]["nic_speed"] = "100G"
    out = tmp_path / "mixed"
    labdir.generate(intent.parse(fabric, "mixed"), out)
    lab = Lab.open(out)
    assert not (out / "topology.clab.yml").exists() and not (out / "clab").exists()
    refusal = labdir.clab_refusal(lab)
    assert refusal == (
        "leaf1: no SKU of the image has rows of its ports' names and speeds (100G/400G): "
        "DellEMC-Z9332f-O32: Ethernet0 runs at 400G, not 100G; "
        "Arista-7060DX5-64S: Ethernet0 runs at 400G, not 100G; "
        "Arista-7060CX-32S-C32: Ethernet12 runs at 100G, not 400G"
    )
    # The spines, all 400G, still fit a SKU row for row.
    for spine in lab.nodes("spine"):
        sku = sonic_vs.sku_for(lab, spine)
        rows = {row.name: row for row in sku.rows}
        ports = json.loads((out / "configs" / spine / "config_db.json").read_text())["PORT"]
        assert all(rows[name].speed == int(p["speed"]) for name, p in ports.items())
