"""The live sample of `bench/bench_fabrics.py` that found a false red (root, FRR): a healthy
three-tier fabric whose leaves bundle two links per spine plays `uplink-failure` on netns with
no failing row. The twin takes a member's whole bundle down (one veth) and logs it so; the
routing model `fib_agreement` compares with used to fail the member alone and kept spine1
under superspine1 for leaf1's loopback. The twin is removed whatever happens."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import REPO, lab_name, root_and_frr, running_twin, twin_cli
from twin.intent import fabric as intent
from twin.lab import directory as labdir

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(root_and_frr() is not None, reason=str(root_and_frr())),
]

BUNDLED = {
    "spines": {"count": 3, "ports": 32, "speed": "400G"},
    "leaves": {"ports": 16, "speed": "400G", "peer_link_ports": 1},
    "superspines": {"count": 1, "ports": 256, "speed": "400G"},
    "servers": {
        "count": 13, "nics": 1, "dual_homed": False, "nic_speed": "400G", "name_prefix": "rs0",
    },
    "oversubscription": {"target": 1.5, "max": 4.0},
}  # fmt: skip
"""bench_fabrics' `-n 10 --max-servers 16 --seed 7`, fabric 2: 2 leaves, 2 uplinks per spine."""


def test_a_member_fault_on_a_bundled_fabric_has_no_false_red(tmp_path: Path) -> None:
    lab = tmp_path / "lab"
    data = {"name": lab_name("fsl"), **BUNDLED}
    labdir.generate(intent.parse(data, "bundled.yaml"), lab, "bundled.yaml")
    scenario = REPO / "examples" / "scenarios" / "uplink-failure.yaml"
    with running_twin(lab):
        argv = ["run", str(lab), str(scenario), "--backend", "netns", "--no-static", "--json"]
        done = twin_cli(*argv, timeout=600)
    assert done.returncode in (0, 1), done.stderr[-500:]
    results = json.loads(done.stdout)["results"]
    failing = [(r["validator"], r["scope"], r["reason"]) for r in results if r["status"] == "fail"]
    assert failing == []
    assert done.returncode == 0
    events = [json.loads(line) for line in (lab / "events.jsonl").read_text().splitlines()]
    downs = [e["link"] for e in events if e["event"] == "fault" and e["fault"] == "link-down"]
    assert downs == ["leaf1:PortChannel1"]
