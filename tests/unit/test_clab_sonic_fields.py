"""`sonic_fields`: the CONFIG_DB fields SONiC's daemons parse (sonic-swss e6b0c5b), and the CNP
scheduler that orchagent refused before the renderer wrote it as qosorch parses it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from twin.cli import main as cli
from twin.lab.directory import Lab
from validators.examples import edit_json, generate
from validators.static import sonic_fields

REQUIRED = {
    "PORT", "PORT_QOS_MAP", "QUEUE", "SCHEDULER", "WRED_PROFILE", "BUFFER_POOL",
    "BUFFER_PROFILE", "BUFFER_PG", "BUFFER_QUEUE", "DSCP_TO_TC_MAP", "TC_TO_PRIORITY_GROUP_MAP",
    "TC_TO_QUEUE_MAP", "PFC_WD", "PORTCHANNEL", "INTERFACE",
}  # fmt: skip
SMALL = Path(__file__).resolve().parents[2] / "examples" / "small.yaml"
SOURCE = re.compile(r"^(orchagent|cfgmgr)/[a-z_/]+\.cpp:\d+$")
CNP_AS_IT_WAS = {"type": "STRICT", "priority": "6"}
"""What twin/render/config_db.py wrote for the CNP scheduler before issue 22."""


def test_the_table_covers_the_required_tables_each_field_with_its_source_line() -> None:
    data = sonic_fields.table()
    assert re.fullmatch(r"[0-9a-f]{40}", data["commit"])
    assert set(data["tables"]) >= REQUIRED
    for name, spec in data["tables"].items():
        places: list[str] = []
        for own in [spec, *spec.get("keys", {}).values()]:
            places += own.get("fields", {}).values()
            places += [own["unknown"]["at"]] if "unknown" in own else []
            places += own.get("required", {}).values()
            places += [v["at"].split(" ")[0] for v in own.get("values", {}).values()]
        places += [spec["numbered"]["at"]] if "numbered" in spec else []
        assert places and all(SOURCE.match(p) for p in places), name
    assert "priority" not in data["tables"]["SCHEDULER"]["fields"]
    assert data["tables"]["SCHEDULER"]["unknown"]["action"] == "rejected"


def _run(lab: Path) -> tuple[int, str]:
    code = cli.main(["validate", str(lab), "--only", "sonic_fields", "--out", str(lab / "v")])
    return code, (lab / "v" / "report.md").read_text()


def test_cnp_priority_fails_twin_validate_and_the_rendered_scheduler_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lab: Lab = generate(tmp_path / "small", SMALL)
    assert lab.config_db("leaf1")["SCHEDULER"]["scheduler.cnp"] == {"type": "STRICT"}
    assert _run(lab.path)[0] == 0

    def as_it_was(db: Any) -> None:
        db["SCHEDULER"]["scheduler.cnp"] = dict(CNP_AS_IT_WAS)

    for switch in lab.switches():
        edit_json(lab, switch, as_it_was)
    code, report = _run(lab.path)
    assert code == 1
    assert (
        "leaf1 scheduler.cnp SCHEDULER: field 'priority' is not one orchagent (qosorch) parses: "
        "rejected (orchagent/qosorch.cpp:1437, sonic-swss e6b0c5b)"
    ) in report
    for switch in lab.switches():  # the same table judged once, named on every switch
        assert f"{switch} scheduler.cnp SCHEDULER: field 'priority'" in report, switch
    capsys.readouterr()


def test_a_field_ignored_and_a_map_key_out_of_range_are_named() -> None:
    assert sonic_fields.problem("BUFFER_POOL", "egress_lossy_pool", "xoff") is None
    assert "ignored (orchagent/bufferorch.cpp:498" in str(
        sonic_fields.problem("BUFFER_POOL", "egress_lossy_pool", "threshold")
    )
    assert sonic_fields.problem("DSCP_TO_TC_MAP", "RDMA", "63") is None
    assert "not a number in 0-63" in str(sonic_fields.problem("DSCP_TO_TC_MAP", "RDMA", "64"))
    # PORT_QOS_MAP|global takes only the DSCP map; PFC_WD|GLOBAL its own fields.
    assert sonic_fields.problem("PORT_QOS_MAP", "global", "tc_to_queue_map") is not None
    assert sonic_fields.problem("PORT_QOS_MAP", "Ethernet0", "tc_to_queue_map") is None
    assert sonic_fields.problem("PFC_WD", "GLOBAL", "POLL_INTERVAL") is None
    assert sonic_fields.problem("PFC_WD", "Ethernet0", "POLL_INTERVAL") is not None


def test_required_fields_and_refused_values_are_named(tmp_path: Path) -> None:
    """orchagent refuses a watchdog entry without `detection_time` and values outside what it
    parses (pfcwdorch.cpp 230-323, qosorch.cpp 744 and 1393): each fails, naming the switch."""
    lab: Lab = generate(tmp_path / "small", SMALL)
    port = next(iter(lab.config_db("leaf2")["PFC_WD"].keys() - {"GLOBAL"}))
    assert _run(lab.path)[0] == 0
    breaks = {
        "leaf1": lambda db: db["PFC_WD"][port].pop("detection_time"),
        "leaf2": lambda db: db["PFC_WD"][port].update(restoration_time="50", action="shutdown"),
        "spine1": lambda db: db["SCHEDULER"]["scheduler.cnp"].update(type="WFQ"),
        "spine2": lambda db: db["WRED_PROFILE"][next(iter(db["WRED_PROFILE"]))].update(ecn="on"),
    }
    for switch, edit in breaks.items():
        edit_json(lab, switch, edit)
    code, report = _run(lab.path)
    assert code == 1
    for line in (
        f"leaf1 {port} PFC_WD: field 'detection_time' is missing: orchagent (pfcwdorch) refuses",
        f"leaf2 {port} PFC_WD: restoration_time='50' is refused by orchagent (pfcwdorch): it "
        "takes an integer in 100-60000",
        f"leaf2 {port} PFC_WD: action='shutdown' is refused by orchagent (pfcwdorch): it takes "
        "one of forward, drop, alert",
        "spine1 scheduler.cnp SCHEDULER: type='WFQ' is refused by orchagent (qosorch): it takes "
        "one of DWRR, WRR, STRICT",
        "SPINE2",
    ):
        assert line.replace("SPINE2", "spine2 ") in report, line
    assert "ecn='on' is refused" in report
    assert sonic_fields.missing("PFC_WD", "GLOBAL", {}) == []
    assert sonic_fields.value_problem("PFC_WD", port, "detection_time", "5000") is None
    assert sonic_fields.value_problem("PFC_WD", port, "detection_time", "5001") is not None
