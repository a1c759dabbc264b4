"""Every dynamic validator fails on a real twin when a real change breaks what it checks.

Each case changes a running (or about to be deployed) twin the way an operator could: a sysctl
in the leaves, a host file, a port MTU or VLAN member in a config_db.json, a fabric without
BFD, a killed daemon, a link down; then plays a short scenario (`twin.run.play`) and judges it
(`twin.verdict.report_run`, what `twin run` does). Where cheap, the same scenario on the
unchanged twin is the contrast that passes.

Twins (names `vr-<hex>`, destroyed by their fixtures pass or fail):
- `fabric`: examples/small.yaml with two MLAG pairs (2 spines, 4 leaves, 4 dual-homed servers),
  BFD on; shared by the cases whose change can be undone (each undoes it);
- a copy without BFD and with slow BGP timers, for the failover case only;
- `mini`: 1 spine, 2 leaves, 2 single-homed servers, so every probe between the servers takes
  one known path: one port's MTU or one VLAN member decides it.

Skipped, with the reason, without root or FRR.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from statistics import mean
from typing import Any

import pytest
import yaml

from labs import registry
from labs.backend import Fault
from tests.conftest import lab_name, root_and_frr, running_twin, wait_for, write_lab
from twin.intent import fabric as intent
from twin.lab import directory as labdir
from twin.lab.directory import Lab
from twin.pytest_plugin import Twin
from twin.scenario import model as scenarios
from twin.scenario import player as runs
from twin.verdict import verdict
from validators.registry import INVARIANTS
from validators.result import Result, Status

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(root_and_frr() is not None, reason=str(root_and_frr())),
]

LEAVES = ("leaf1", "leaf2", "leaf3", "leaf4")


@dataclass
class Played:
    """One scenario played on a twin and judged."""

    run_dir: Path
    code: int
    results: list[Result]

    def of(self, validator: str) -> dict[str, Result]:
        """The validator's results by scope."""
        return {r.scope: r for r in self.results if r.validator == validator}

    def flows(self) -> list[dict[str, Any]]:
        data: list[dict[str, Any]] = json.loads((self.run_dir / "flows.json").read_text())
        return data


def play(twin: Twin, tmp: Path, scenario: dict[str, Any]) -> Played:
    """Write the scenario, play it on the running twin, judge the run."""
    path = tmp / f"{scenario['name']}.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    lab = Lab.open(twin.path)  # a fresh view: host files may have just changed
    run_dir = runs.play(lab, scenarios.load(path, lab), registry.of(lab))
    code, results = verdict.report_run(run_dir)
    return Played(run_dir, code, results)


def settled(twin: Twin) -> None:
    """Wait until every session is Established and every leaf has full ECMP width."""

    def ready() -> bool:
        return twin.established() and twin.converged()

    wait_for(ready, f"{twin.name} converged", timeout=90)


def allreduce(
    name: str, *, order: str = "natural", qps: int = 2, pps: float = 50, duration: float = 3
) -> dict[str, Any]:
    return {
        "name": name,
        "at": 0,
        "duration": duration,
        "kind": "all_reduce",
        "servers": "all",
        "order": order,
        "qps": qps,
        "pps": pps,
    }


def edit_json(path: Path, change: Any) -> str:
    """Apply `change(data)` to a JSON file; returns the original text (to restore)."""
    original = path.read_text()
    data = json.loads(original)
    change(data)
    path.write_text(json.dumps(data, indent=2))
    return original


@pytest.fixture(scope="module")
def fabric(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Twin]:
    path = write_lab(tmp_path_factory.mktemp("fabric") / "fabric", lab_name("vr"))
    with running_twin(path) as twin:
        yield twin


# The ring's pairs in natural order: server1->server2 and server3->server4 stay inside a leaf
# pair; server2->server3 and server4->server1 cross the spines, each from one leaf (a sender
# uses one NIC per peer). 16 QPs per pair: L4 hashing spreads them, L3 hashing cannot.
ECMP = {
    "name": "ecmp-few-pairs",
    "settle": 0.5,
    "traffic": [allreduce("allreduce", qps=16, pps=40)],
    "validate": {
        "ecmp_spread": {"max_over_mean": 1.5},
        "dscp_preserved": {},
        "bgp_health": {},
        "reachability": {},
        "mtu": {},
        "failover": {},
    },
}


@pytest.fixture(scope="module")
def baseline(fabric: Twin, tmp_path_factory: pytest.TempPathFactory) -> Played:
    """The few-pairs All-Reduce on the unchanged twin (L4 hashing in the leaves)."""
    settled(fabric)
    return play(fabric, tmp_path_factory.mktemp("baseline"), ECMP)


def ratios(played: Played) -> dict[str, float]:
    """Uplink max/mean per leaf that ecmp_spread judged."""
    return {
        scope: float(r.figures["max_over_mean"])
        for scope, r in played.of("ecmp_spread").items()
        if scope in LEAVES
    }


def test_a_healthy_twin_passes_every_validator(baseline: Played) -> None:
    judged = [r for r in baseline.results if r.validator != "ecmp_spread"]
    assert {r.validator for r in judged} == {
        "dscp_preserved",
        "bgp_health",
        "reachability",
        "mtu",
        "failover",
        *INVARIANTS,
    }
    assert [(r.validator, r.scope, r.reason) for r in judged if r.status is Status.FAIL] == []
    # not observable, never failed: PFC (netns has no queues) and convergence (no fault)
    assert {(r.validator, r.scope) for r in judged if r.status is Status.NOT_OBSERVABLE} <= {
        ("pfc_behaviour", "lossless drops"),
        ("failover", "convergence"),
    }
    assert baseline.of("ecmp_spread")["fib"].status is Status.PASS
    assert ratios(baseline), "no leaf carried enough uplink traffic to judge"


def test_l3_only_hashing_in_the_leaves_fails_ecmp_spread(
    fabric: Twin, baseline: Played, tmp_path: Path
) -> None:
    def policy(value: int) -> None:
        for leaf in fabric.lab.nodes("leaf"):
            done = fabric.exec(leaf, "sysctl", "-w", f"net.ipv4.fib_multipath_hash_policy={value}")
            assert done.returncode == 0, done.stderr

    policy(0)
    try:
        l3 = play(fabric, tmp_path, ECMP)
    finally:
        policy(3)  # the twin's own: the 5-tuple
    judged = {s: r for s, r in l3.of("ecmp_spread").items() if s in LEAVES}
    assert judged, "no leaf carried enough uplink traffic to judge"
    assert {s: r.status for s, r in judged.items()} == {s: Status.FAIL for s in judged}
    assert all(r.findings[0].device == s for s, r in judged.items())
    # Each crossing pair pinned to one of two uplinks: max/mean close to 2.
    assert min(ratios(l3).values()) > 1.8
    assert mean(ratios(l3).values()) > mean(ratios(baseline).values())
    assert l3.code == 1


def test_a_host_marking_roce_with_dscp_24_fails_dscp_preserved(
    fabric: Twin, tmp_path: Path
) -> None:
    host = fabric.path / "configs" / "server2" / "host.json"

    def wrong(data: dict[str, Any]) -> None:
        data["rdma"]["dscp"] = 24
        data["rdma"]["traffic_class"] = 24 << 2

    original = edit_json(host, wrong)
    try:
        settled(fabric)
        played = play(
            fabric,
            tmp_path,
            {
                "name": "dscp",
                "settle": 0.5,
                "traffic": [allreduce("allreduce")],
                "validate": {"dscp_preserved": {}},
            },
        )
    finally:
        host.write_text(original)
    roce = played.of("dscp_preserved")["roce"]
    assert roce.status is Status.FAIL
    assert [(f.device, f.where) for f in roce.findings] == [("server2", "host.json")]
    assert "marks class roce with DSCP 24, policy says 26" in roce.reason
    # The wrong marking went on the wire: the receivers saw 24 from server2 only.
    seen = {(f["src"], d) for f in played.flows() for d in f["dscp_received"]}
    assert ("server2", "24") in seen
    assert {d for s, d in seen if s != "server2"} == {"26"}


SILENT_LOSS = {
    "name": "silent-loss",
    "settle": 1,
    "traffic": [allreduce("allreduce", order="interleaved", qps=8, pps=100, duration=6)],
    "faults": [
        # Drops every frame both ways but keeps carrier: only BFD or the hold time notices.
        {"at": 1, "fault": "loss", "link": "leaf1:spine1", "percent": 100},
        {"at": 4, "fault": "clear", "link": "leaf1:spine1"},
    ],
    "validate": {"failover": {"max_loss_ms": 2000}, "bgp_health": {}},
}
SCOPE = "fault1 loss leaf1:spine1"


def test_without_bfd_and_with_slow_timers_failover_exceeds_its_threshold(
    fabric: Twin, tmp_path: Path
) -> None:
    source = yaml.safe_load((Path(__file__).parents[2] / "examples" / "small.yaml").read_text())
    source.update(name=lab_name("vr"), bfd={"enabled": False}, bgp={"keepalive": 5, "holdtime": 15})
    source["leaves"]["count"] = 4
    (tmp_path / "slow.yaml").write_text(yaml.safe_dump(source))
    labdir.generate(intent.load(tmp_path / "slow.yaml"), tmp_path / "slow", "slow.yaml")
    with running_twin(tmp_path / "slow") as slow:
        settled(slow)
        without = play(slow, tmp_path, SILENT_LOSS)
    lost = without.of("failover")[SCOPE]
    assert lost.status is Status.FAIL, lost.reason
    assert float(lost.figures["loss_window_ms"]) > 2000
    # The probe flows pinned through the link lost packets (each named); whether the
    # collective's own flows had a packet in the window depends on the machine's pace.
    assert lost.findings and all("packets lost" in f.message for f in lost.findings)
    assert "> 2000 ms" in lost.reason
    # Silent indeed: with a 15 s hold time no session went down, nothing rerouted.
    assert {s: r.status for s, r in without.of("bgp_health").items()} == {
        "sessions": Status.PASS,
        "routes": Status.PASS,
        "flaps": Status.PASS,
    }

    # Contrast: the same failure with BFD (300 ms x 3) on the shared twin.
    settled(fabric)
    bfd = play(fabric, tmp_path, SILENT_LOSS)
    caught = bfd.of("failover")[SCOPE]
    assert float(caught.figures["loss_window_ms"]) < float(lost.figures["loss_window_ms"])
    assert caught.status is Status.PASS, caught.reason
    # BFD took the sessions down: explained by the loss on that link, so no flap.
    assert bfd.of("bgp_health")["flaps"].status is Status.PASS


def test_a_bgpd_killed_and_not_restarted_fails_bgp_health(fabric: Twin, tmp_path: Path) -> None:
    settled(fabric)
    try:
        played = play(
            fabric,
            tmp_path,
            {
                "name": "bgpd-kill",
                "settle": 1,
                "traffic": [allreduce("allreduce")],
                "faults": [{"at": 2.5, "fault": "daemon-kill", "node": "spine1", "daemon": "bgpd"}],
                "validate": {"bgp_health": {}},
            },
        )
    finally:
        restart = Fault("daemon-restart", node="spine1", daemon="bgpd")
        registry.of(fabric.lab).fault(fabric.lab, restart)
    health = played.of("bgp_health")
    sessions = health["sessions"]
    assert sessions.status is Status.FAIL
    down = {(f.device, f.message.split(" is ")[0]) for f in sessions.findings}
    # spine1 itself (its bgpd does not answer) and every leaf's session to it.
    assert {d for d, _ in down} == {"spine1", *LEAVES}
    assert all("spine1" in m for d, m in down if d != "spine1")
    assert any("bgpd is not running" in f.message for f in sessions.findings)
    assert health["routes"].status is Status.FAIL  # spine1's loopback is gone
    assert health["flaps"].status is Status.PASS  # the kill explains the downs
    assert played.code == 1
    settled(fabric)


# -- a one-spine lab: every probe takes one known path ----------------------------------------


def write_mini(out: Path, edit: Any) -> Path:
    """1 spine, 2 leaves, 2 single-homed servers; `edit(lab)` changes its configs."""
    source = out.parent / f"{out.name}.yaml"
    source.write_text(
        yaml.safe_dump(
            {
                "name": lab_name("vr"),
                "spines": {"count": 1, "ports": 8},
                "leaves": {"count": 2, "ports": 8, "uplinks_per_spine": 1},
                "servers": {"count": 2, "dual_homed": False, "nics": 1},
            }
        )
    )
    labdir.generate(intent.load(source), out, str(source))
    edit(Lab.open(out))
    return out


def port_to(lab: Lab, node: str, peer: str) -> str:
    """The SONiC port of `node` facing `peer`."""
    e = next(iter(lab.graph.get_edge_data(node, peer).values()))
    return str(e["a_port" if e["a"] == node else "b_port"])


def narrow(lab: Lab) -> None:
    """spine1's port facing leaf2 at MTU 1500 (the rest of the fabric is at 9100)."""
    db = lab.path / "configs" / "spine1" / "config_db.json"
    edit_json(db, lambda d: d["PORT"][port_to(lab, "spine1", "leaf2")].update(mtu="1500"))


def no_vlan_member(lab: Lab) -> None:
    """leaf2 without its server port in the server VLAN."""
    db = lab.path / "configs" / "leaf2" / "config_db.json"
    port = port_to(lab, "leaf2", "server2")

    def remove(data: dict[str, Any]) -> None:
        members = data["VLAN_MEMBER"]
        (key,) = [k for k in members if k.endswith(f"|{port}")]
        del members[key]

    edit_json(db, remove)


PROBE = {
    "name": "probe",
    "settle": 0.5,
    "traffic": [
        {
            "name": "backup",
            "at": 0,
            "duration": 2,
            "kind": "backup",
            "src": "server1",
            "dst": "server2",
            "pps": 50,
        },
    ],
    "validate": {"mtu": {}, "reachability": {}},
}


@pytest.fixture(scope="module")
def mini(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Twin]:
    path = write_mini(tmp_path_factory.mktemp("mini") / "mini", narrow)
    with running_twin(path) as twin:
        yield twin


def test_one_spine_port_at_mtu_1500_fails_mtu_naming_that_port(mini: Twin, tmp_path: Path) -> None:
    port = port_to(mini.lab, "spine1", "leaf2")
    linux = mini.lab.ifmap["spine1"][port]["netns"]
    link = json.loads(mini.exec("spine1", "ip", "-j", "link", "show", "dev", linux).stdout)
    assert link[0]["mtu"] == 1500  # the config change reached the twin
    played = play(mini, tmp_path, PROBE)
    mtu = played.of("mtu")["paths"]
    assert mtu.status is Status.FAIL
    assert ("spine1", port) in {(f.device, f.port) for f in mtu.findings}
    assert f"findings: spine1 {port} PORT: MTU 1500 drops 9000-byte packets" in mtu.reason
    # Small packets still pass: the same probes find every server reachable.
    assert played.of("reachability")["servers"].status is Status.PASS


def test_a_server_link_down_at_the_end_fails_reachability(mini: Twin, tmp_path: Path) -> None:
    scenario = {**PROBE, "name": "server-link-down", "validate": {"reachability": {}}}
    scenario["faults"] = [{"at": 2, "fault": "link-down", "link": "server2:nic0"}]
    try:
        played = play(mini, tmp_path, scenario)
    finally:
        registry.of(mini.lab).fault(mini.lab, Fault("link-up", link="server2:nic0"))
    result = played.of("reachability")["servers"]
    assert result.status is Status.FAIL
    assert sorted((f.device, f.message.split(" (")[0]) for f in result.findings) == [
        ("server1", "cannot reach server2"),
        ("server2", "cannot reach server1"),
    ]


def test_a_server_port_missing_from_its_vlan_fails_reachability(tmp_path: Path) -> None:
    path = write_mini(tmp_path / "novlan", no_vlan_member)
    with running_twin(path) as twin:
        played = play(twin, tmp_path, PROBE)
    result = played.of("reachability")["servers"]
    assert result.status is Status.FAIL
    assert sorted((f.device, f.message.split(" (")[0]) for f in result.findings) == [
        ("server1", "cannot reach server2"),
        ("server2", "cannot reach server1"),
    ]
    # With no pair reachable, the jumbo probes could not judge any path.
    assert played.of("mtu")["paths"].status is Status.NOT_OBSERVABLE
