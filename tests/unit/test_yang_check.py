"""twin.yang.check: CONFIG_DB JSON validated against the SONiC YANG models with libyang."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "libyang",
    reason="SONiC YANG validation needs the libyang binding: apt-get install libyang2-dev "
    "gcc, then pip install libyang==2.7.1",
)

from twin.yang.check import (
    YANG_DIR,
    load_context,
    load_schema,
    translate_config_db,
    validate_config_db,
)

DATA = Path(__file__).resolve().parents[1] / "data"
Config = dict[str, dict[str, dict[str, Any]]]


def _sample() -> dict[str, Config]:
    data: dict[str, Config] = json.loads((DATA / "sample_config_db.json").read_text())
    return data


def _ports(n: int) -> dict[str, dict[str, str]]:
    return {
        f"Ethernet{8 * i}": {
            "alias": f"etp{i + 1}",
            "index": str(i + 1),
            "lanes": ",".join(str(8 * i + lane) for lane in range(1, 9)),
            "speed": "400000",
            "mtu": "9100",
            "fec": "rs",
            "admin_status": "up",
        }
        for i in range(n)
    }


# A small leaf in the shapes of docs sonic.md section 1 (one table per subsection).
LEAF: Config = {
    "DEVICE_METADATA": {
        "localhost": {
            "hostname": "leaf1",
            "hwsku": "Force10-S6000",
            "platform": "x86_64-kvm_x86_64-r0",
            "mac": "52:54:00:12:00:01",
            "bgp_asn": "65101",
            "bgp_router_id": "10.0.0.11",
            "type": "LeafRouter",
            "buffer_model": "traditional",
            "default_pfcwd_status": "enable",
        }
    },
    "PORT": _ports(5),  # Ethernet0..Ethernet32, 400G, 8 lanes
    "INTERFACE": {
        "Ethernet0": {},
        "Ethernet0|10.1.0.0/31": {},
        "Ethernet8": {},
        "Ethernet8|10.1.0.2/31": {},
    },
    "LOOPBACK_INTERFACE": {"Loopback0": {}, "Loopback0|10.0.0.11/32": {}},
    "BGP_NEIGHBOR": {
        "10.1.0.1": {
            "asn": "65001",
            "name": "spine1",
            "local_addr": "10.1.0.0",
            "holdtime": "9",
            "keepalive": "3",
            "admin_status": "up",
        },
        "10.1.0.3": {"asn": "65002", "name": "spine2", "local_addr": "10.1.0.2"},
    },
    "PORTCHANNEL": {
        "PortChannel11": {
            "admin_status": "up",
            "mtu": "9100",
            "min_links": "1",
            "fast_rate": "true",
        },
        "PortChannel99": {
            "admin_status": "up",
            "mtu": "9100",
            "min_links": "1",
            "fast_rate": "true",
        },
    },
    "PORTCHANNEL_MEMBER": {"PortChannel11|Ethernet16": {}, "PortChannel99|Ethernet24": {}},
    "PORTCHANNEL_INTERFACE": {"PortChannel99": {}, "PortChannel99|192.168.255.0/31": {}},
    "MCLAG_DOMAIN": {
        "10": {
            "source_ip": "192.168.255.0",
            "peer_ip": "192.168.255.1",
            "peer_link": "PortChannel99",
            "keepalive_interval": "1",
            "session_timeout": "15",
        }
    },
    "MCLAG_INTERFACE": {"10|PortChannel11": {"if_type": "PortChannel"}},
    "MCLAG_UNIQUE_IP": {"Vlan100": {"unique_ip": "enable"}},
    "VLAN": {"Vlan100": {"vlanid": "100", "mtu": "9100"}},
    "VLAN_MEMBER": {
        "Vlan100|Ethernet32": {"tagging_mode": "untagged"},
        "Vlan100|PortChannel11": {"tagging_mode": "untagged"},
    },
    "VLAN_INTERFACE": {"Vlan100": {}, "Vlan100|192.168.100.1/24": {}},
    "DSCP_TO_TC_MAP": {"RDMA": {"0": "0", "26": "3", "46": "5", "48": "6"}},
    "TC_TO_PRIORITY_GROUP_MAP": {"RDMA": {"0": "0", "3": "3", "5": "0", "6": "0"}},
    "TC_TO_QUEUE_MAP": {"RDMA": {"0": "0", "3": "3", "5": "5", "6": "6"}},
    "MAP_PFC_PRIORITY_TO_QUEUE": {"RDMA": {"3": "3"}},
    "PFC_PRIORITY_TO_PRIORITY_GROUP_MAP": {"RDMA": {"3": "3"}},
    "PORT_QOS_MAP": {
        "global": {"dscp_to_tc_map": "RDMA"},
        "Ethernet0": {
            "dscp_to_tc_map": "RDMA",
            "tc_to_queue_map": "RDMA",
            "tc_to_pg_map": "RDMA",
            "pfc_to_queue_map": "RDMA",
            "pfc_to_pg_map": "RDMA",
            "pfc_enable": "3",
            "pfcwd_sw_enable": "3",
        },
    },
    "SCHEDULER": {
        "sched.lossy": {"type": "DWRR", "weight": "20"},
        "sched.rdma": {"type": "DWRR", "weight": "80"},
        "sched.cnp": {"type": "STRICT"},
    },
    "WRED_PROFILE": {
        "RDMA_ECN": {
            "ecn": "ecn_all",
            "wred_green_enable": "true",
            "green_min_threshold": "153600",
            "green_max_threshold": "1536000",
            "green_drop_probability": "10",
        }
    },
    "QUEUE": {
        "Ethernet0|3": {"scheduler": "sched.rdma", "wred_profile": "RDMA_ECN"},
        "Ethernet0|6": {"scheduler": "sched.cnp"},
        "Ethernet0|0": {"scheduler": "sched.lossy"},
    },
    "BUFFER_POOL": {
        "ingress_lossless_pool": {
            "type": "ingress",
            "mode": "dynamic",
            "size": "60000000",
            "xoff": "20000000",
        },
        "egress_lossless_pool": {"type": "egress", "mode": "static", "size": "60000000"},
    },
    "BUFFER_PROFILE": {
        "ingress_lossy_profile": {"pool": "ingress_lossless_pool", "size": "0", "dynamic_th": "3"},
        "pg_lossless_400000_40m_profile": {
            "pool": "ingress_lossless_pool",
            "size": "18432",
            "xon": "18432",
            "xoff": "102400",
            "xon_offset": "2496",
            "dynamic_th": "0",
        },
        "egress_lossless_profile": {
            "pool": "egress_lossless_pool",
            "size": "0",
            "static_th": "60000000",
        },
    },
    "BUFFER_PG": {
        "Ethernet0|0": {"profile": "ingress_lossy_profile"},
        "Ethernet0|3-4": {"profile": "pg_lossless_400000_40m_profile"},
    },
    "BUFFER_QUEUE": {"Ethernet0|3-4": {"profile": "egress_lossless_profile"}},
    "CABLE_LENGTH": {"AZURE": {"Ethernet0": "40m"}},
    "PFC_WD": {
        "GLOBAL": {"POLL_INTERVAL": "200"},
        "Ethernet0": {"action": "drop", "detection_time": "200", "restoration_time": "200"},
    },
}


def _with(change: Callable[[Config], object]) -> list[str]:
    config = copy.deepcopy(LEAF)
    change(config)
    return validate_config_db(config)


def _set(table: str, key: str, **fields: Any) -> Callable[[Config], object]:
    return lambda c: c.setdefault(table, {}).setdefault(key, {}).update(fields)


def _del(table: str, key: str | None = None, fld: str | None = None) -> Callable[[Config], object]:
    def change(c: Config) -> None:
        if key is None:
            del c[table]
        elif fld is None:
            del c[table][key]
        else:
            del c[table][key][fld]

    return change


def _only(problems: list[str], *parts: str) -> None:
    assert len(problems) == 1, problems
    for part in parts:
        assert part in problems[0], problems


# --------------------------------------------------------------------------- models and loader
def test_models_are_package_data() -> None:
    assert len(list(YANG_DIR.glob("*.yang"))) == 146
    assert (YANG_DIR / "LICENSE").read_text().startswith("Copyright 2019 Microsoft")


def test_context_is_loaded_once_with_all_modules() -> None:
    ctx = load_context()
    assert load_context() is ctx
    names = {m.name() for m in ctx}
    assert {p.stem for p in YANG_DIR.glob("*.yang")} <= names


def test_table_index_comes_from_the_schema() -> None:
    tables = load_schema().tables
    assert len(tables) > 200
    assert tables["PORT"].module == "sonic-port"
    assert [lst.name for lst in tables["INTERFACE"].lists] == [
        "INTERFACE_LIST",
        "INTERFACE_IPPREFIX_LIST",
    ]
    assert set(tables["DEVICE_METADATA"].containers) >= {"localhost"}
    assert tables["DSCP_TO_TC_MAP"].lists[0].map_list is not None  # a "map" table
    assert tables["PORT"].lists[0].map_list is None


# --------------------------------------------------------------------------- the sample
def test_sample_config_db_validates_as_a_whole() -> None:
    sample = _sample()["SAMPLE_CONFIG_DB_JSON"]
    assert len(sample) > 190
    assert validate_config_db(sample) == []


def test_sample_unknown_table_is_rejected() -> None:
    _only(validate_config_db(_sample()["SAMPLE_CONFIG_DB_UNKNOWN"]), "UNKNOWN_TABLE", "no YANG")


def test_sample_special_case_empty_container_is_valid() -> None:
    assert validate_config_db(_sample()["SAMPLE_CONFIG_DB_SPECIAL_CASE"]) == []


def test_validation_does_not_modify_the_input() -> None:
    sample = _sample()["SAMPLE_CONFIG_DB_JSON"]
    before = copy.deepcopy(sample)
    validate_config_db(sample)
    assert sample == before


# --------------------------------------------------------------------------- must pass
def test_leaf_config_in_sonic_md_shapes_is_valid() -> None:
    assert validate_config_db(LEAF) == []


@pytest.mark.parametrize("table", sorted(LEAF))
def test_each_leaf_table_is_checked(table: str) -> None:
    data, problems = translate_config_db(LEAF)
    assert problems == []
    model = load_schema().tables[table]
    assert table in data[f"{model.module}:{model.top}"]


# --------------------------------------------------------------------------- must be rejected
def test_port_mtu_out_of_range() -> None:
    _only(_with(_set("PORT", "Ethernet0", mtu="99999")), "PORT", '"Ethernet0"', '"mtu"', "99999")


def test_a_value_refused_once_is_refused_again_wherever_it_is() -> None:
    """Each distinct text is checked once per leaf: the refusal is remembered, not lost."""
    first = _with(_set("PORT", "Ethernet0", mtu="99999"))
    _only(_with(_set("PORT", "Ethernet0", mtu="99999")), *first)
    both = _with(lambda c: [_set("PORT", p, mtu="99999")(c) for p in ("Ethernet0", "Ethernet8")])
    assert [p.replace("Ethernet8", "Ethernet0") for p in both] == first * 2
    assert _with(_set("PORT", "Ethernet0", mtu="9000")) == []


def test_buffer_pg_profile_must_exist() -> None:
    problems = _with(_set("BUFFER_PG", "Ethernet0|3-4", profile="pg_lossless_400000_5m_profile"))
    _only(problems, "BUFFER_PG", '"Ethernet0|3-4"', '"profile"', "existing BUFFER_PROFILE")


def test_unknown_table() -> None:
    _only(_with(_set("FABRIC_TWIN_NOTES", "x", a="b")), "FABRIC_TWIN_NOTES", "no YANG model")


@pytest.mark.parametrize("value", ["3;4", "3-4", "8", "3,"])
def test_pfc_enable_pattern(value: str) -> None:
    problems = _with(_set("PORT_QOS_MAP", "Ethernet0", pfc_enable=value))
    _only(problems, "PORT_QOS_MAP", '"pfc_enable"', "pattern")


def test_queue_wred_profile_must_exist() -> None:
    problems = _with(_set("QUEUE", "Ethernet0|3", wred_profile="NO_SUCH_ECN"))
    _only(problems, "QUEUE", '"Ethernet0|3"', '"wred_profile"', "leafref", "WRED_PROFILE")


# --------------------------------------------------------------------------- model requirements
# What the models require beyond sonic.md's examples (or allow): (change, expected problem
# substring or None when the model accepts it).
REQUIREMENTS: dict[str, tuple[Callable[[Config], object], str | None]] = {
    # MCLAG
    "mclag peer_link must name an existing PORT or PORTCHANNEL": (
        _set("MCLAG_DOMAIN", "10", peer_link="PortChannel5"),
        "existing PORTCHANNEL",
    ),
    "mclag peer_link may be a port": (_set("MCLAG_DOMAIN", "10", peer_link="Ethernet8"), None),
    "mclag peer_link is optional": (_del("MCLAG_DOMAIN", "10", "peer_link"), None),
    "mclag keepalive*3 <= session_timeout": (
        _set("MCLAG_DOMAIN", "10", session_timeout="2"),
        "session_timeout",
    ),
    "mclag peer_ip is IPv4 only": (_set("MCLAG_DOMAIN", "10", peer_ip="fc00::1"), "pattern"),
    "mclag interface must be an existing PORTCHANNEL": (
        _set("MCLAG_INTERFACE", "10|PortChannel12", if_type="PortChannel"),
        "leafref",
    ),
    "mclag unique ip needs an MCLAG_DOMAIN": (
        lambda c: (c.pop("MCLAG_DOMAIN"), c.pop("MCLAG_INTERFACE")),
        "mclag not configured",
    ),
    "mclag unique ip vlan is not checked against VLAN": (
        _set("MCLAG_UNIQUE_IP", "Vlan200", unique_ip="enable"),
        None,
    ),
    # QoS
    "port_qos_map maps must exist": (
        _set("PORT_QOS_MAP", "Ethernet0", tc_to_queue_map="NOPE"),
        "leafref",
    ),
    "port_qos_map port must exist": (_set("PORT_QOS_MAP", "Ethernet99", pfc_enable="3"), "PORT"),
    "port_qos_map pfc_enable may be empty": (
        _set("PORT_QOS_MAP", "Ethernet0", pfc_enable=""),
        None,
    ),
    "dscp above 63 is rejected": (
        lambda c: c["DSCP_TO_TC_MAP"]["RDMA"].update({"64": "1"}),
        "DSCP",
    ),
    "tc_to_pg pg above 7 is rejected": (
        lambda c: c["TC_TO_PRIORITY_GROUP_MAP"]["RDMA"].update({"1": "8"}),
        "Priority Group",
    ),
    "map names follow the 32-char pattern (no dot)": (
        _set("DSCP_TO_TC_MAP", "a.b", **{"1": "1"}),
        "pattern",
    ),
    "scheduler names may contain dots": (_set("SCHEDULER", "sched.x", type="STRICT"), None),
    "scheduler weight is 1..100": (_set("SCHEDULER", "sched.lossy", weight="0"), "range"),
    "scheduler pir >= cir": (_set("SCHEDULER", "sched.lossy", cir="1000", pir="10"), "pir"),
    "queue scheduler must exist": (_set("QUEUE", "Ethernet0|0", scheduler="nope"), "leafref"),
    "queue key may be a range": (_set("QUEUE", "Ethernet0|1-2", scheduler="sched.lossy"), None),
    "wred max >= min": (_set("WRED_PROFILE", "RDMA_ECN", green_max_threshold="100"), "max"),
    "wred probability <= 100": (
        _set("WRED_PROFILE", "RDMA_ECN", green_drop_probability="101"),
        "range",
    ),
    # PFC watchdog
    "pfc_wd GLOBAL alone is accepted": (lambda c: c["PFC_WD"].pop("Ethernet0"), None),
    "pfc_wd port without GLOBAL is accepted": (lambda c: c["PFC_WD"].pop("GLOBAL"), None),
    "pfc_wd detection_time >= POLL_INTERVAL": (
        _set("PFC_WD", "Ethernet0", detection_time="150"),
        "POLL_INTERVAL",
    ),
    "pfc_wd POLL_INTERVAL 100..1000": (_set("PFC_WD", "GLOBAL", POLL_INTERVAL="50"), "range"),
    "pfc_wd BIG_RED_SWITCH is not modelled": (
        _set("PFC_WD", "GLOBAL", BIG_RED_SWITCH="enable"),
        "unknown field",
    ),
    "pfc_wd port must exist": (_set("PFC_WD", "Ethernet99", action="drop"), "PORT"),
    # buffers
    "buffer_pool type is mandatory": (_del("BUFFER_POOL", "egress_lossless_pool", "type"), "type"),
    "buffer_pool mode is mandatory": (_del("BUFFER_POOL", "egress_lossless_pool", "mode"), "mode"),
    "buffer_pool size is optional": (_del("BUFFER_POOL", "egress_lossless_pool", "size"), None),
    "buffer_pool percentage excludes size": (
        _set("BUFFER_POOL", "egress_lossless_pool", percentage="50"),
        "Percentage",
    ),
    "buffer_pool xoff on an egress pool is accepted": (
        _set("BUFFER_POOL", "egress_lossless_pool", xoff="100"),
        None,
    ),
    "buffer_profile pool is mandatory": (
        _del("BUFFER_PROFILE", "ingress_lossy_profile", "pool"),
        "pool",
    ),
    "buffer_profile size is mandatory": (
        _del("BUFFER_PROFILE", "ingress_lossy_profile", "size"),
        "size",
    ),
    "buffer_profile threshold is optional": (
        _del("BUFFER_PROFILE", "ingress_lossy_profile", "dynamic_th"),
        None,
    ),
    "buffer_profile pool must exist": (
        _set("BUFFER_PROFILE", "ingress_lossy_profile", pool="nope_pool"),
        "leafref",
    ),
    "buffer_profile dynamic_th is -8..7": (
        _set("BUFFER_PROFILE", "ingress_lossy_profile", dynamic_th="8"),
        "range",
    ),
    "buffer_pg profile NULL is accepted": (
        _set("BUFFER_PG", "Ethernet0|3-4", profile="NULL"),
        None,
    ),
    "buffer_pg comma-joined ports are rejected": (
        _set("BUFFER_PG", "Ethernet0,Ethernet8|1", profile="ingress_lossy_profile"),
        "leafref",
    ),
    "buffer_pg pg is 0..7": (
        _set("BUFFER_PG", "Ethernet0|8", profile="ingress_lossy_profile"),
        "PG",
    ),
    "cable length needs the m suffix": (
        lambda c: c["CABLE_LENGTH"]["AZURE"].update(Ethernet8="40"),
        "cable length",
    ),
    "cable length port must exist": (
        lambda c: c["CABLE_LENGTH"]["AZURE"].update(Ethernet99="5m"),
        "leafref",
    ),
    # L3 interfaces, BGP
    "interface ip needs the <ifname> entry": (_del("INTERFACE", "Ethernet8"), "Try adding"),
    "vlan_interface ip needs the <vlan> entry": (_del("VLAN_INTERFACE", "Vlan100"), "Try adding"),
    "loopback ip needs the <loopback> entry": (_del("LOOPBACK_INTERFACE", "Loopback0"), "leafref"),
    "portchannel_interface ip does not need the <pc> entry": (
        _del("PORTCHANNEL_INTERFACE", "PortChannel99"),
        None,
    ),
    "interface ip needs a prefix length": (_set("INTERFACE", "Ethernet8|10.1.0.3", **{}), "union"),
    "bgp neighbor (plain ip) needs nothing else": (_set("BGP_NEIGHBOR", "10.1.0.9"), None),
    "bgp neighbor does not need DEVICE_METADATA bgp_asn": (
        _del("DEVICE_METADATA", "localhost", "bgp_asn"),
        None,
    ),
    "bgp neighbor ipv6 key": (_set("BGP_NEIGHBOR", "fc00::1", asn="65001"), None),
    "bgp neighbor vrf|ip needs BGP_GLOBALS": (
        _set("BGP_NEIGHBOR", "default|10.1.0.5", asn="65001"),
        '"default"',
    ),
    # LAG, VLAN, PORT, DEVICE_METADATA
    "portchannel admin_status is mandatory": (
        _del("PORTCHANNEL", "PortChannel11", "admin_status"),
        "admin_status",
    ),
    "portchannel name is PortChannel + 1..4 digits": (
        _set("PORTCHANNEL", "Po1", admin_status="up"),
        "pattern",
    ),
    "portchannel legacy members field is not modelled": (
        _set("PORTCHANNEL", "PortChannel11", members=["Ethernet16"]),
        "unknown field",
    ),
    "vlan member port cannot be a router interface": (
        lambda c: c["INTERFACE"].update({"Ethernet32": {}}),
        "router interface",
    ),
    "vlan member tagging_mode is mandatory": (
        lambda c: c["VLAN_MEMBER"].update({"Vlan100|Ethernet32": {}}),
        "tagging_mode",
    ),
    "vlan vlanid must match the name": (_set("VLAN", "Vlan100", vlanid="101"), "vlanid"),
    "vlan legacy members field is not modelled": (
        _set("VLAN", "Vlan100", members=["Ethernet32"]),
        "unknown field",
    ),
    "port lanes is mandatory": (_del("PORT", "Ethernet8", "lanes"), "lanes"),
    "port speed is mandatory": (_del("PORT", "Ethernet8", "speed"), "speed"),
    "port mtu 9216 is the maximum": (_set("PORT", "Ethernet8", mtu="9217"), "range"),
    "port adv_speeds comma string": (_set("PORT", "Ethernet8", adv_speeds="100000,400000"), None),
    "device_metadata hostname alone is enough": (
        lambda c: c.update(DEVICE_METADATA={"localhost": {"hostname": "leaf1"}}),
        None,
    ),
    "device_metadata type is an enumeration": (
        _set("DEVICE_METADATA", "localhost", type="Leaf"),
        "pattern",
    ),
    "device_metadata AI backend type": (
        _set("DEVICE_METADATA", "localhost", type="BackEndLeafRouter", resource_type="ComputeAI"),
        None,
    ),
    "device_metadata only has localhost/bmc": (
        _set("DEVICE_METADATA", "foo", hostname="x"),
        "unknown key",
    ),
}


@pytest.mark.parametrize("name", sorted(REQUIREMENTS))
def test_model_requirement(name: str) -> None:
    change, expected = REQUIREMENTS[name]
    problems = _with(change)
    if expected is None:
        assert problems == []
    else:
        assert problems, "the model accepted it"
        assert expected in problems[0], problems


# --------------------------------------------------------------------------- translation
def test_values_get_their_yang_json_types() -> None:
    data, problems = translate_config_db(LEAF)
    assert problems == []
    port = data["sonic-port:sonic-port"]["PORT"]["PORT_LIST"][0]
    assert port["speed"] == 400000 and port["mtu"] == 9100 and port["lanes"] == "1,2,3,4,5,6,7,8"
    wred = data["sonic-wred-profile:sonic-wred-profile"]["WRED_PROFILE"]["WRED_PROFILE_LIST"][0]
    assert wred["wred_green_enable"] is True
    assert wred["green_min_threshold"] == "153600"  # uint64: a JSON string in RFC 7951
    profile = data["sonic-buffer-profile:sonic-buffer-profile"]["BUFFER_PROFILE"]
    assert profile["BUFFER_PROFILE_LIST"][0]["dynamic_th"] == 3  # int32: a number


def test_key_parts_pick_the_list() -> None:
    data, _ = translate_config_db(LEAF)
    interface = data["sonic-interface:sonic-interface"]["INTERFACE"]
    assert {"name": "Ethernet0"} in interface["INTERFACE_LIST"]
    assert {"name": "Ethernet0", "ip-prefix": "10.1.0.0/31"} in interface["INTERFACE_IPPREFIX_LIST"]
    bgp = data["sonic-bgp-neighbor:sonic-bgp-neighbor"]["BGP_NEIGHBOR"]
    assert set(bgp) == {"BGP_NEIGHBOR_TEMPLATE_LIST"}


def test_single_key_tables_fill_containers() -> None:
    data, _ = translate_config_db(LEAF)
    meta = data["sonic-device_metadata:sonic-device_metadata"]["DEVICE_METADATA"]
    assert meta["localhost"]["hostname"] == "leaf1"
    assert meta["localhost"]["bgp_asn"] == 65101


def test_map_tables_become_inner_lists() -> None:
    data, _ = translate_config_db(LEAF)
    maps = data["sonic-dscp-tc-map:sonic-dscp-tc-map"]["DSCP_TO_TC_MAP"]["DSCP_TO_TC_MAP_LIST"]
    assert maps[0]["name"] == "RDMA"
    assert {"dscp": "26", "tc": 3} in maps[0]["DSCP_TO_TC_MAP"]
    cable = data["sonic-cable-length:sonic-cable-length"]["CABLE_LENGTH"]["CABLE_LENGTH_LIST"]
    assert cable[0]["CABLE_LENGTH"] == [{"port": "Ethernet0", "length": "40m"}]


def test_leaf_lists_from_arrays_and_comma_strings() -> None:
    config = copy.deepcopy(LEAF)
    config["PORT"]["Ethernet8"]["adv_speeds"] = "100000, 400000"
    config["VLAN"]["Vlan100"]["dhcp_servers"] = ["10.0.0.1", "10.0.0.2"]
    data, problems = translate_config_db(config)
    assert problems == []
    port = data["sonic-port:sonic-port"]["PORT"]["PORT_LIST"][1]
    assert port["adv_speeds"] == [100000, 400000]
    vlan = data["sonic-vlan:sonic-vlan"]["VLAN"]["VLAN_LIST"][0]
    assert vlan["dhcp_servers"] == ["10.0.0.1", "10.0.0.2"]
    assert validate_config_db(config) == []


def test_json_numbers_and_booleans_are_accepted_too() -> None:
    config = copy.deepcopy(LEAF)
    config["PORT"]["Ethernet8"]["mtu"] = 9100
    config["WRED_PROFILE"]["RDMA_ECN"]["wred_green_enable"] = True
    assert validate_config_db(config) == []


def test_redis_null_placeholder_is_ignored() -> None:
    assert _with(lambda c: c["INTERFACE"].update(Ethernet8={"NULL": "NULL"})) == []


def test_key_with_wrong_number_of_parts() -> None:
    _only(_with(_set("INTERFACE", "a|b|c")), "INTERFACE", '"a|b|c"', "<name>|<ip-prefix>")


def test_unknown_field_lists_the_allowed_ones() -> None:
    _only(_with(_set("PORT", "Ethernet8", speeed="400000")), '"speeed"', "unknown field", "speed")


def test_list_value_for_a_plain_field() -> None:
    _only(_with(_set("PORT", "Ethernet8", mtu=["9100"])), '"mtu"', "single value")


def test_several_problems_are_all_reported() -> None:
    def change(c: Config) -> None:
        c["PORT"]["Ethernet0"]["mtu"] = "99999"
        c["PORT"]["Ethernet8"]["fec"] = "bogus"
        c["QUEUE"]["Ethernet0|3"]["wred_profile"] = "NOPE"
        c["BUFFER_PG"]["Ethernet0|0"]["profile"] = "nope"
        c["SCHEDULER"]["sched.lossy"]["weight"] = "0"

    problems = _with(change)
    assert len(problems) == 5, problems
    text = "\n".join(problems)
    for part in ('"mtu"', '"fec"', '"wred_profile"', '"profile"', '"weight"'):
        assert part in text


def test_consequences_of_a_rejected_entry_are_summarised() -> None:
    # PORT Ethernet0 loses its mandatory speed: everything that refers to it fails too.
    problems = _with(_del("PORT", "Ethernet0", "speed"))
    assert 'table PORT, key "Ethernet0", field "speed"' in problems[0]
    assert "referring to the rejected entries" in problems[-1]
    assert all("Ethernet0" not in p for p in problems[1:-1]), problems


def test_max_problems() -> None:
    config = copy.deepcopy(LEAF)
    for port in config["PORT"].values():
        port["mtu"] = "99999"
    problems = validate_config_db(config, max_problems=2)
    assert len(problems) == 3 and problems[-1] == "(stopped after 2 problems; there are more)"
    assert len(validate_config_db(config, max_problems=5)) == 5


def test_shape_errors_do_not_raise() -> None:
    bad: Any = {"PORT": ["Ethernet0"], "VLAN": {"Vlan100": "x"}}
    problems = validate_config_db(bad)
    assert len(problems) == 2 and "PORT" in problems[0] and "Vlan100" in problems[1]
