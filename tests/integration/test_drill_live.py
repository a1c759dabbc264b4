"""A drill on a live twin (netns: namespaces and FRR, root): two cases played one after the
other on one twin, each fault given back within its case (the scenario has no recovery of
its own: half-way to the end of the traffic), so that `bgp_health` judges a whole fabric,
and the twin checked to be as it was before the next; the twin the drill deployed is gone
afterwards."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import lab_name, leftovers, root_and_frr, twin_cli, write_lab

SCENARIO = """\
name: live-drill
traffic:
  - {name: ring, at: 0, duration: 4, kind: all_reduce, servers: all, qps: 1, pps: 50}
validate:
  failover: {}
  bgp_health: {}
"""
FAULTS = """\
- {name: first uplink of leaf1, faults: [{fault: link-down, link: uplink of leaf1}]}
- {name: a link of server1, faults: [{fault: link-down, link: "server link of servers[0]"}]}
"""


def test_a_serial_drill_on_netns(tmp_path: Path) -> None:
    reason = root_and_frr()
    if reason:
        pytest.skip(reason)
    name = lab_name("drill")
    lab = write_lab(tmp_path / "lab", name)
    (tmp_path / "s.yaml").write_text(SCENARIO)
    (tmp_path / "f.yaml").write_text(FAULTS)
    out = tmp_path / "drill"
    try:
        done = twin_cli(
            "drill", str(lab), str(tmp_path / "s.yaml"), "--faults", str(tmp_path / "f.yaml"),
            "--backend", "netns", "--at", "1.5", "--out", str(out), timeout=900,
        )  # fmt: skip
        assert done.returncode in (0, 1), done.stderr
        data = json.loads((out / "drill.json").read_text())
        assert len(data["faults"]) == 2 and data["baseline"]["label"] == "no fault"
        for fault in data["faults"]:
            assert fault["loss_window_ms"] is not None, fault  # judged from its probe flows
            assert fault["error"] is None
            # given back half-way to the end of the traffic: BGP whole again when judged
            bgp = {r[2] for r in fault["results"] if r[0] == "bgp_health"}
            assert bgp == {"pass"}, fault["results"]
        assert "restored" in done.stderr
        assert not (lab / "state.json").exists()
    finally:
        twin_cli("destroy", str(lab))
        if leftovers(name):
            twin_cli("cleanup", name)
