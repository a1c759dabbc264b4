"""`intent_values`: each CONFIG_DB table, frr.conf statement and host key the intent fixes
judged against the intent, on two fabric shapes (MLAG pairs of 400G leaves; a 3-tier 200G
fabric with a name prefix); what SONiC defaults to the intent's value, what the intent leaves
free and a TC no class uses pass."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from twin.lab.directory import Lab
from validators.examples import TINY, edit_json, generate
from validators.registry import get
from validators.result import Status

THREE_TIER = {
    "name": "tiers",
    "spines": {"count": 2, "ports": 8, "speed": "200G"},
    "leaves": {"count": 4, "ports": 8, "peer_link_ports": 1, "speed": "200G"},
    "superspines": {"count": 2, "speed": "200G"},
    "servers": {"count": 6, "nic_speed": "200G", "name_prefix": "node"},
}
SHAPES = {"tiny": TINY, "3-tier": THREE_TIER}
Json = dict[str, Any]


def _first(db: Json, table: str) -> str:
    return str(next(iter(db[table])))


def _bgp(db: Json) -> None:
    db["BGP_NEIGHBOR"][_first(db, "BGP_NEIGHBOR")]["local_addr"] = "10.9.9.9"


def _lanes(db: Json) -> None:
    db["PORT"]["Ethernet0"]["lanes"] = "1,1"


def _pool(db: Json) -> None:
    db["BUFFER_POOL"]["ingress_lossless_pool"]["size"] = "1000"


def _xon(db: Json) -> None:
    name = next(k for k in db["BUFFER_PROFILE"] if k.startswith("pg_lossless"))
    db["BUFFER_PROFILE"][name].pop("xon")


def _kmin(db: Json) -> None:
    db["WRED_PROFILE"]["RDMA_ECN"]["green_min_threshold"] = "307200"


def _storage_queue(db: Json) -> None:
    db["TC_TO_QUEUE_MAP"]["RDMA"]["1"] = "2"


def _watchdog(db: Json) -> None:
    db["PFC_WD"]["Ethernet0"]["action"] = "forward"


def _buffer_queue(db: Json) -> None:
    db.pop("BUFFER_QUEUE")


BREAKS: list[tuple[Callable[[Json], None], str, str, str]] = [
    (_bgp, "BGP_NEIGHBOR", "*", "local_addr 10.9.9.9; the intent's "),
    (_lanes, "PORT", "Ethernet0", "lanes 1,1; the intent's 0,"),
    (_pool, "BUFFER_POOL", "ingress_lossless_pool", "size 1000; the intent's "),
    (_xon, "BUFFER_PROFILE", "*", "xon absent; the intent's "),
    (_kmin, "WRED_PROFILE", "RDMA_ECN", "green_min_threshold 307200; the intent's 153600"),
    (_storage_queue, "TC_TO_QUEUE_MAP", "RDMA", "1 2; the intent's 1 (qos.classes)"),
    (_watchdog, "PFC_WD", "Ethernet0", "action forward; the intent's drop"),
    (_buffer_queue, "BUFFER_QUEUE", "", "table missing: the intent has "),
]


def _judge(lab: Lab) -> dict[str, Any]:
    return {r.scope: r for r in get("intent_values").check(lab, {})}


@pytest.fixture(scope="module", params=sorted(SHAPES))
def shape(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pristine lab of each shape, copied by `lab`."""
    out = tmp_path_factory.mktemp(request.param) / "lab"
    generate(out, SHAPES[request.param])
    return out


@pytest.fixture
def lab(shape: Path, tmp_path: Path) -> Lab:
    shutil.copytree(shape, tmp_path / "lab")
    return Lab.open(tmp_path / "lab")


def test_a_healthy_lab_passes(lab: Lab) -> None:
    results = _judge(lab)
    assert {s: r.status for s, r in results.items()} == dict.fromkeys(
        ("config_db", "frr", "hosts"), Status.PASS
    ), [str(f) for r in results.values() for f in r.findings]


@pytest.mark.parametrize(
    ("breaks", "table", "key", "says"), BREAKS, ids=[b[0].__name__.strip("_") for b in BREAKS]
)
def test_a_broken_table_is_named_by_switch_table_and_key(
    lab: Lab, breaks: Callable[[Json], None], table: str, key: str, says: str
) -> None:
    leaf = lab.nodes("leaf")[0]
    edit_json(lab, leaf, breaks)
    result = _judge(lab)["config_db"]
    assert result.status is Status.FAIL
    assert [
        f
        for f in result.findings
        if f.device == leaf and f.where == table and key in ("*", f.port) and says in f.message
    ], [str(f) for f in result.findings]


def test_what_sonic_defaults_to_the_intents_value_and_what_is_free_pass(lab: Lab) -> None:
    def edit(db: Json) -> None:
        port = db["PORT"]["Ethernet0"]
        for field in ("mtu", "description", "alias"):
            port.pop(field, None)
        db["WRED_PROFILE"]["RDMA_ECN"].pop("wred_yellow_enable")
        db["TC_TO_QUEUE_MAP"]["RDMA"]["5"] = "7"  # no class uses TC 5
        db["DSCP_TO_TC_MAP"]["RDMA"]["1"] = "1"  # nor DSCP 1
        for neighbour in db["BGP_NEIGHBOR"].values():
            neighbour.pop("admin_status")
            neighbour["name"] = "elsewhere"

    spine = lab.nodes("spine")[0]
    edit_json(lab, spine, edit)
    assert _judge(lab)["config_db"].status is Status.PASS


def test_bgp_admin_status_left_out_is_down_when_the_switch_defaults_it_down(lab: Lab) -> None:
    def edit(db: Json) -> None:
        db["DEVICE_METADATA"]["localhost"]["default_bgp_status"] = "down"
        db["BGP_NEIGHBOR"][_first(db, "BGP_NEIGHBOR")].pop("admin_status")

    spine = lab.nodes("spine")[0]
    edit_json(lab, spine, edit)
    (finding,) = _judge(lab)["config_db"].findings
    assert (finding.device, finding.where) == (spine, "BGP_NEIGHBOR")
    assert finding.message.startswith("admin_status absent (SONiC then uses down); the intent's up")


def test_a_routing_statement_removed_or_changed_is_named(lab: Lab) -> None:
    leaf = lab.nodes("leaf")[0]
    conf = lab.path / "configs" / leaf / "frr.conf"
    text = conf.read_text()
    network = next(line.strip() for line in text.splitlines() if "network " in line)
    changed = text.replace(f" {network}\n", "\n").replace("maximum-paths 64", "maximum-paths 1")
    conf.write_text(changed.replace("hostname ", "hostname renamed-"))
    result = _judge(lab)["frr"]
    assert sorted((f.device, f.message) for f in result.findings) == [
        (leaf, "'maximum-paths 64' missing: the intent's routing has it"),
        (leaf, f"'{network}' missing: the intent's routing has it"),
    ]


def test_a_hosts_gateway_and_marking_ports_are_judged(lab: Lab) -> None:
    server = lab.nodes("server")[0]

    def edit(host: Json) -> None:
        host["interfaces"][0]["gateway"] = "10.9.9.9"
        host.pop("hostname")
        host["dscp_marking"][0]["ports"].reverse()  # the same ports: passes

    edit_json(lab, server, edit, "host.json")
    (finding,) = _judge(lab)["hosts"].findings
    assert (finding.device, finding.where) == (server, "host.json interfaces.0.gateway")
    assert finding.message.startswith('"10.9.9.9"; the intent\'s "')
