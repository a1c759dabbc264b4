"""A rail-optimized fabric live (docs/rails.md): 4 servers x 4 NICs (16 endpoints, 8 rail
leaves, 2 spines) played by the main job, `twin run LAB` in a new process: deployed on netns,
the default scenario with its faults, destroyed, then its data plane on the simulator; one
verdict that passes, with the rail NIC's link-down not-observable (nothing to fail over to)
rather than a false red. About a minute on 2 cores.

Skipped, with the reason, without root or FRR.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import lab_name, leftovers, root_and_frr, twin_cli
from tests.sim.test_broken_labs import ROW
from tests.unit.test_rails import NICS, SERVERS, SMALL
from twin.intent import fabric as intent
from twin.lab import directory as labdir

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(root_and_frr() is not None, reason=str(root_and_frr())),
]


def test_a_rail_fabric_runs_live_and_passes(tmp_path: Path) -> None:
    name = lab_name("rail")
    out = tmp_path / "lab"
    labdir.generate(intent.parse({**SMALL, "name": name}, "f.yaml"), out, "f.yaml")
    try:
        done = twin_cli("run", str(out), timeout=600)
    finally:
        twin_cli("destroy", str(out))
        if leftovers(name):
            twin_cli("cleanup", name)
    rows = {(m[1], m[2]): m.groups() for line in done.stdout.splitlines() if (m := ROW.match(line))}
    failed = [r for r in rows.values() if r[2] == "fail"]
    assert done.returncode == 0, (failed, done.stderr[-2000:])
    leaves = SERVERS // 2 * NICS  # 2 servers per unit on 4-port leaves
    sessions = rows[("bgp_health", "sessions")]
    assert sessions[2] == "pass" and f"all {leaves * 2 * 2} sessions" in sessions[3]
    endpoints = SERVERS * NICS
    reach = rows[("reachability", "servers")]
    assert reach[2] == "pass" and f"all {endpoints * (endpoints - 1)} server pairs" in reach[3]
    nic = [r for (v, s), r in rows.items() if v == "failover" and ":nic" in s and "down" in s]
    assert nic and all(r[2] == "not-observable" and "nothing to fail over" in r[3] for r in nic)
    assert not leftovers(name)
