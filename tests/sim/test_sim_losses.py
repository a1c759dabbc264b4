"""What a flow lost on the simulator, told apart as the validators need: drops while a fault
is in force are the fault's, drops outside any fault are not, and an open-ended flow's packets
still in flight when it stops arrive (within the scenario's `settle`) rather than count as
lost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.simlab import copy, edit_switches, incast, play, small_lab, small_xoff, validate
from validators.result import Status

DOWN, UP = 0.0005, 0.001


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_lab(tmp_path_factory.mktemp("lab") / "small")


def newest_flows(lab: Path) -> list[dict[str, Any]]:
    run = max((lab / "runs").iterdir())
    flows: list[dict[str, Any]] = json.loads((run / "flows.json").read_text())
    return flows


def link_down(**more: Any) -> dict[str, Any]:
    """An All-Reduce while server2's nic0 link is down from DOWN to UP."""
    return {
        "name": "server-link-down",
        "traffic": [{"at": 0, "kind": "all_reduce", "servers": "all", "qps": 2,
                     "message": 4_000_000, "iterations": 6}],
        "faults": [{"at": DOWN, "fault": "link-down", "link": "server2:nic0"},
                   {"at": UP, "fault": "link-up", "link": "server2:nic0"}],
        **more,
    }  # fmt: skip


def test_drops_while_a_link_is_down_are_the_faults(lab: Path) -> None:
    scenario = link_down(validate={"lossless_isolation": {}})
    loss = validate(lab, scenario)["lossless_isolation/loss roce"]
    assert loss.status is Status.PASS, loss.reason
    hit = [f for f in newest_flows(lab) if f["lost"]]
    assert hit, "the link went down under the collective: packets toward it are dropped"
    for f in hit:
        ((t, missing),) = f["gaps"]
        assert missing == f["lost"] and f["tail_lost"] == 0
        assert DOWN <= t - missing / f["pps"] < UP  # the gap begins at the first drop


def test_lossless_drops_outside_any_fault_fail(lab: Path, tmp_path: Path) -> None:
    broken = copy(lab, tmp_path / "headroom")
    edit_switches(broken, small_xoff)
    # storage traffic marked DSCP 26 (lossless) at line rate, no DCQCN: the headroom overflows
    results = validate(broken, {**incast(), "validate": {"lossless_isolation": {}}})
    loss = results["lossless_isolation/loss storage"]
    assert loss.status is Status.FAIL and int(loss.figures["lossless_lost"]) > 0
    assert "outside any fault" in loss.reason


def test_an_open_ended_flow_delivers_what_it_sent_before_the_run_ends(lab: Path) -> None:
    backup = {"at": 0, "duration": 0.002, "kind": "backup", "src": "server1",
              "dst": "server4", "class": "roce", "gbps": 100}  # fmt: skip
    played = play(lab, {"name": "backup", "traffic": [backup], "settle": 0.001})
    assert played.flows
    for f in played.flows:
        assert f["sent"] > 0 and f["lost"] == f["tail_lost"] == 0
        assert f["bytes_delivered"] == f["bytes_sent"] and f["completed"]
    assert played.ended > 0.002  # its last packets arrived after it stopped sending


@pytest.mark.parametrize("transport", ["tcp", "open"])
def test_a_loss_fault_costs_a_tcp_backup_retransmissions(lab: Path, transport: str) -> None:
    scenario = {
        "name": "lossy-link",
        "settle": 0.005,
        "traffic": [{"at": 0, "duration": 0.001, "kind": "backup", "src": "server1",
                     "dst": "server3", "class": "storage", "gbps": 100, "qps": 1}],
        "faults": [{"at": 0, "fault": "loss", "link": f"server3:{nic}", "percent": 2}
                   for nic in ("nic0", "nic1")],
        "sim": {"lossy_transport": transport},
    }  # fmt: skip
    (flow,) = [f for f in play(lab, scenario).flows if f["class"] == "storage"]
    assert flow["transport"] == transport and flow["lost"] > 0
    if transport == "tcp":  # resent until delivered, backing off on each loss
        assert flow["retransmitted"] >= flow["lost"] and flow["tail_lost"] == 0
        assert flow["completed"] and flow["received"] == flow["sent"] - flow["retransmitted"]
        assert 0 < flow["goodput_bps"] < 100e9
    else:  # what the fault took is gone
        assert flow["retransmitted"] == 0 and flow["received"] == flow["sent"] - flow["lost"]


def test_clear_ends_a_loss_fault(lab: Path) -> None:
    def lost(*clear: dict[str, Any]) -> int:
        scenario = {
            "name": "cleared-loss",
            "traffic": [{"at": 0, "duration": 0.001, "kind": "backup", "src": "server1",
                         "dst": "server3", "class": "storage", "gbps": 100, "qps": 1}],
            "faults": [*({"at": 0, "fault": "loss", "link": f"server3:{nic}", "percent": 5}
                         for nic in ("nic0", "nic1")), *clear],
            "sim": {"lossy_transport": "open"},
        }  # fmt: skip
        return sum(f["lost"] for f in play(lab, scenario).flows)

    cleared = [{"at": 0.0002, "fault": "clear", "link": f"server3:{n}"} for n in ("nic0", "nic1")]
    always, early = lost(), lost(*cleared)
    assert 0 < early < 0.4 * always  # a fifth of the time lossy: about a fifth of the drops


def test_the_lossy_class_verdict_reports_what_tcp_resent(lab: Path) -> None:
    scenario = {
        "name": "tcp-incast",
        "traffic": [{"at": 0, "duration": 0.002, "kind": "incast", "class": "storage", "qps": 2,
                     "src": ["server1", "server2", "server4"], "dst": "server3"}],
        "validate": {"lossless_isolation": {}},
    }  # fmt: skip
    loss = validate(lab, scenario)["lossless_isolation/loss storage"]
    assert loss.status is Status.PASS, loss.reason
    assert int(loss.figures["lossy_retransmitted"]) > 0, loss.reason
    assert float(loss.figures["lossy_goodput_gbps"]) > 0
    assert "a reliable transport resent" in loss.reason


def test_roce_rc_resends_what_a_link_failure_dropped(lab: Path) -> None:
    played = play(lab, link_down(sim={"roce_transport": "rc"}))
    flows = [f for f in played.flows if f["class"] == "roce"]
    assert all(f["transport"] == "rc" and f["completed"] for f in flows)
    hit = [f for f in flows if f["lost"]]
    assert hit and all(f["retransmitted"] > 0 and f["tail_lost"] == 0 for f in hit)
    iterations = played.extra["iterations"].values()
    assert iterations and all(t is not None for it in iterations for t in it["times_s"])
