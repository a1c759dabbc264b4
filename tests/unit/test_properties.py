"""Properties of every lab generated from a random valid intent (hypothesis).

Intents vary the server count, NICs and dual-homing, leaf and spine radix, spine count, links
per spine, speeds, lossless priorities, and two or three tiers. Each lab is generated to disk
and read back as configs, and must hold:

* addresses are unique: loopbacks, /31 ends, SVIs and server addresses, each on one node;
* every leaf has a BGP session to every spine of its pod (and each spine to every
  super-spine), over a link that the PORT descriptions say is cabled to that spine;
* ECMP width, the distinct spines among a leaf's BGP_NEIGHBOR entries, is the spine count
  of its pod;
* frr.conf and config_db.json name the same BGP neighbours;
* sampled config_db.json files validate against the SONiC YANG models (libyang), and
  sampled frr.conf files pass `vtysh --dryrun`.

The reference and small examples are checked explicitly first (`@example`).
"""

from __future__ import annotations

import ipaddress
import itertools
import json
import math
import re
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from twin.design.graph import design, figures, ports_of
from twin.errors import DesignError
from twin.intent import fabric as intent
from twin.lab import directory as labdir
from twin.lab.directory import Lab

REPO = Path(__file__).resolve().parents[2]
NEIGHBOR = re.compile(r"^ neighbor (\S+) remote-as (\d+)$", re.MULTILINE)
ROUTED_TABLES = ("LOOPBACK_INTERFACE", "INTERFACE", "PORTCHANNEL_INTERFACE", "VLAN_INTERFACE")
RADIX = {"leaf": "leaves", "spine": "spines", "superspine": "superspines"}

# No timing in tests: no deadline. Few examples: each one writes and reads a whole lab.
SETTINGS = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def _example(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((REPO / "examples" / f"{name}.yaml").read_text())
    return data


REFERENCE, SMALL = _example("reference"), _example("small")


@st.composite
def intents(draw: st.DrawFn) -> dict[str, Any]:
    """A valid intent with explicit counts, two or three tiers."""
    dual = draw(st.booleans())
    per_group = 2 if dual else 1
    speed = draw(st.sampled_from(["100G", "400G"]))
    spines = draw(st.integers(1, 4))
    per_spine = draw(st.integers(1, 2))
    peer = draw(st.integers(1, 2))
    down = draw(st.integers(1, 6))
    leaf_ports = down + (peer if dual else 0) + spines * per_spine + draw(st.integers(0, 3))
    groups = draw(st.integers(1, 4))
    leaves = groups * per_group
    # ceil(servers / groups) == down, so every leaf needs exactly `down` server ports.
    servers = groups * down - draw(st.integers(0, groups - 1))
    data: dict[str, Any] = {
        "name": "prop",
        "leaves": {
            "count": leaves, "ports": leaf_ports, "speed": speed,
            "uplinks_per_spine": per_spine, "peer_link_ports": peer,
        },
        "servers": {
            "count": servers, "nics": per_group, "dual_homed": dual, "nic_speed": speed,
        },
        "oversubscription": {"max": 64.0},
        "qos": {
            "lossless_priorities": draw(
                st.lists(st.integers(0, 7), min_size=1, max_size=2, unique=True)
            )
        },
    }  # fmt: skip
    if draw(st.booleans()):
        # Two tiers: the spines reach every leaf.
        spine_ports = max(2, leaves * per_spine + draw(st.integers(0, 3)))
    else:
        # Three tiers: `pod` leaves a pod, pinned by the spine radix (half down, half up).
        pod = per_group * draw(st.integers(1, 2))
        spine_ports = 2 * pod * per_spine + draw(st.integers(0, 1))
        supers = draw(st.integers(1, min(3, spine_ports - spine_ports // 2)))
        pods = math.ceil(leaves / min(pod, leaves))
        data["superspines"] = {
            "count": supers, "ports": max(2, pods * spines + draw(st.integers(0, 2))),
            "speed": speed,
        }  # fmt: skip
    data["spines"] = {"count": spines, "ports": spine_ports, "speed": speed}
    return data


@contextmanager
def _lab(data: dict[str, Any]) -> Iterator[Lab]:
    fabric = intent.parse(data, "prop.yaml")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "lab"
        labdir.generate(fabric, out, "prop.yaml")
        yield Lab.open(out)


def _sample(lab: Lab) -> list[str]:
    """A few switches: first and last leaf, first and last spine, a super-spine."""
    leaves, spines, supers = lab.nodes("leaf"), lab.nodes("spine"), lab.nodes("superspine")
    return list(dict.fromkeys([leaves[0], leaves[-1], spines[0], spines[-1], *supers[:1]]))


# --------------------------------------------------------------------------- checks
def _addresses(lab: Lab) -> list[tuple[str, str, ipaddress.IPv4Interface]]:
    """(node, interface, address) of every address configured in the lab."""
    found = []
    for switch in lab.switches():
        config = lab.config_db(switch)
        for table in ROUTED_TABLES:
            for key in config.get(table, {}):
                name, _, prefix = key.partition("|")
                if prefix:
                    found.append((switch, name, ipaddress.IPv4Interface(prefix)))
    for server in lab.nodes("server"):
        found.append((server, "bond0", ipaddress.IPv4Interface(lab.host(server)["address"])))
    return found


def check_addresses(lab: Lab) -> None:
    """Every address is configured once; /31s pair two nodes; subnets do not overlap."""
    found = _addresses(lab)
    counts = Counter(address.ip for _, _, address in found)
    assert [ip for ip, n in counts.items() if n > 1] == []
    loopbacks = [a for node, name, a in found if name == "Loopback0"]
    assert len(loopbacks) == len(lab.switches())
    assert all(a.network.prefixlen == 32 for a in loopbacks)
    ends: dict[ipaddress.IPv4Network, list[str]] = {}
    for node, _, address in found:
        if address.network.prefixlen == 31:
            ends.setdefault(address.network, []).append(node)
    for network, nodes in ends.items():
        assert len(nodes) == 2 and nodes[0] != nodes[1], (network, nodes)
    # Each leaf (pair) has its own server subnet: its SVI and its servers are in it.
    subnets: dict[ipaddress.IPv4Network, set[str]] = {}
    for node, name, address in found:
        if name.startswith("Vlan") and address.network.prefixlen != 31:
            subnets.setdefault(address.network, set()).add(node)
    for server in lab.nodes("server"):
        address = ipaddress.IPv4Interface(lab.host(server)["address"])
        assert set(lab.graph.nodes[server]["leaves"]) == subnets[address.network], server
    assert sum(len(leaves) for leaves in subnets.values()) == len(lab.nodes("leaf"))
    networks = sorted(
        {a.network for _, _, a in found if a.network.prefixlen < 31}
        | set(ends)
        | {a.network for a in loopbacks}
    )
    for first, second in itertools.pairwise(networks):
        assert not first.overlaps(second), (first, second)


def _sessions(lab: Lab, node: str) -> dict[str, dict[str, str]]:
    sessions: dict[str, dict[str, str]] = lab.config_db(node).get("BGP_NEIGHBOR", {})
    return sessions


def _cabled_to(config: dict[str, Any], interface: str) -> set[str]:
    """The nodes the PORT descriptions say an interface (port or PortChannel) is cabled to."""
    members = [
        key.split("|")[1] for key in config.get("PORTCHANNEL_MEMBER", {})
        if key.split("|")[0] == interface
    ] or [interface]  # fmt: skip
    ports = config["PORT"]
    assert all(ports[m]["admin_status"] == "up" for m in members), interface
    return {ports[m]["description"].split(":")[0] for m in members}


def check_sessions(lab: Lab, lower: str, upper: str, group: str) -> None:
    """Every `lower` switch peers with every `upper` switch of its `group` over a cable."""
    for node in lab.nodes(lower):
        attrs = lab.graph.nodes[node]
        expected = {
            n for n in lab.nodes(upper)
            if group == "all" or lab.graph.nodes[n][group] == attrs[group]
        }  # fmt: skip
        config = lab.config_db(node)
        addresses = {
            key.split("|")[1].split("/")[0]: key.split("|")[0]
            for table in ROUTED_TABLES for key in config.get(table, {}) if "|" in key
        }  # fmt: skip
        peers = {}
        for peer_ip, session in _sessions(lab, node).items():
            if session["name"] not in expected:
                continue
            peer = session["name"]
            peers[peer] = peer_ip
            # The session runs over a /31 of ours that is cabled to that peer ...
            interface = addresses[session["local_addr"]]
            assert _cabled_to(config, interface) == {peer}, (node, peer)
            assert ipaddress.IPv4Address(peer_ip) in ipaddress.IPv4Network(
                f"{session['local_addr']}/31", strict=False
            )
            # ... and the peer has the mirror session with our AS number.
            mirror = _sessions(lab, peer)[session["local_addr"]]
            assert mirror["name"] == node and mirror["local_addr"] == peer_ip
            assert mirror["asn"] == lab.config_db(node)["DEVICE_METADATA"]["localhost"]["bgp_asn"]
            assert session["asn"] == lab.config_db(peer)["DEVICE_METADATA"]["localhost"]["bgp_asn"]
        assert set(peers) == expected, node


def check_ecmp(lab: Lab) -> None:
    """Distinct next-hop spines per leaf = spines of its pod = the design's ECMP width."""
    spines_per_pod = Counter(lab.graph.nodes[s]["pod"] for s in lab.nodes("spine"))
    widths = set()
    for leaf in lab.nodes("leaf"):
        spines = {s["name"] for s in _sessions(lab, leaf).values() if s["name"].startswith("spine")}
        width = len(spines)
        assert width == spines_per_pod[lab.graph.nodes[leaf]["pod"]], leaf
        widths.add(width)
    assert widths == {lab.figures["ecmp_width"]}
    if lab.fabric.spines.count is not None:
        assert widths == {lab.fabric.spines.count}


def check_frr_matches_config_db(lab: Lab) -> None:
    for switch in lab.switches():
        frr = dict(NEIGHBOR.findall(lab.frr_conf(switch)))
        config = {ip: s["asn"] for ip, s in _sessions(lab, switch).items()}
        assert frr == config, switch


def check_ports(lab: Lab) -> None:
    """No switch cables more ports than its radix; every server NIC is on one leaf port."""
    nics: Counter[str] = Counter()
    for switch in lab.switches():
        config = lab.config_db(switch)
        role = lab.graph.nodes[switch]["role"]
        assert len(config["PORT"]) == getattr(lab.fabric, RADIX[role]).ports
        for port in config["PORT"].values():
            if port["admin_status"] == "up" and port["description"].split(":")[0] in set(
                lab.nodes("server")
            ):
                nics[port["description"]] += 1
    servers = lab.nodes("server")
    assert len(servers) == lab.fabric.servers.count
    assert set(nics.values()) <= {1}
    assert len(nics) == len(servers) * lab.fabric.servers.nics
    for server in servers:
        for nic in lab.host(server)["interfaces"]:
            assert nics[f"{server}:{nic['name']}"] == 1
            assert lab.config_db(nic["peer"])["PORT"][nic["peer_port"]]["description"] == (
                f"{server}:{nic['name']}"
            )


def check_lab(lab: Lab) -> None:
    check_addresses(lab)
    check_sessions(lab, "leaf", "spine", "pod")
    check_sessions(lab, "spine", "superspine", "all")
    check_ecmp(lab)
    check_frr_matches_config_db(lab)
    check_ports(lab)


# --------------------------------------------------------------------------- properties
@SETTINGS
@given(intents())
@example(REFERENCE)
@example(SMALL)
def test_every_lab_holds_the_fabric_invariants(data: dict[str, Any]) -> None:
    with _lab(data) as lab:
        check_lab(lab)


@SETTINGS
@given(intents())
@example(REFERENCE)
@example(SMALL)
def test_sampled_config_dbs_validate_against_sonic_yang(data: dict[str, Any]) -> None:
    pytest.importorskip("libyang", reason="SONiC YANG validation needs libyang==2.7.1")
    from twin.yang.check import validate_config_db

    with _lab(data) as lab:
        switches = lab.switches() if data in (REFERENCE, SMALL) else _sample(lab)
        problems = {s: validate_config_db(lab.config_db(s)) for s in switches}
        assert {s: p for s, p in problems.items() if p} == {}


@settings(max_examples=40, deadline=None)
@given(
    servers=st.integers(1, 600),
    dual=st.booleans(),
    leaf_ports=st.sampled_from([8, 16, 32, 64]),
    spine_ports=st.sampled_from([4, 8, 16, 32, 64]),
    spines=st.one_of(st.none(), st.integers(1, 8)),
    per_spine=st.one_of(st.none(), st.integers(1, 4)),
    target=st.sampled_from([1.0, 1.5, 3.0]),
)
def test_derived_designs_fit_or_are_refused(
    servers: int, dual: bool, leaf_ports: int, spine_ports: int, spines: int | None,
    per_spine: int | None, target: float,
) -> None:  # fmt: skip
    """With counts left to the sizing, a design fits its radixes and ratio, or is refused."""
    data: dict[str, Any] = {
        "servers": {"count": servers, "nics": 2 if dual else 1, "dual_homed": dual},
        "leaves": {"ports": leaf_ports, "uplinks_per_spine": per_spine},
        "spines": {"count": spines, "ports": spine_ports},
        "superspines": {"ports": 1024},
        "oversubscription": {"target": target, "max": 3.0},
        "addressing": {"loopbacks": "10.0.0.0/16", "fabric": "10.1.0.0/16"},
    }
    fabric = intent.parse(data, "f.yaml")
    try:
        d = design(fabric, "f.yaml")
    except DesignError as error:
        assert error.file == "f.yaml"
        assert error.key.split(".")[0] in intent.Fabric.model_fields
        return
    figs = figures(d)
    assert figs["oversubscription_max"] <= 3.0
    assert len(d.nodes("server")) == servers
    for node, attrs in d.graph.nodes(data=True):
        if attrs["role"] != "server":
            indices = [p.index for p in ports_of(d.graph, node)]
            assert len(indices) == len(set(indices))
            assert max(indices) < getattr(fabric, RADIX[attrs["role"]]).ports, node
    for leaf in d.nodes("leaf"):
        pod = d.graph.nodes[leaf]["pod"]
        uplinks = Counter(p.peer for p in ports_of(d.graph, leaf) if p.kind == "fabric")
        assert {d.graph.nodes[s]["pod"] for s in uplinks} == {pod}
        assert len(uplinks) == figs["ecmp_width"]
        assert set(uplinks.values()) == {d.sizing.uplinks_per_spine}


# --------------------------------------------------------------------------- the checks bite
def _edit(lab: Lab, node: str, change: Any) -> None:
    path = lab.path / "configs" / node / "config_db.json"
    config = json.loads(path.read_text())
    change(config)
    path.write_text(json.dumps(config))


def test_checks_catch_a_missing_session() -> None:
    with _lab(SMALL) as lab:
        check_lab(lab)
        _edit(lab, "leaf1", lambda c: c["BGP_NEIGHBOR"].pop("10.1.0.3"))
        with pytest.raises(AssertionError):
            check_sessions(lab, "leaf", "spine", "pod")
        with pytest.raises(AssertionError):
            check_ecmp(lab)
        with pytest.raises(AssertionError):
            check_frr_matches_config_db(lab)


def test_checks_catch_a_duplicate_address() -> None:
    with _lab(SMALL) as lab:
        loopback = next(k for k in lab.config_db("leaf1")["LOOPBACK_INTERFACE"] if "|" in k)

        def reuse(config: dict[str, Any]) -> None:
            table = config["LOOPBACK_INTERFACE"]
            for key in [k for k in table if "|" in k]:
                del table[key]
            table[loopback] = {}

        _edit(lab, "leaf2", reuse)
        with pytest.raises(AssertionError):
            check_addresses(lab)


def test_checks_catch_a_session_over_the_wrong_cable() -> None:
    with _lab(REFERENCE) as lab:

        def swap(config: dict[str, Any]) -> None:
            ports = config["PORT"]
            uplinks = [p for p in ports.values() if p.get("description", "").startswith("spine1:")]
            uplinks[0]["description"] = "spine2:Ethernet0"

        _edit(lab, "leaf1", swap)
        with pytest.raises(AssertionError):
            check_sessions(lab, "leaf", "spine", "pod")
