"""Static validators: the reference lab passes, and each broken lab of the catalogue is caught
by the right validator, naming device, port and table.

Broken labs are the small example generated into a temporary directory and edited the way a
person edits a config: load the JSON, change a value, save; add a line to frr.conf.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from twin.cli import main as cli
from twin.lab.directory import Lab
from validators import registry
from validators.examples import (
    add_frr_line,
    edit_json,
    generate,
    neighbor_address,
    roce_weight_1_against_99,
    strict_bulk_queue,
)
from validators.result import Result, Status

REPO = Path(__file__).resolve().parents[2]
QOS = ["pfc_consistency", "headroom", "ecn_thresholds", "pfc_watchdog", "mtu_consistency"]


def example(tmp: Path, name: str) -> Lab:
    return generate(tmp / name, REPO / "examples" / f"{name}.yaml")


def validate(lab: Lab, names: list[str] | None = None) -> dict[str, list[Result]]:
    """Results by validator."""
    results = registry.run_static(lab, registry.select("static", names), {})
    by_name: dict[str, list[Result]] = {}
    for r in results:
        by_name.setdefault(r.validator, []).append(r)
    return by_name


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    """The small example, generated once; tests edit copies."""
    return example(tmp_path_factory.mktemp("static"), "small")


@pytest.fixture
def small(pristine: Lab, tmp_path: Path) -> Lab:
    """A fresh copy of the small lab for one test to break."""
    shutil.copytree(pristine.path, tmp_path / "small")
    return Lab.open(tmp_path / "small")


def test_reference_lab_passes_every_static_validator(tmp_path: Path) -> None:
    lab = example(tmp_path, "reference")
    results = [r for rs in validate(lab).values() for r in rs if r.validator != "config_drift"]
    assert {r.validator for r in results} == {
        *QOS,
        "deadlock",
        "failover_budget",
        "fib_reachability",
        "host_rdma",
        "intent_values",
        "mlag_consistency",
        "schedulers",
        "sonic_fields",
        "yang",
    }
    assert [(r.validator, r.scope, r.reason) for r in results if r.status is not Status.PASS] == []
    by_name = validate(lab, ["deadlock", "pfc_consistency"])
    assert by_name["pfc_consistency"][0].figures["ports"] == 372
    assert by_name["deadlock"][1].figures["failure_sets"] == len(lab.graph.edges)


def pfc_off_on_a_spine_port(lab: Lab) -> None:
    edit_json(lab, "spine1", lambda db: db["PORT_QOS_MAP"]["Ethernet8"].update(pfc_enable=""))


def roce_dscp_24_instead_of_26(lab: Lab) -> None:
    def swap(db: Any) -> None:
        rdma = db["DSCP_TO_TC_MAP"]["RDMA"]
        rdma["24"], rdma["26"] = rdma["26"], rdma["24"]

    edit_json(lab, "leaf3", swap)


def cable_of_300_m(lab: Lab) -> None:
    edit_json(lab, "spine2", lambda db: db["CABLE_LENGTH"]["AZURE"].update(Ethernet16="300m"))


def ecn_off_on_the_lossless_queue(lab: Lab) -> None:
    edit_json(lab, "leaf2", lambda db: db["WRED_PROFILE"]["RDMA_ECN"].update(ecn="ecn_none"))


def static_route_looping_between_two_spines(lab: Lab) -> None:
    """Both spines send leaf1/leaf2's subnet to leaf3, which sends it back up to either."""
    subnet = lab.graph.nodes["leaf1"]["subnet"]
    for spine in ("spine1", "spine2"):
        add_frr_line(lab, spine, f"ip route {subnet} {neighbor_address(lab, spine, 'leaf3')}")


def one_path_per_prefix_on_leaf3(lab: Lab) -> None:
    """`maximum-paths 1`: leaf3 uses one spine where the deploy waits for both."""
    path = lab.path / "configs" / "leaf3" / "frr.conf"
    path.write_text(path.read_text().replace("maximum-paths 64", "maximum-paths 1"))


def host(lab: Lab, server: str, **rdma: Any) -> None:
    """Change RDMA settings (`dcqcn_KEY` for a DCQCN parameter) in a server's host file."""

    def edit(data: dict[str, Any]) -> None:
        for key, value in rdma.items():
            if key.startswith("dcqcn_"):
                data["rdma"]["dcqcn"][key.removeprefix("dcqcn_")] = value
            else:
                data["rdma"][key] = value

    edit_json(lab, server, edit, "host.json")


def ecn_off_on_server2(lab: Lab) -> None:
    host(lab, "server2", ecn=False)


def dcqcn_floor_at_line_rate_on_server3(lab: Lab) -> None:
    host(lab, "server3", dcqcn_min_rate_mbps=400000.0)


def roce_on_priority_4_on_server1(lab: Lab) -> None:
    host(lab, "server1", pfc_priority=4)


def roce_weight_1_against_99_on_leaf3(lab: Lab) -> None:
    edit_json(lab, "leaf3", roce_weight_1_against_99)


def strict_bulk_queue_on_leaf2(lab: Lab) -> None:
    edit_json(lab, "leaf2", strict_bulk_queue)


CATALOGUE = [
    (
        roce_weight_1_against_99_on_leaf3,
        "schedulers",
        ("leaf3", "Ethernet0", "SCHEDULER|scheduler.rdma"),
    ),
    (
        strict_bulk_queue_on_leaf2,
        "schedulers,intent_values",
        ("leaf2", "Ethernet8", "SCHEDULER|scheduler.bulk"),
    ),
    (ecn_off_on_server2, "host_rdma", ("server2", "", "host.json rdma.ecn")),
    (
        dcqcn_floor_at_line_rate_on_server3,
        "host_rdma",
        ("server3", "", "host.json rdma.dcqcn.min_rate_mbps"),
    ),
    (roce_on_priority_4_on_server1, "host_rdma", ("server1", "", "host.json rdma.pfc_priority")),
    (one_path_per_prefix_on_leaf3, "fib_reachability,intent_values", ("leaf3", "", "FIB")),
    (
        pfc_off_on_a_spine_port,
        "pfc_consistency,intent_values",
        ("spine1", "Ethernet8", "PORT_QOS_MAP"),
    ),
    (
        roce_dscp_24_instead_of_26,
        "pfc_consistency,intent_values",
        ("leaf3", "Ethernet0", "DSCP_TO_TC_MAP"),
    ),
    (
        cable_of_300_m,
        "headroom,intent_values",
        ("spine2", "Ethernet16", "BUFFER_PROFILE|pg_lossless_400000_40m_profile"),
    ),
    (
        ecn_off_on_the_lossless_queue,
        "pfc_consistency,intent_values",
        ("leaf2", "Ethernet0", "WRED_PROFILE|RDMA_ECN"),
    ),
    (
        static_route_looping_between_two_spines,
        "deadlock,fib_reachability",
        ("leaf3", "Ethernet24", "FIB"),
    ),
]


@pytest.mark.parametrize(
    ("breaks", "catcher", "where"), CATALOGUE, ids=[c[0].__name__ for c in CATALOGUE]
)
def test_broken_lab_is_caught_by_the_right_validator(
    small: Lab, breaks: Callable[[Lab], None], catcher: str, where: tuple[str, str, str]
) -> None:
    assert all(r.status is not Status.FAIL for rs in validate(small).values() for r in rs)
    breaks(small)
    by_name = validate(small)
    failed = {name for name, rs in by_name.items() if any(r.status is Status.FAIL for r in rs)}
    assert failed == set(catcher.split(","))
    assert by_name["config_drift"][0].status is Status.INFO
    findings = [f for r in by_name[catcher.split(",")[0]] for f in r.findings]
    device, port, table = where
    assert any(
        f.device == device and port in f.port.split(",") and f.where == table for f in findings
    ), findings


def test_roce_dscp_finding_names_the_dscp_and_every_port_of_the_switch(small: Lab) -> None:
    roce_dscp_24_instead_of_26(small)
    finding = validate(small, ["pfc_consistency"])["pfc_consistency"][0].findings[0]
    assert finding.message == "RoCE DSCP 26 maps to TC 0, not a lossless priority (3)"
    assert finding.port.split(",") == [
        "Ethernet0",
        "Ethernet8",
        "Ethernet16",
        "Ethernet24",
        "Ethernet32",
    ]


def test_static_loop_cycle_runs_through_both_spines_and_leaf3(small: Lab) -> None:
    static_route_looping_between_two_spines(small)
    base, failures = validate(small, ["deadlock"])["deadlock"]
    assert (base.scope, base.status) == ("priority 3", Status.FAIL)
    assert [f.message for f in base.findings] == [
        "leaf3:Ethernet24:3 -> spine1:Ethernet16:3 -> leaf3:Ethernet24:3 (flows server4->server1); "
        "4 queues on leaf3, spine1, spine2 depend on each other"
    ]
    # the loop is there with every link up: no single failure adds another one
    assert (failures.scope, failures.status) == ("priority 3, 1-link failures", Status.PASS)


def test_cnp_on_the_lossless_class_and_a_missing_watchdog_are_found(small: Lab) -> None:
    def break_leaf4(db: Any) -> None:
        db["DSCP_TO_TC_MAP"]["RDMA"]["48"] = "3"
        del db["PFC_WD"]["Ethernet24"]
        db["PORT_QOS_MAP"]["Ethernet24"]["pfcwd_sw_enable"] = ""

    edit_json(small, "leaf4", break_leaf4)
    by_name = validate(small, ["pfc_consistency", "pfc_watchdog"])
    messages = {(f.device, f.where, f.message) for rs in by_name.values() for f in rs[0].findings}
    assert ("leaf4", "DSCP_TO_TC_MAP", "CNP DSCP 48 maps to lossless TC 3") in messages
    assert (
        "leaf4",
        "TC_TO_QUEUE_MAP",
        "CNP DSCP 48 goes to queue 3, not above the RoCE queue 3",
    ) in messages
    assert ("leaf4", "PFC_WD", "no watchdog entry") in messages
    assert ("leaf4", "PORT_QOS_MAP", "watchdog off on priority 3") in messages


def test_pool_overbooked_and_mtu_too_small_are_found(small: Lab) -> None:
    edit_json(
        small, "spine1", lambda db: db["BUFFER_POOL"]["ingress_lossless_pool"].update(size="100000")
    )
    edit_json(small, "leaf1", lambda db: db["PORTCHANNEL"]["PortChannel100"].update(mtu="1500"))
    by_name = validate(small, ["headroom", "mtu_consistency"])
    pool = by_name["headroom"][0].findings
    assert [(f.device, f.where) for f in pool] == [("spine1", "BUFFER_POOL|ingress_lossless_pool")]
    mtu = by_name["mtu_consistency"][0].findings
    assert [(f.device, f.port, f.where) for f in mtu] == [
        ("leaf1", "PortChannel100", "PORTCHANNEL")
    ]


def test_config_drift_shows_the_diff_by_table_key_and_line(small: Lab) -> None:
    pfc_off_on_a_spine_port(small)
    add_frr_line(small, "spine2", "ip route 10.9.0.0/16 blackhole")
    drift = validate(small, ["config_drift"])["config_drift"][0]
    assert (drift.status, drift.reason) == (
        Status.INFO,
        "2 differences on spine1, spine2 from what the intent renders",
    )
    shown = [str(f) for f in drift.findings]
    assert shown == [
        'spine1 Ethernet8 PORT_QOS_MAP: pfc_enable: "3" in the intent, "" here',
        "spine2 frr.conf: +ip route 10.9.0.0/16 blackhole",
    ]
    assert drift.figures == {"devices_drifted": 2, "differences": 2}


def test_thresholds_change_verdicts(small: Lab) -> None:
    ecn = registry.get("ecn_thresholds")
    # at 1 ms round trip a 400G link holds 50 MB: a 1.5 MB Kmax starves it
    slow = ecn.check(small, ecn.params({"rtt_us": 1000}))[0]
    assert slow.status is Status.FAIL
    assert slow.findings[0].message.startswith("Kmax 1536000 B is below 1.0 x BDP (50000000 B)")
    watchdog = registry.get("pfc_watchdog")
    strict = watchdog.check(small, watchdog.params({"max_detection_ms": 150}))[0]
    assert strict.findings[0].message == "detection_time 200 ms is outside 200..150 ms"


def mclag(lab: Lab, leaf: str, **fields: str) -> None:
    """Set fields of a leaf's MCLAG domain (its only one)."""
    edit_json(lab, leaf, lambda db: next(iter(db["MCLAG_DOMAIN"].values())).update(fields))


def wrong_peer_ip(lab: Lab) -> None:
    mclag(lab, "leaf1", peer_ip="10.3.0.5")


def missing_mclag_interface(lab: Lab) -> None:
    edit_json(lab, "leaf2", lambda db: db["MCLAG_INTERFACE"].pop("1|PortChannel102"))


def junk_peer_link(lab: Lab) -> None:
    mclag(lab, "leaf3", peer_link="PortChannel999")


def session_over_the_spines(lab: Lab) -> None:
    """Both ends name each other's loopback: reciprocal, but routed via the spines."""
    loopbacks = {leaf: lab.graph.nodes[leaf]["router_id"] for leaf in ("leaf1", "leaf2")}
    mclag(lab, "leaf1", source_ip=loopbacks["leaf1"], peer_ip=loopbacks["leaf2"])
    mclag(lab, "leaf2", source_ip=loopbacks["leaf2"], peer_ip=loopbacks["leaf1"])


def server_vlan_untagged_on_one_side(lab: Lab) -> None:
    edit_json(
        lab,
        "leaf4",
        lambda db: db["VLAN_MEMBER"]["Vlan1002|PortChannel101"].update(tagging_mode="tagged"),
    )


def session_timeout_of_two_keepalives(lab: Lab) -> None:
    mclag(lab, "leaf1", keepalive_interval="5", session_timeout="10")


def peer_link_without_members(lab: Lab) -> None:
    edit_json(lab, "leaf1", lambda db: db["PORTCHANNEL_MEMBER"].pop("PortChannel100|Ethernet16"))


def peer_link_member_shut(lab: Lab) -> None:
    edit_json(lab, "leaf2", lambda db: db["PORT"]["Ethernet16"].update(admin_status="down"))


def server_port_out_of_its_portchannel(lab: Lab) -> None:
    edit_json(lab, "leaf3", lambda db: db["PORTCHANNEL_MEMBER"].pop("PortChannel101|Ethernet0"))


MLAG_BREAKS = [
    (
        wrong_peer_ip,
        "leaf1",
        "MCLAG_DOMAIN|1",
        "peer_ip 10.3.0.5 is not leaf2's source_ip 10.3.0.1",
    ),
    (
        missing_mclag_interface,
        "leaf2",
        "MCLAG_INTERFACE",
        "PortChannel102 to server2 is not an MCLAG_INTERFACE",
    ),
    (junk_peer_link, "leaf3", "MCLAG_DOMAIN|2", "peer_link PortChannel999 does not exist"),
    (
        session_over_the_spines,
        "leaf1",
        "MCLAG_DOMAIN|1",
        "peer_ip 10.0.0.4 is not reachable over PortChannel100",
    ),
    (
        server_vlan_untagged_on_one_side,
        "leaf4",
        "VLAN_MEMBER",
        "VLANs {'1002': 'tagged'} here, {'1002': 'untagged'} on leaf3",
    ),
    (
        session_timeout_of_two_keepalives,
        "leaf1",
        "MCLAG_DOMAIN|1",
        "session_timeout 10 s is outside 15..3600 (3 keepalives)",
    ),
    (
        peer_link_without_members,
        "leaf1",
        "PORTCHANNEL_MEMBER",
        "peer_link PortChannel100 has no member ports",
    ),
    (
        peer_link_member_shut,
        "leaf2",
        "PORT",
        "peer_link PortChannel100: member port Ethernet16 admin down",
    ),
    (
        server_port_out_of_its_portchannel,
        "leaf3",
        "PORTCHANNEL_MEMBER",
        "PortChannel101 has no member ports",
    ),
]


@pytest.mark.parametrize(
    ("breaks", "device", "where", "message"), MLAG_BREAKS, ids=[b[0].__name__ for b in MLAG_BREAKS]
)
def test_mlag_misconfiguration_is_found_where_it_is(
    small: Lab, breaks: Callable[[Lab], None], device: str, where: str, message: str
) -> None:
    assert validate(small, ["mlag_consistency"])["mlag_consistency"][0].status is Status.PASS
    breaks(small)
    result = validate(small, ["mlag_consistency"])["mlag_consistency"][0]
    assert result.status is Status.FAIL
    assert (device, where, message) in {(f.device, f.where, f.message) for f in result.findings}


@pytest.mark.parametrize(
    "breaks",
    [peer_link_without_members, server_port_out_of_its_portchannel],
    ids=lambda b: b.__name__,
)
def test_a_portchannel_yang_accepts_without_members_is_judged_not_refused(
    small: Lab, breaks: Callable[[Lab], None], capsys: pytest.CaptureFixture[str]
) -> None:
    breaks(small)
    args = ["validate", str(small.path), "--only", "mlag_consistency", "yang", "--markdown"]
    assert cli.main(args) == 1
    out = capsys.readouterr().out
    assert "| mlag_consistency | fabric | fail | " in out and " finding" in out
    assert "| yang | fabric | fail" not in out


def mtu_out_of_range(lab: Lab) -> None:
    edit_json(lab, "leaf1", lambda db: db["PORT"]["Ethernet0"].update(mtu="99999"))


def dangling_dscp_to_tc_map(lab: Lab) -> None:
    edit_json(
        lab, "spine2", lambda db: db["PORT_QOS_MAP"]["Ethernet8"].update(dscp_to_tc_map="ROCE")
    )


YANG_BREAKS = [
    (mtu_out_of_range, 'leaf1 Ethernet0 PORT: mtu: Value "99999" is out of type uint16'),
    (
        dangling_dscp_to_tc_map,
        'spine2 Ethernet8 PORT_QOS_MAP: dscp_to_tc_map: Invalid leafref value "ROCE"',
    ),
]


@pytest.mark.parametrize(("breaks", "shown"), YANG_BREAKS, ids=[b[0].__name__ for b in YANG_BREAKS])
def test_twin_validate_runs_the_sonic_yang_check(
    small: Lab, breaks: Callable[[Lab], None], shown: str, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("libyang", reason="the yang validator needs libyang==2.7.1")
    args = ["validate", str(small.path), "--only", "yang", "--markdown"]
    assert cli.main(args) == 0
    breaks(small)
    assert cli.main(args) == 1
    assert "| yang | fabric | fail |" in capsys.readouterr().out
    result = validate(small, ["yang"])["yang"][0]
    assert [str(f)[: len(shown)] for f in result.findings] == [shown]


def test_a_harmless_edit_is_listed_as_drift_and_validate_passes(
    small: Lab, capsys: pytest.CaptureFixture[str]
) -> None:
    edit_json(small, "leaf1", lambda db: db["PORT"]["Ethernet0"].update(description="gpu-01"))
    assert cli.main(["validate", str(small.path), "--failures", "0", "--markdown"]) == 0
    out = capsys.readouterr().out
    assert "| config_drift | fabric | info | 1 difference on leaf1 from what the intent" in out
    assert "17 passed, 0 failed, 0 not observable, 1 informational" in out


def test_fib_reachability_names_what_the_deploy_would_wait_for(small: Lab) -> None:
    one_path_per_prefix_on_leaf3(small)
    fib, _ = validate(small, ["fib_reachability"])["fib_reachability"]
    assert [str(f) for f in fib.findings] == [
        "leaf3 maximum-paths 1: 10.2.0.0/29: only 1 of its equal paths used",
        "leaf3 FIB: 10.2.0.0/29 has 1/2 paths",
    ]


def test_a_server_left_single_homed_is_found_under_failure(small: Lab) -> None:
    """leaf2's port to server1 is down: server1 is reached over the peer-link until its only
    remaining link fails."""
    edit_json(small, "leaf2", lambda db: db["PORT"]["Ethernet0"].update(admin_status="down"))
    fib, failures = validate(small, ["fib_reachability"])["fib_reachability"]
    assert fib.status is Status.PASS
    assert failures.status is Status.FAIL
    lost = {(f.device, f.where) for f in failures.findings if f.message.startswith("server1:")}
    assert ("leaf3", "leaf1:Ethernet0-server1:nic0 down") in lost
    assert ("leaf2", "leaf1:Ethernet16-leaf2:Ethernet16 down") in lost


def test_a_healthy_single_homed_fabric_delivers_after_every_single_failure(
    tmp_path: Path,
) -> None:
    """The deadlock incident's fabric (single-homed servers, one leaf each): a leaf that loses
    an uplink routes around it; every other leaf drops the spine that lost the leaf's subnet
    (the walk takes every switch's post-failure FIB, not its old one)."""
    lab = generate(
        tmp_path / "single", REPO / "examples" / "incidents" / "3-deadlock" / "fabric.yaml"
    )
    fib, failures = validate(lab, ["fib_reachability"])["fib_reachability"]
    assert fib.status is Status.PASS
    assert failures.status is Status.PASS, failures.findings[:3]
    assert failures.figures["failure_sets"] == 8


def test_a_single_homed_leaf_left_with_one_uplink_is_named_under_failure(
    tmp_path: Path,
) -> None:
    """leaf2's uplink to spine1 is shut: when its other uplink fails, leaf2 reaches nothing
    remote and no other leaf reaches leaf2's servers (nor, through spine1 alone, does a leaf
    that loses its uplink to spine2)."""
    lab = generate(
        tmp_path / "single", REPO / "examples" / "incidents" / "3-deadlock" / "fabric.yaml"
    )
    edit_json(lab, "leaf2", lambda db: db["PORT"]["Ethernet16"].update(admin_status="down"))
    _, failures = validate(lab, ["fib_reachability"])["fib_reachability"]
    assert failures.status is Status.FAIL
    cut = "leaf2:Ethernet24-spine2:Ethernet8 down"
    found = {(f.device, f.message) for f in failures.findings if f.where == cut}
    assert ("leaf2", "server1: black hole at leaf2 (no route)") in found
    assert ("leaf1", "server3: black hole at leaf1 (no route)") in found
    # every failure found cuts leaf2 or its servers off: nothing else is blamed
    assert all(
        f.device == "leaf2" or f.message[:8] in ("server3:", "server4:") for f in failures.findings
    )


# -- issue 19: the static gaps ----------------------------------------------------------------


def test_a_cable_whose_ends_declare_different_lengths_is_named(small: Lab) -> None:
    """leaf1's end of its cable to spine1 says 100 m, spine1's end still 40 m."""
    edit_json(small, "leaf1", lambda db: db["CABLE_LENGTH"]["AZURE"].update(Ethernet24="100m"))
    (result,) = validate(small, ["headroom"])["headroom"]
    assert result.status is Status.FAIL
    assert [str(f) for f in result.findings if "other end" in f.message] == [
        "leaf1 Ethernet24 CABLE_LENGTH|AZURE: cable length 100 m here, 40 m at its other end "
        "spine1 Ethernet0"
    ]


def test_a_lossy_class_mapped_into_the_lossless_tc_is_named(small: Lab) -> None:
    """spine2 maps storage's DSCP 10 to TC 3, the lossless priority."""
    edit_json(small, "spine2", lambda db: db["DSCP_TO_TC_MAP"]["RDMA"].update({"10": "3"}))
    fabric = validate(small, ["pfc_consistency"])["pfc_consistency"][0]
    assert fabric.status is Status.FAIL
    found = [f for f in fabric.findings if "lossy by the intent" in f.message]
    assert [(f.device, f.where, f.message) for f in found] == [
        (
            "spine2",
            "DSCP_TO_TC_MAP|RDMA",
            "DSCP 10 (class storage, lossy by the intent) maps to lossless TC 3",
        )
    ]


def test_a_host_marking_the_backup_into_the_lossless_dscp_is_named(small: Lab) -> None:
    def backup_26(host: dict[str, Any]) -> None:
        host["dscp_marking"][0]["dscp"] = 26

    edit_json(small, "server2", backup_26, "host.json")
    fabric, hosts = validate(small, ["pfc_consistency"])["pfc_consistency"]
    assert fabric.status is Status.PASS
    assert hosts.status is Status.FAIL
    assert [str(f) for f in hosts.findings] == [
        "server2 host.json dscp_marking[0]: marks class storage with DSCP 26, class roce's "
        "(lossless); the intent gives storage DSCP 10"
    ]


def test_host_rdma_names_server_nic_and_key(small: Lab) -> None:
    host(small, "server3", dcqcn_min_rate_mbps=400000.0, traffic_class=104)
    edit_json(small, "server4", lambda h: h.update(mtu=1500), "host.json")
    edit_json(small, "server1", lambda h: h["rdma"]["devices"].pop(), "host.json")
    (result,) = validate(small, ["host_rdma"])["host_rdma"]
    assert result.status is Status.FAIL
    assert [str(f) for f in result.findings] == [
        "server1 nic1 host.json rdma.devices: no RDMA device on this NIC",
        "server3 host.json rdma.traffic_class: traffic_class 104 (DSCP 26, Not-ECT); the "
        "intent's 106 (DSCP 26, ECT(0): RoCE ECN-capable)",
        "server3 host.json rdma.dcqcn.min_rate_mbps: min_rate_mbps is 400000.0, the intent's 100.0",
        "server3 nic0,nic1 host.json rdma.dcqcn.min_rate_mbps: min_rate_mbps 400000.0 is not "
        "below the NIC's line rate (400000 Mb/s): DCQCN cannot slow it",
        "server4 host.json mtu: MTU 1500; the intent's 9000",
    ]


def test_schedulers_name_switch_ports_queue_and_class(small: Lab) -> None:
    roce_weight_1_against_99_on_leaf3(small)
    strict_bulk_queue_on_leaf2(small)
    edit_json(small, "spine1", lambda db: db["QUEUE"]["Ethernet0|6"].pop("scheduler"))
    (result,) = validate(small, ["schedulers"])["schedulers"]
    leaf_ports = "Ethernet0,Ethernet8,Ethernet16,Ethernet24,Ethernet32"
    assert [str(f) for f in result.findings] == [
        "spine1 Ethernet0 QUEUE: queue 6 (cnp) has no scheduler",
        f"leaf2 {leaf_ports} SCHEDULER|scheduler.bulk: queue 1 (storage) is STRICT; the "
        "intent's DWRR weight 20",
        f"leaf3 {leaf_ports} SCHEDULER|scheduler.lossy: queue 0 (default) has DWRR weight 99; "
        "the intent's 20",
        f"leaf3 {leaf_ports} SCHEDULER|scheduler.lossy: queue 1 (storage) has DWRR weight 99; "
        "the intent's 20",
        f"leaf3 {leaf_ports} SCHEDULER|scheduler.rdma: queue 3 (roce) has DWRR weight 1; "
        "the intent's 80",
    ]


def test_hosts_and_schedulers_of_another_shape_pass_and_are_judged_by_its_intent(
    tmp_path: Path,
) -> None:
    """100G single-homed servers, RoCE on priority 4 with weight 60: healthy passes; a DCQCN
    floor below 400G but at 100G is named per NIC."""
    data = {
        "name": "other",
        "spines": {"count": 2, "ports": 8, "speed": "100G"},
        "leaves": {"count": 2, "ports": 8, "speed": "100G", "uplinks_per_spine": 1},
        "servers": {"count": 2, "nic_speed": "100G", "nics": 1, "dual_homed": False},
        "qos": {
            "lossless_priorities": [4],
            "rdma_scheduler_weight": 60,
            "classes": {"roce": {"dscp": 26, "tc": 4}, "cnp": {"dscp": 48, "tc": 6}},
        },
    }
    lab = generate(tmp_path / "other", data)
    names = ["host_rdma", "schedulers"]
    assert [r.status for rs in validate(lab, names).values() for r in rs] == [Status.PASS] * 2
    host(lab, "server1", dcqcn_min_rate_mbps=100000.0, pfc_priority=3)
    edit_json(lab, "leaf1", lambda db: db["SCHEDULER"]["scheduler.rdma"].update(weight="80"))
    found = [str(f) for rs in validate(lab, names).values() for r in rs for f in r.findings]
    assert found == [
        "server1 host.json rdma.pfc_priority: pfc_priority 3 (lossy); the intent's RoCE "
        "priority is 4: the NIC holds RoCE on the priority the switches pause",
        "server1 host.json rdma.dcqcn.min_rate_mbps: min_rate_mbps is 100000.0, the intent's 100.0",
        "server1 nic0 host.json rdma.dcqcn.min_rate_mbps: min_rate_mbps 100000.0 is not below "
        "the NIC's line rate (100000 Mb/s): DCQCN cannot slow it",
        "leaf1 Ethernet0,Ethernet4,Ethernet8 SCHEDULER|scheduler.rdma: queue 4 (roce) has "
        "DWRR weight 80; the intent's 60",
    ]


def test_weights_in_the_intents_proportions_pass(small: Lab) -> None:
    def doubled(db: Any) -> None:
        db["SCHEDULER"]["scheduler.rdma"]["weight"] = "160"
        db["SCHEDULER"]["scheduler.lossy"]["weight"] = "40"

    edit_json(small, "leaf1", doubled)
    (result,) = validate(small, ["schedulers"])["schedulers"]
    assert result.status is Status.PASS, result.findings


def test_bfd_removed_from_a_leaf_fails_the_failover_budget(small: Lab) -> None:
    conf = small.path / "configs" / "leaf3" / "frr.conf"
    conf.write_text(conf.read_text().replace(" neighbor FABRIC bfd profile fabric\n", ""))
    (result,) = validate(small, ["failover_budget"])["failover_budget"]
    assert result.status is Status.FAIL
    assert {f.device for f in result.findings} == {"leaf3"}
    assert {f.port for f in result.findings} == {"Ethernet24", "Ethernet32"}  # its uplinks
    assert result.findings[0].message.endswith(
        "has no BFD: BGP hold 9 s + 500 ms > failover budget 1400 ms"
    )


def test_deadlock_judges_a_dscp_lossy_downstream_instead_of_crashing(small: Lab) -> None:
    """leaf1 maps DSCP 26 lossy while leaf3 keeps one path per prefix: the buffer graph has a
    DSCP lossless at one end of a hop and lossy at the other (it raised KeyError: 26)."""
    edit_json(small, "leaf1", lambda db: db["DSCP_TO_TC_MAP"]["RDMA"].update({"26": "0"}))
    conf = small.path / "configs" / "leaf3" / "frr.conf"
    conf.write_text(conf.read_text().replace("maximum-paths 64", "maximum-paths 1"))
    results = validate(small, ["deadlock"])["deadlock"]
    assert [(r.scope, r.status) for r in results] == [
        ("priority 3", Status.PASS),
        ("priority 3, 1-link failures", Status.PASS),
    ]


def test_a_crashing_validator_is_one_line_and_exit_3(
    small: Lab, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(lab: Lab, params: Any) -> list[Result]:
        raise KeyError(26)

    real = registry.get("deadlock")
    monkeypatch.setitem(registry._REGISTRY, "deadlock", type(real)("deadlock", "static", crash, {}))
    assert cli.main(["validate", str(small.path), "--only", "deadlock"]) == 3
    captured = capsys.readouterr()
    assert captured.err == "twin: internal error in validator deadlock: KeyError: 26\n"
    assert not (small.path / "validate").exists()
