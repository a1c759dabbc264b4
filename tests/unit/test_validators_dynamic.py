"""Each dynamic validator on small synthetic run directories: a pass and the ways it fails.

No root needed: the lab directory is generated (examples/small.yaml: 2 spines, two MLAG pairs
of leaves, 4 dual-homed servers) but never deployed, and every observation file is written
by `tests.synthetic.SyntheticRun`, in the format `twin.scenario.observations` documents and
`twin.scenario.player` writes (docs/observations.md).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any

import pytest
import yaml

from labs.failures import Failures, Network
from tests.conftest import SMALL
from tests.synthetic import (
    NETNS,
    SIX,
    T0,
    SyntheticRun,
    address,
    flow,
    full_fib,
    generate_lab,
    port,
    probe_all,
    probed,
    sessions,
)
from twin.configs.buffer_graph import BufferGraph, Cycle
from twin.configs.frr_timers import Detection, neighbours
from twin.design.graph import remote_subnets
from twin.lab import directory
from twin.lab.directory import Lab
from twin.model.fib import NextHop
from twin.scenario.observations import Observations
from twin.scenario.records import FaultRecord
from validators import registry
from validators.dynamic import bgp_health, crossing, failover
from validators.examples import edit_json, generate
from validators.result import Result, Status


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    return generate_lab(tmp_path_factory.mktemp("lab") / "lab", "vdyn")


def check(name: str, lab: Lab, obs: Observations, **given: Any) -> list[Result]:
    """Run one registered dynamic validator with thresholds `given`."""
    v = registry.get(name)
    assert v.kind == "dynamic"
    return registry.run_dynamic(lab, obs, [v], {name: given})


def by_scope(results: list[Result]) -> dict[str, Result]:
    return {r.scope: r for r in results}


@pytest.fixture
def run(lab: Lab) -> Iterator[SyntheticRun]:
    yield SyntheticRun(lab)


def test_every_dynamic_validator_is_registered_with_documented_thresholds() -> None:
    dynamic = {v.name: dict(v.defaults) for v in registry.available("dynamic")}
    assert {k: v for k, v in dynamic.items() if k in SIX} == {
        "bgp_health": {"max_flaps": 0},
        "dscp_preserved": {},
        "ecmp_spread": {
            "tolerance": 0.25,
            "max_over_mean": 1.5,
            "p_min": 0.001,
            "min_packets": 200,
            "min_flows_per_uplink": 4,
        },
        "failover": {
            "max_loss_ms": 0.0,
            "margin_ms": 500.0,
            "recovery_s": 5.0,
            "blackhole_s": 1.0,
        },
        "mtu": {},
        "reachability": {},
    }


# -- ecmp_spread ------------------------------------------------------------------------------


def crossing_flows(qps: int = 8) -> list[dict[str, Any]]:
    """Ring All-Reduce over the 4 servers, natural order: two pairs cross the spines."""
    ring = [
        ("server1", "server2"),
        ("server2", "server3"),
        ("server3", "server4"),
        ("server4", "server1"),
    ]
    return [flow(s, d, qp) for s, d in ring for qp in range(qps)]


def test_ecmp_spread_passes_an_even_split(lab: Lab, run: SyntheticRun) -> None:
    run.flows = crossing_flows(16)
    run.uplink_tx = {"leaf2": [2010, 1990], "leaf4": [1950, 2050]}
    results = by_scope(check("ecmp_spread", lab, run.write()))
    assert set(results) == {"fib", "leaf2", "leaf4"}  # leaves with no uplink traffic: not judged
    assert {r.status for r in results.values()} == {Status.PASS}
    assert results["leaf4"].figures["max_over_mean"] == 1.025
    assert results["leaf4"].figures["packets"] == 4000


def test_ecmp_spread_from_too_few_collective_flows_is_not_observable(
    lab: Lab, run: SyntheticRun
) -> None:
    """8 queue pairs per crossing pair: 4 flows per leaf over 2 uplinks (the README's fake
    example), where one flow moves max/mean by 0.5: not a verdict either way."""
    run.flows = crossing_flows(8)
    run.uplink_tx = {"leaf2": [3900, 100], "leaf4": [2000, 2000]}
    results = by_scope(check("ecmp_spread", lab, run.write()))
    assert results["leaf2"].status is Status.NOT_OBSERVABLE
    assert results["leaf2"].reason.startswith("4 collective flows over 2 uplinks: too few")
    # Decided from the flows, not the counters: the same with too few packets counted (a
    # backend's counter windows end by its clock), and so in every run.
    run.uplink_tx = {"leaf2": [10, 5], "leaf4": [2000, 2000]}
    quiet = by_scope(check("ecmp_spread", lab, run.write()))
    assert quiet["leaf2"].status is Status.NOT_OBSERVABLE
    assert quiet["leaf2"].reason == results["leaf2"].reason


def test_ecmp_spread_fails_uneven_uplink_counters_naming_the_leaf(
    lab: Lab, run: SyntheticRun
) -> None:
    run.flows = crossing_flows(16)
    run.uplink_tx = {"leaf2": [3900, 100], "leaf4": [2000, 2000]}
    results = by_scope(check("ecmp_spread", lab, run.write()))
    assert results["leaf4"].status is Status.PASS
    leaf2 = results["leaf2"]
    assert leaf2.status is Status.FAIL
    assert leaf2.figures["max_over_mean"] == 1.95
    assert leaf2.figures["Ethernet24"] == 3900 and leaf2.figures["Ethernet32"] == 100
    assert leaf2.findings[0].device == "leaf2"
    assert "max/mean 1.95 > 1.5" in leaf2.reason
    # A looser threshold lets the same counters pass the max/mean test.
    loose = by_scope(check("ecmp_spread", lab, run.write(), max_over_mean=2.0, p_min=0))
    assert loose["leaf2"].status is Status.PASS


def test_ecmp_spread_leaves_the_failover_probes_out_of_the_collectives(
    lab: Lab, run: SyntheticRun
) -> None:
    """Probe flows from server2 (behind leaf1 and leaf2), a thousand packets a second pinned
    through leaf2's first uplink for the whole run: leaf2's uneven uplinks are theirs, not the
    collective's; leaf4, which no probe went up through, is judged from the same run."""
    run.flows = crossing_flows(16)
    run.uplink_tx = {"leaf2": [3900, 100], "leaf4": [1950, 2050]}
    run.fault(1.0, "link-down", link="leaf2:spine1", ends=["leaf2:Ethernet24", "spine1:Ethernet8"])
    run.failover_probes = [probed(0, "leaf2:spine1", "leaf2:Ethernet24", (1.0, 10, 1.01))]
    results = by_scope(check("ecmp_spread", lab, run.write()))
    assert results["leaf2"].status is Status.NOT_OBSERVABLE
    assert results["leaf2"].reason == (
        "failover probe flows went up through it for the whole of the collectives"
    )
    assert results["leaf4"].status is Status.PASS


def test_ecmp_spread_chi_square_counts_flows_not_packets(lab: Lab, run: SyntheticRun) -> None:
    # 60/40 over 2 uplinks: with 16 crossing flows per leaf pair that is no evidence of
    # unevenness; with 1024 it is.
    run.uplink_tx = {"leaf2": [2400, 1600]}
    run.flows = crossing_flows(qps=16)
    few = by_scope(check("ecmp_spread", lab, run.write(), max_over_mean=2.0))["leaf2"]
    run.flows = crossing_flows(qps=1024)
    many = by_scope(check("ecmp_spread", lab, run.write(), max_over_mean=2.0))["leaf2"]
    assert few.status is Status.PASS
    assert many.status is Status.FAIL
    assert "chi-square" in many.reason
    assert float(many.figures["p_value"]) < float(few.figures["p_value"])


def test_ecmp_spread_fails_a_fib_narrower_than_the_spines(lab: Lab, run: SyntheticRun) -> None:
    remote = lab.graph.nodes["leaf3"]["subnet"]
    run.flows = crossing_flows()
    run.uplink_tx = {"leaf2": [2000, 2000]}
    run.fib_start = full_fib(lab, short=("leaf1", remote))
    fib = by_scope(check("ecmp_spread", lab, run.write()))["fib"]
    assert fib.status is Status.FAIL
    assert fib.findings[0].device == "leaf1"
    assert f"{remote} has 1 ECMP next hops, 2 spines" in fib.reason


def test_ecmp_spread_is_not_observable_without_collective_or_enough_packets(
    lab: Lab, run: SyntheticRun
) -> None:
    run.flows = crossing_flows(16)  # enough flows: 8 a leaf over 2 uplinks
    run.uplink_tx = {"leaf2": [100, 50]}  # below min_packets (200)
    quiet = by_scope(check("ecmp_spread", lab, run.write()))
    assert quiet["traffic"].status is Status.NOT_OBSERVABLE
    assert quiet["traffic"].reason == "no leaf sent 200 packets on its uplinks"
    assert "leaf2" in by_scope(check("ecmp_spread", lab, run.write(), min_packets=100))
    # Collectives that stay behind their leaves cross no uplink: it says so.
    run.flows = [flow("server1", "server2", qp) for qp in range(16)]
    local = by_scope(check("ecmp_spread", lab, run.write()))["traffic"]
    assert local.status is Status.NOT_OBSERVABLE
    assert local.reason.startswith("no collective flow goes from a leaf's servers to another")
    run.kind = "backup"
    run.uplink_tx = {"leaf2": [3000, 0]}
    backup = by_scope(check("ecmp_spread", lab, run.write()))
    assert backup["traffic"].status is Status.NOT_OBSERVABLE
    assert "no collective" in backup["traffic"].reason


# -- failover ---------------------------------------------------------------------------------


UPLINK = ["leaf1:Ethernet24", "spine1:Ethernet0"]


def test_failover_judges_a_fault_from_its_probe_flows(lab: Lab, run: SyntheticRun) -> None:
    run.fault(1.0, "link-down", link="leaf1:spine1", ends=UPLINK)
    run.failover_probes = [probed(0, "leaf1:spine1", "leaf1:Ethernet24", (1.0, 3000, 4.0))]
    # The collective flows, at 100 pps, lost 300 packets too: a secondary figure.
    run.flows = [flow("server1", "server3", 0, gaps=[(4.02, 300)]), flow("server2", "server4")]
    results = by_scope(check("failover", lab, run.write(), max_loss_ms=1000))
    fault = results["fault1 link-down leaf1:spine1"]
    assert fault.status is Status.FAIL
    assert fault.figures["loss_window_ms"] == 3000.0
    assert fault.figures["recovery_s"] == 3.0
    assert fault.figures["probe_flows"] == 2
    assert fault.figures["flows_loss_window_ms"] == 3000.0
    assert "loss window 3000 ms > 1000 ms" in fault.reason
    assert [(f.device, f.port, f.where) for f in fault.findings] == [
        ("server2->server3", "udp 20000", "crossed leaf1:Ethernet24"),
        ("server2->server3", "udp 20001", "crossed leaf1:Ethernet24"),
    ]
    assert results["convergence"].status is Status.PASS
    # The same run passes a threshold above its loss window, naming what the probes crossed.
    passed = by_scope(check("failover", lab, run.write(), max_loss_ms=3500))
    assert passed["fault1 link-down leaf1:spine1"].status is Status.PASS
    assert passed["fault1 link-down leaf1:spine1"].reason.startswith(
        "2 probe flows at 1000 pps crossed leaf1:Ethernet24 before the fault"
    )


def test_failover_limit_comes_from_the_intent_budget(lab: Lab, run: SyntheticRun) -> None:
    """A gray failure (loss, carrier up) is judged against the intent's `failover.gray_ms`:
    by default BFD's 3 x 300 ms plus a convergence margin (500 ms): a fabric working as
    designed passes; slower than that fails, naming the budget."""
    run.fault(1.0, "loss", link="leaf1:spine1", percent=100.0, ends=UPLINK)
    run.failover_probes = [probed(0, "leaf1:spine1", "leaf1:Ethernet24", (1.0, 1230, 2.23))]
    fault = by_scope(check("failover", lab, run.write()))["fault1 loss leaf1:spine1"]
    assert fault.status is Status.PASS, fault.reason
    assert fault.figures["limit_ms"] == 1400.0
    run.failover_probes = [probed(0, "leaf1:spine1", "leaf1:Ethernet24", (1.0, 1500, 2.5))]
    fault = by_scope(check("failover", lab, run.write()))["fault1 loss leaf1:spine1"]
    assert fault.status is Status.FAIL
    assert "1500 ms > 1400 ms (intent failover.gray_ms)" in fault.reason
    # A limit given in the scenario is used as it is.
    given = by_scope(check("failover", lab, run.write(), max_loss_ms=2000))
    assert given["fault1 loss leaf1:spine1"].status is Status.PASS


def test_detection_is_the_bgp_hold_time_without_bfd(lab: Lab, tmp_path: Path) -> None:
    copy = Lab.open(Path(shutil.copytree(lab.path, tmp_path / "lab")))
    conf = copy.path / "configs" / "leaf1" / "frr.conf"
    lines = conf.read_text().splitlines()
    conf.write_text("\n".join(x for x in lines if "bfd" not in x) + "\n")
    assert set(neighbours(copy.frr_conf("leaf1")).values()) == {Detection(9000.0, "BGP hold 9 s")}
    assert set(neighbours(copy.frr_conf("spine1")).values()) == {Detection(900.0, "BFD 3 x 300 ms")}


def test_failover_passes_a_short_gap(lab: Lab, run: SyntheticRun) -> None:
    run.fault(1.0, "link-down", link="leaf1:spine1", ends=UPLINK)
    run.fault(3.0, "link-up", link="leaf1:spine1")
    run.failover_probes = [probed(0, "leaf1:spine1", "spine1:Ethernet0", (1.0, 400, 1.45))]
    run.flows = [flow("server1", "server3", 0, gaps=[(1.45, 40)]), flow("server3", "server1")]
    results = check("failover", lab, run.write())
    assert [(r.scope, r.status) for r in results] == [
        ("fault1 link-down leaf1:spine1", Status.PASS),
        ("fault2 link-up leaf1:spine1", Status.NOT_OBSERVABLE),  # its probes were not followed
        ("convergence", Status.PASS),
    ]
    assert results[1].reason == "the netns backend did not follow the probe flows of fault1 back"
    assert results[0].figures == {
        "limit_ms": 1400.0,
        "flows_loss_window_ms": 400.0,
        "flows_hit": 1,
        "loss_window_ms": 400.0,
        "recovery_s": 0.45,
        "probe_pps": 1000.0,
        "probe_flows": 2,
        "never_recovered": 0,
        "crossed": "spine1:Ethernet0",
    }
    assert results[0].reason == (
        "2 probe flows at 1000 pps crossed spine1:Ethernet0 before the fault: worst loss "
        "window 400 ms (limit 1400 ms), flowing again after 0.45 s"
    )


def test_failover_judges_a_restore_from_the_flows_routed_back(lab: Lab, run: SyntheticRun) -> None:
    # The link-down's probe flows, traced after the link-up (3 s), were back on the link at
    # 4 s; they lost 300 ms at the cut and then what the restore cost.
    run.fault(1.0, "link-down", link="leaf1:spine1", ends=UPLINK)
    run.fault(3.0, "link-up", link="leaf1:spine1")
    run.fault(8.0, "link-down", link="leaf2:spine1")
    back = {"index": 1, "fault": "link-up", "back": T0 + 4.0, "flows_back": 2, "watched_s": 1.0}

    def judged(*gaps: tuple[float, int, float | None], **restore: Any) -> Result:
        record = probed(0, "leaf1:spine1", "leaf1:Ethernet24", (1.0, 300, 1.3), *gaps)
        run.failover_probes = [record | {"ends": T0 + 6.0, "restore": back | restore}]
        return by_scope(check("failover", lab, run.write()))["fault2 link-up leaf1:spine1"]

    clean = judged()
    assert clean.status is Status.PASS, clean.reason
    assert clean.reason == (
        "2 probe flows at 1000 pps, routed back through leaf1:spine1 1.00 s after the restore: "
        "worst loss window 0 ms (limit 500 ms)"
    )
    assert clean.figures["back_s"] == 1.0 and clean.figures["flows_back"] == 2
    # 840 ms lost when the traffic moved back: over the limit (the margin, 500 ms).
    lossy = judged((4.0, 840, 4.84))
    assert lossy.status is Status.FAIL
    assert lossy.reason == "loss window 840 ms > 500 ms"
    assert [f.where for f in lossy.findings] == ["crossed leaf1:Ethernet24"] * 2
    # Black-holed once back: lost everything until the probes ended.
    hole = judged((4.0, 2000, None))
    assert hole.status is Status.FAIL
    assert hole.reason.startswith(
        "never recovered: 2 of 2 probe flows"
    ) and "after the restore" in (hole.reason)
    # Loss of the next fault is not the restore's.
    assert judged((8.2, 900, 9.1)).status is Status.PASS
    # Not observable: flows never seen back, or not sent long enough after they were.
    gone = judged(back=None, flows_back=0, watched_s=5.0)
    assert gone.status is Status.NOT_OBSERVABLE
    assert (
        gone.reason
        == "no probe flow was routed back through leaf1:spine1 within 5.0 s of the restore"
    )
    late = judged(back=T0 + 5.5)
    assert late.status is Status.NOT_OBSERVABLE
    assert late.reason == "the probe flows ended less than 1 s after they were back"


def test_failover_fails_a_probe_flow_that_never_recovered(lab: Lab, run: SyntheticRun) -> None:
    # A silent failure (loss 100 %) at 1 s, cleared at 4 s: the probes, sent until the clear,
    # never got through again; the fabric did not route around it.
    run.fault(1.0, "loss", link="leaf1:spine1", percent=100, ends=UPLINK)
    run.fault(4.0, "clear", link="leaf1:spine1")
    run.failover_probes = [probed(0, "leaf1:spine1", "leaf1:Ethernet24", (1.0, 3000, None))]
    loss = by_scope(check("failover", lab, run.write(), max_loss_ms=5000))[
        "fault1 loss leaf1:spine1"
    ]
    assert loss.status is Status.FAIL
    assert loss.reason.startswith(
        "never recovered: 2 of 2 probe flows (server2->server3 udp 20000, ...) lost everything "
        "from 0.00 s after the fault until they ended (3.00 s later)"
    )
    assert loss.figures["never_recovered"] == 2
    assert all("never recovered" in f.message for f in loss.findings)
    # Nor did a flow whose loss ended only once the clear had begun.
    run.failover_probes = [probed(0, "leaf1:spine1", "leaf1:Ethernet24", (1.0, 3000, 10.1))]
    cleared = by_scope(check("failover", lab, run.write(), max_loss_ms=5000))
    assert cleared["fault1 loss leaf1:spine1"].reason.startswith("never recovered: 2 of 2")
    # The last few packets of a probe still on their way when it ended are not a black hole.
    run.failover_probes = [probed(0, "leaf1:spine1", "leaf1:Ethernet24", (3.999, 1, None))]
    tail = by_scope(check("failover", lab, run.write()))["fault1 loss leaf1:spine1"]
    assert tail.status is Status.PASS, tail.reason


def test_failover_ignores_gaps_over_before_the_fault(lab: Lab, run: SyntheticRun) -> None:
    run.fault(3.0, "link-down", link="leaf1:spine1", ends=UPLINK)
    run.failover_probes = [probed(0, "leaf1:spine1", "leaf1:Ethernet24", (2.6, 100, 2.7))]
    run.flows = [flow("server1", "server3", 0, gaps=[(1.5, 100)])]  # 0.5 s to 1.5 s
    fault = by_scope(check("failover", lab, run.write()))["fault1 link-down leaf1:spine1"]
    assert fault.status is Status.PASS
    assert fault.figures["loss_window_ms"] == 0.0
    assert fault.figures["flows_hit"] == 0


def test_failover_fails_a_slow_recovery(lab: Lab, run: SyntheticRun) -> None:
    run.duration = 12.0
    run.fault(1.0, "daemon-kill", node="spine1", daemon="bgpd")
    run.failover_probes = [
        probed(0, "spine1", "spine1:Ethernet16", (1.1, 100, 1.2), (7.9, 100, 8.0))
    ]
    fault = by_scope(check("failover", lab, run.write()))["fault1 daemon-kill spine1"]
    assert fault.status is Status.FAIL
    assert fault.figures["loss_window_ms"] == 100.0
    assert "recovery 7.00 s > 5.0 s" in fault.reason


def test_failover_counts_a_flap_from_its_first_down(lab: Lab, run: SyntheticRun) -> None:
    # link-flap is logged once done: 3 cycles of 1 s down, 1 s up from 1 s to 7 s.
    run.duration = 9.0
    run.fault(7.0, "link-flap-done", link="leaf1:spine1", period=1.0, count=3, ends=UPLINK)
    run.failover_probes = [probed(0, "leaf1:spine1", "leaf1:Ethernet24", (1.0, 1100, 2.1))]
    fault = by_scope(check("failover", lab, run.write(), max_loss_ms=1000))[
        "fault1 link-flap-done leaf1:spine1"
    ]
    assert fault.figures["loss_window_ms"] == 1100.0
    assert fault.status is Status.FAIL


def test_failover_is_not_observable_without_probe_flows_through_the_element(
    lab: Lab, run: SyntheticRun
) -> None:
    run.fault(1.0, "link-down", link="leaf1:leaf2")
    run.fault(2.0, "link-down", link="leaf1:spine1", ends=UPLINK)
    run.fault(3.0, "link-down", link="leaf2:spine1")
    run.flows = [flow("server1", "server3", 0, gaps=[(1.5, 10)])]
    nothing = probed(0, "leaf1:leaf2", "")
    nothing |= {"flows": [], "why": "no flow of 12 server pairs crosses leaf1:leaf2"}
    late = probed(1, "leaf1:spine1", "leaf1:Ethernet24", started=2.5)
    run.fault(4.0, "link-down", link="leaf3:spine1")
    short = probed(3, "leaf3:spine1", "leaf3:Ethernet24", started=3.5) | {"ends": T0 + 4.05}
    run.failover_probes = [nothing, late, short]
    results = by_scope(check("failover", lab, run.write()))
    assert {s: (r.status, r.reason) for s, r in results.items() if s != "convergence"} == {
        "fault1 link-down leaf1:leaf2": (
            Status.NOT_OBSERVABLE,
            "not exercised: no flow of allreduce was routed through leaf1:leaf2; "
            "no flow of 12 server pairs crosses leaf1:leaf2",
        ),
        "fault2 link-down leaf1:spine1": (
            Status.NOT_OBSERVABLE,
            "the probe flows started only after the fault",
        ),
        "fault3 link-down leaf2:spine1": (Status.NOT_OBSERVABLE, "the run has no failover probes"),
        "fault4 link-down leaf3:spine1": (
            Status.NOT_OBSERVABLE,
            "the probe flows had stopped before the fault was done (a slow fault verb)",
        ),
    }
    # What the collective flows saw is kept, as a secondary figure.
    assert results["fault1 link-down leaf1:leaf2"].figures["flows_loss_window_ms"] == 100.0
    # A backend that cannot pin probes says so.
    run.capabilities = sorted(NETNS - {"failover-probes"})
    run.failover_probes = None
    fault = by_scope(check("failover", lab, run.write()))["fault1 link-down leaf1:leaf2"]
    assert fault.status is Status.NOT_OBSERVABLE
    assert fault.reason.endswith(
        "; the netns backend cannot pin probe flows through a fault: run on fake (--backend fake)"
    )


def test_a_fault_no_traffic_crossed_is_not_a_pass(lab: Lab, run: SyntheticRun) -> None:
    """The simulator's All-Reduce done before the scenario's faults fire: nothing was there to
    fail over or to converge, so nothing passes; the run says which faults it did not exercise.
    A fault the traffic crossed is judged (the convergence pass names it)."""
    run.capabilities = sorted(NETNS - {"failover-probes"})
    run.fault(7.0, "link-down", link="leaf1:spine1", ends=UPLINK)  # the phase ran 0-5 s
    run.fault(8.0, "link-up", link="leaf1:spine1", ends=UPLINK)
    run.flows = [flow("server1", "server3"), flow("server3", "server1")]
    results = by_scope(check("failover", lab, run.write()))
    assert {s: r.status for s, r in results.items()} == dict.fromkeys(
        ["fault1 link-down leaf1:spine1", "fault2 link-up leaf1:spine1", "convergence"],
        Status.NOT_OBSERVABLE,
    )
    assert results["fault1 link-down leaf1:spine1"].reason.startswith(
        "not exercised: no traffic was running when it fired at 7 s (allreduce 0 ms-5 s)"
    )
    assert results["convergence"].reason == (
        "no traffic crossed a fault that takes something away: fault1: no traffic was running "
        "when it fired at 7 s (allreduce 0 ms-5 s)"
    )
    # Within the phase, over the failed uplink: judged.
    run.faults = []
    run.fault(2.0, "link-down", link="leaf1:spine1", ends=UPLINK)
    convergence = by_scope(check("failover", lab, run.write()))["convergence"]
    assert convergence.status is Status.PASS
    assert convergence.reason == "2 flows crossed fault1: none black-holed after convergence"
    # Within the phase, but on a link no flow is routed over (the MLAG peer-link).
    run.faults = []
    run.fault(2.0, "link-down", link="leaf1:leaf2")
    convergence = by_scope(check("failover", lab, run.write()))["convergence"]
    assert convergence.status is Status.NOT_OBSERVABLE
    assert "fault1: no flow of allreduce was routed through leaf1:leaf2" in convergence.reason
    # No fault at all: nothing to converge from.
    run.faults = []
    convergence = by_scope(check("failover", lab, run.write()))["convergence"]
    assert convergence.status is Status.NOT_OBSERVABLE
    assert convergence.reason == "no fault took anything away: nothing to converge from"


def test_a_fault_is_crossed_once_per_run(
    lab: Lab, run: SyntheticRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`failover` asks which flows crossed a fault for its verdict and for the convergence:
    the walk is made once per fault and run (the same answer), another fault has its own."""
    monkeypatch.setattr(directory, "RACY_NS", 0)  # the lab's files kept though just written
    run.capabilities = sorted(NETNS - {"failover-probes"})
    run.fault(2.0, "link-down", link="leaf1:spine1", ends=UPLINK)
    run.fault(2.5, "link-down", link="leaf1:leaf2")
    run.flows = [flow("server1", "server3"), flow("server3", "server1")]
    obs = run.write()
    first, second = obs.run["faults"]
    seen = crossing.crossed(lab, obs, first, failover.fault_began(first))
    assert crossing.crossed(lab, obs, first, failover.fault_began(first)) is seen
    assert len(seen.flows) == 2
    other = crossing.crossed(lab, obs, second, failover.fault_began(second))
    assert other is not seen and other.flows == []
    again = Observations.open(obs.path)  # another run's reading: walked again, the same
    assert crossing.crossed(lab, again, first, failover.fault_began(first)) == seen


def test_failover_fails_black_holed_flows(lab: Lab, run: SyntheticRun) -> None:
    run.flows = [
        flow("server1", "server3", 0, received=0),
        flow("server2", "server4", 0, tail_lost=150),  # the last 1.5 s at 100 pps never came
        flow("server3", "server1", 0, tail_lost=50),
    ]
    convergence = by_scope(check("failover", lab, run.write()))["convergence"]
    assert convergence.status is Status.FAIL
    assert [(f.device, f.message) for f in convergence.findings] == [
        ("server1->server3", "nothing arrived"),
        ("server2->server4", "150 final packets never arrived"),
    ]


def test_failover_is_not_observable_without_traffic(lab: Lab, run: SyntheticRun) -> None:
    results = check("failover", lab, run.write())
    assert [r.status for r in results] == [Status.NOT_OBSERVABLE]


def test_failover_windows_attribute_each_gap_to_the_fault_in_force(
    lab: Lab, run: SyntheticRun
) -> None:
    run.duration = 10.0
    run.fault(1.0, "link-down", link="leaf1:spine1")
    run.fault(3.0, "link-up", link="leaf1:spine1")
    run.fault(5.0, "link-down", link="leaf2:spine2")
    run.flows = [flow("server1", "server3", 0, sent=1000, gaps=[(1.5, 50), (5.9, 90)])]
    windows = [(f["link"], ms) for f, ms, _, _ in failover.windows(run.write())]
    assert windows == [("leaf1:spine1", 500.0), ("leaf2:spine2", 900.0)]


# -- bgp_health -------------------------------------------------------------------------------


def test_bgp_health_passes_established_sessions_and_full_routes(
    lab: Lab, run: SyntheticRun
) -> None:
    results = by_scope(check("bgp_health", lab, run.write()))
    assert {s: r.status for s, r in results.items()} == {
        "sessions": Status.PASS,
        "routes": Status.PASS,
        "flaps": Status.PASS,
    }
    assert results["sessions"].figures == {"sessions": 16, "not_established": 0}


def test_bgp_health_fails_a_session_down_at_the_end(lab: Lab, run: SyntheticRun) -> None:
    run.bgp_end = sessions(lab, down=("leaf3", "spine2"))
    result = by_scope(check("bgp_health", lab, run.write()))["sessions"]
    assert result.status is Status.FAIL
    assert result.figures["not_established"] == 1
    finding = result.findings[0]
    assert (finding.device, finding.port) == ("leaf3", address(lab, "spine2", "leaf3"))
    assert "session to spine2 is Active" in finding.message


def test_bgp_health_fails_a_missing_route(lab: Lab, run: SyntheticRun) -> None:
    fib = full_fib(lab)
    remote = lab.graph.nodes["leaf1"]["subnet"]
    del fib["leaf4"][IPv4Network(remote)]
    run.fib_end = fib
    result = by_scope(check("bgp_health", lab, run.write()))["routes"]
    assert result.status is Status.FAIL
    assert [(f.device, f.message) for f in result.findings] == [("leaf4", f"no route to {remote}")]


def test_bgp_health_fails_a_twin_that_had_not_converged_at_the_start(
    lab: Lab, run: SyntheticRun
) -> None:
    fib = full_fib(lab)
    remote = IPv4Network(lab.graph.nodes["leaf3"]["subnet"])
    fib["leaf1"][remote] = fib["leaf1"][remote][:1]  # maximum-paths 1
    del fib["leaf2"][remote]  # a route-map that drops the prefix
    run.fib_start = fib
    result = by_scope(check("bgp_health", lab, run.write()))["routes"]
    assert result.status is Status.FAIL
    assert [(f.device, f.message) for f in result.findings] == [
        ("leaf1", f"{remote} has 1/2 paths at the start"),
        ("leaf2", f"{remote} has 0/2 paths at the start"),
    ]


SHAPES: dict[str, dict[str, Any]] = {
    "3-tier": {"superspines": {"count": 2}, "spines": {"count": 2, "ports": 4}},
    "single-homed": {
        "servers": {"count": 4, "nics": 1, "dual_homed": False},
        "leaves": {"count": 4, "ports": 8, "uplinks_per_spine": 1},
    },
    "other prefix": {"servers": {"count": 4, "name_prefix": "gpu"}},
}
"""examples/small.yaml changed into fabrics of other shapes."""


@pytest.mark.parametrize("shape", SHAPES)
def test_bgp_health_holds_the_start_to_the_routing_models_width_on_other_shapes(
    tmp_path: Path, shape: str
) -> None:
    """What a deploy waits for is what the routing model converges to on every shape: a
    healthy start passes, and one leaf narrowed to one path fails naming it."""
    small = yaml.safe_load(SMALL.read_text())
    other = generate(tmp_path / "lab", {**small, "name": "shape"}, **SHAPES[shape])
    run = SyntheticRun(other)
    run.fib_start = Network(other, Failures()).fib
    healthy = by_scope(check("bgp_health", other, run.write(tmp_path / "ok")))["routes"]
    assert healthy.status is Status.PASS, healthy.reason
    leaf = other.nodes("leaf")[-1]
    prefix = IPv4Network(remote_subnets(other.graph, leaf)[0])
    assert len(run.fib_start[leaf][prefix]) > 1
    run.fib_start[leaf][prefix] = run.fib_start[leaf][prefix][:1]
    routes = by_scope(check("bgp_health", other, run.write(tmp_path / "short")))["routes"]
    assert [(f.device, f.message[: len(str(prefix))]) for f in routes.findings] == [
        (leaf, str(prefix))
    ]


def test_bgp_health_calls_an_unexplained_down_a_flap(lab: Lab, run: SyntheticRun) -> None:
    run.bgp_down(2.0, "leaf2", "spine1", "Peer closed the session")
    flaps = by_scope(check("bgp_health", lab, run.write()))["flaps"]
    assert flaps.status is Status.FAIL
    assert flaps.figures["unexplained_downs"] == 1
    assert flaps.findings[0].device == "leaf2"
    assert "no fault to explain it" in flaps.reason
    allowed = by_scope(check("bgp_health", lab, run.write(), max_flaps=1))["flaps"]
    assert allowed.status is Status.PASS


def test_bgp_health_explains_downs_on_both_ends_of_a_faulted_link(
    lab: Lab, run: SyntheticRun
) -> None:
    # A silent loss on leaf1:spine1: BFD takes the session down on both switches; the loss
    # record names only the link, not its ends.
    run.fault(1.0, "loss", link="leaf1:spine1", percent=100)
    run.bgp_down(1.9, "leaf1", "spine1", "BFD down received")
    run.bgp_down(1.9, "spine1", "leaf1", "BFD down received")
    assert by_scope(check("bgp_health", lab, run.write()))["flaps"].status is Status.PASS


def test_bgp_health_explains_a_down_while_a_slow_fault_verb_was_running(
    lab: Lab, run: SyntheticRun
) -> None:
    # The run fired the link-down at 1 s; its verb, slow on a loaded machine, took the link
    # down only at 6.5 s and logged the fault at 9 s: the session went down in between.
    run.fault(9.0, "link-down", link="leaf1:spine1", ends=UPLINK)
    run.faults[-1]["began"] = T0 + 1.0
    run.bgp_down(6.5, "leaf1", "spine1", "Interface down")
    assert by_scope(check("bgp_health", lab, run.write()))["flaps"].status is Status.PASS


def test_bgp_health_explains_the_neighbours_downs_after_a_daemon_kill(
    lab: Lab, run: SyntheticRun
) -> None:
    # spine1's bgpd is killed: the leaves log the session down (the dead daemon logs nothing).
    run.fault(2.0, "daemon-kill", node="spine1", daemon="bgpd")
    for leaf in lab.nodes("leaf"):
        run.bgp_down(1.99, leaf, "spine1", "Peer closed the session")
    assert by_scope(check("bgp_health", lab, run.write()))["flaps"].status is Status.PASS


def test_bgp_health_does_not_explain_a_down_long_after_the_fault(
    lab: Lab, run: SyntheticRun
) -> None:
    window = lab.fabric.bgp.holdtime + 2.0
    run.duration = window + 10
    run.fault(1.0, "link-down", link="leaf1:spine1", ends=["leaf1:Ethernet24", "spine1:Ethernet0"])
    run.bgp_down(1.5, "leaf1", "spine1")
    run.bgp_down(1.0 + window + 1, "leaf1", "spine1")
    run.bgp_down(1.5, "leaf3", "spine2")  # a session the fault did not touch
    flaps = by_scope(check("bgp_health", lab, run.write()))["flaps"]
    assert flaps.figures["unexplained_downs"] == 2
    assert sorted(f.device for f in flaps.findings) == ["leaf1", "leaf3"]


def test_bgp_health_link_faults_touch_both_ends_however_the_link_is_named(lab: Lab) -> None:
    fired: FaultRecord = {"index": 0, "began": 1.0, "t": 1.0, "event": "fault", "fault": "loss"}
    for link in ("leaf1:spine1", f"leaf1:{port(lab, 'leaf1', 'spine1')}"):
        assert bgp_health._touched(lab, {**fired, "link": link}) == {"leaf1", "spine1"}
    down: FaultRecord = {**fired, "fault": "node-down", "node": "spine2"}
    assert bgp_health._touched(lab, down) == {"spine2"}


# -- reachability -----------------------------------------------------------------------------


def test_reachability_passes_every_pair(lab: Lab, run: SyntheticRun) -> None:
    run.probes = probe_all(lab)
    result = check("reachability", lab, run.write())[0]
    assert result.status is Status.PASS
    assert result.figures == {"pairs": 12, "unreachable": 0}


def test_reachability_fails_an_unanswered_pair_and_a_pair_never_probed(
    lab: Lab, run: SyntheticRun
) -> None:
    probes = probe_all(lab, **{"server2>server4": {"reachable": False}})
    run.probes = [p for p in probes if (p["src"], p["dst"]) != ("server3", "server1")]
    result = check("reachability", lab, run.write())[0]
    assert result.status is Status.FAIL
    assert [(f.device, f.message.split(" (")[0]) for f in result.findings] == [
        ("server2", "cannot reach server4"),
        ("server3", "server1 was never probed"),
    ]


def test_reachability_is_not_observable_on_a_backend_without_probes(
    lab: Lab, run: SyntheticRun
) -> None:
    run.capabilities = sorted(NETNS - {"probes"})
    result = check("reachability", lab, run.write())[0]
    assert result.status is Status.NOT_OBSERVABLE
    assert (
        result.reason == "the netns backend does not observe probes: run on netns (--backend netns)"
    )


def test_every_dynamic_validator_needs_what_it_reads(lab: Lab, run: SyntheticRun) -> None:
    run.capabilities = []
    for v in registry.available("dynamic"):
        results = check(v.name, lab, run.write())
        assert [r.status for r in results] == [Status.NOT_OBSERVABLE], v.name
        assert all(need in results[0].reason for need in v.needs), v.name
        assert v.needs, v.name


# -- mtu --------------------------------------------------------------------------------------


@pytest.fixture
def narrow_lab(lab: Lab, tmp_path: Path) -> Lab:
    """A copy of the lab whose spine1 port facing leaf3 has MTU 1500 in its config_db."""
    copy = tmp_path / "narrow"
    shutil.copytree(lab.path, copy, ignore=shutil.ignore_patterns("runs"))
    narrow = port(lab, "spine1", "leaf3")
    db_path = copy / "configs" / "spine1" / "config_db.json"
    db = json.loads(db_path.read_text())
    db["PORT"][narrow]["mtu"] = "1500"
    db_path.write_text(json.dumps(db))
    return Lab.open(copy)


def test_mtu_passes_when_jumbo_probes_cross(lab: Lab, run: SyntheticRun) -> None:
    run.probes = probe_all(lab)
    result = check("mtu", lab, run.write())[0]
    assert result.status is Status.PASS
    assert result.figures == {"packet_bytes": 9000, "paths": 12, "reachable": 12, "blocked": 0}


def test_mtu_names_the_switch_and_port_that_answered_frag_needed(narrow_lab: Lab) -> None:
    run = SyntheticRun(narrow_lab)
    spine_ip = address(narrow_lab, "spine1", "leaf1")  # ICMP comes from the ingress side
    frag = {"jumbo_ok": False, "frag_from": spine_ip, "mtu": 1500}
    run.probes = probe_all(narrow_lab, **{"server1>server3": frag, "server2>server3": frag})
    result = check("mtu", narrow_lab, run.write())[0]
    assert result.status is Status.FAIL
    assert result.figures["blocked"] == 2
    narrow = port(narrow_lab, "spine1", "leaf3")
    finding = result.findings[0]
    assert (finding.device, finding.port, finding.where) == ("spine1", narrow, "PORT")
    assert "MTU 1500 drops 9000-byte packets on 2 paths" in finding.message
    assert result.reason.startswith(f"1 finding: spine1 {narrow} PORT: MTU 1500")


def test_mtu_names_a_sender_whose_nic_is_too_small_and_silent_drops(
    lab: Lab, run: SyntheticRun
) -> None:
    run.probes = probe_all(
        lab,
        **{
            "server4>server1": {"jumbo_ok": False, "frag_from": "local", "mtu": 1500},
            "server3>server1": {"jumbo_ok": False},  # no ICMP answer at all
        },
    )
    result = check("mtu", lab, run.write())[0]
    assert result.status is Status.FAIL
    assert [(f.device, f.port, f.where) for f in result.findings] == [
        ("server4", "NIC", "host.json"),
        ("server3", "", "path"),
    ]
    assert "no ICMP answer" in result.findings[1].message


def test_mtu_does_not_judge_unreachable_pairs(lab: Lab, run: SyntheticRun) -> None:
    down = {"reachable": False, "jumbo_ok": False}
    run.probes = probe_all(lab, **{"server1>server2": down})
    result = check("mtu", lab, run.write())[0]
    assert result.status is Status.PASS
    assert "11 reachable paths (1 unreachable, not judged)" in result.reason
    run.probes = [{**p, **down} for p in probe_all(lab)]
    assert check("mtu", lab, run.write())[0].status is Status.NOT_OBSERVABLE
    run.capabilities = ["fib"]
    assert (
        check("mtu", lab, run.write())[0].reason
        == "the netns backend does not observe probes: run on netns (--backend netns)"
    )


# -- dscp_preserved ---------------------------------------------------------------------------


def test_dscp_preserved_passes_each_class_with_its_policy_dscp(lab: Lab, run: SyntheticRun) -> None:
    run.flows = [
        flow("server1", "server3"),
        flow("server1", "server4", cls="storage", dscp_sent=10),
    ]
    results = by_scope(check("dscp_preserved", lab, run.write()))
    assert {s: r.status for s, r in results.items()} == {
        "roce": Status.PASS,
        "storage": Status.PASS,
    }
    assert results["storage"].figures["policy_dscp"] == 10


def test_dscp_preserved_fails_a_flow_received_with_another_dscp(
    lab: Lab, run: SyntheticRun
) -> None:
    run.flows = [
        flow("server1", "server3", 0),
        flow("server2", "server4", 0, dscp_received={26: 100, 0: 400}),
    ]
    result = by_scope(check("dscp_preserved", lab, run.write()))["roce"]
    assert result.status is Status.FAIL
    assert [(f.device, f.where, f.message) for f in result.findings] == [
        ("server2->server4", "path", "sent DSCP 26, received [0, 26]")
    ]


def test_dscp_preserved_judges_two_classes_on_one_pair_per_class(
    lab: Lab, run: SyntheticRun
) -> None:
    """All-Reduce and a backup between server1 and server3 on queue pair 0: the receiver
    counts both under one flow id, so each record shows both DSCPs (small's default
    scenario once failed this: "sent DSCP 26, received [10, 26]")."""
    both = {26: 500, 10: 500}
    run.flows = [
        flow("server1", "server3", dscp_received=both),
        flow("server1", "server3", cls="storage", dscp_sent=10, dscp_received=both),
    ]
    results = by_scope(check("dscp_preserved", lab, run.write()))
    assert {s: (r.status, r.reason) for s, r in results.items()} == {
        "roce": (Status.PASS, "500 packets of class roce arrived with DSCP 26"),
        "storage": (Status.PASS, "500 packets of class storage arrived with DSCP 10"),
    }


def test_dscp_preserved_lists_a_rewrite_once(lab: Lab, run: SyntheticRun) -> None:
    rewritten = {26: 500, 10: 200, 0: 300}
    run.flows = [
        flow("server1", "server3", dscp_received=rewritten),
        flow("server1", "server3", cls="storage", dscp_sent=10, dscp_received=rewritten),
        flow("server2", "server4", 1, dscp_received={0: 500}),
        flow("server2", "server4", 2, dscp_received={0: 500}),
    ]
    result = by_scope(check("dscp_preserved", lab, run.write()))["roce"]
    assert [str(f) for f in result.findings] == [
        "server1->server3 path: sent DSCP 10 and 26, received [0, 10, 26]",
        "server2->server4 path: sent DSCP 26, received [0]",
    ]


def test_dscp_preserved_fails_a_server_marking_another_dscp(lab: Lab, run: SyntheticRun) -> None:
    run.flows = [
        flow("server1", "server3", 0),
        flow("server2", "server4", 0, dscp_sent=24),
        flow("server2", "server4", 1, dscp_sent=24),
    ]
    result = by_scope(check("dscp_preserved", lab, run.write()))["roce"]
    assert result.status is Status.FAIL
    # One finding for the host (not one per flow); the path kept what it was given.
    assert [(f.device, f.where) for f in result.findings] == [("server2", "host.json")]
    assert "marks class roce with DSCP 24, policy says 26" in result.reason


def test_dscp_preserved_is_not_observable_without_traffic(lab: Lab, run: SyntheticRun) -> None:
    assert [r.status for r in check("dscp_preserved", lab, run.write())] == [Status.NOT_OBSERVABLE]
    # A class none of whose packets arrived has no marking to judge: not a pass.
    storage = flow("server1", "server4", cls="storage", dscp_sent=10, received=0)
    run.flows = [flow("server1", "server3"), storage]
    results = by_scope(check("dscp_preserved", lab, run.write()))
    assert results["roce"].status is Status.PASS
    assert results["storage"].status is Status.NOT_OBSERVABLE
    assert results["storage"].reason == "no packet of class storage arrived: no marking to judge"


def test_deadlock_observed_passes_the_fibs_bgp_installs(lab: Lab, run: SyntheticRun) -> None:
    results = check("deadlock_observed", lab, run.write())
    assert [r.status for r in results] == [Status.PASS]
    assert results[0].figures["snapshots"] == 2


def test_deadlock_observed_finds_a_loop_the_live_fib_held(lab: Lab, run: SyntheticRun) -> None:
    """leaf3 -> spine1 -> leaf4 -> spine2 -> leaf3 for pair 1's subnet: a cyclic dependency."""
    subnet = lab.graph.nodes["leaf1"]["subnet"]
    loop = [("leaf3", "spine1"), ("spine1", "leaf4"), ("leaf4", "spine2"), ("spine2", "leaf3")]
    fib = full_fib(lab)
    for node, nxt in loop:
        fib[node][IPv4Network(subnet)] = (NextHop(nxt, port(lab, node, nxt)),)
    run.fib_end = fib
    results = check("deadlock_observed", lab, run.write())
    assert [r.status for r in results] == [Status.FAIL]
    assert "FIB end" in {f.where for f in results[0].findings}


def test_deadlock_observed_searches_a_later_fib_only_where_it_may_close_a_cycle(
    lab: Lab, run: SyntheticRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A last FIB that only drops a spine from leaf3's route to pair 1's subnet sends
    nothing anywhere new: its graph is not searched for cycles (the first one's has none);
    the loop above is searched, and found."""
    searched: list[int] = []
    cycles = BufferGraph.cycles

    def spy(self: BufferGraph, limit: int = 10) -> list[Cycle]:
        searched.append(len(self.vertices))
        return cycles(self, limit)

    monkeypatch.setattr(BufferGraph, "cycles", spy)
    subnet = IPv4Network(lab.graph.nodes["leaf1"]["subnet"])
    fib = full_fib(lab)
    fib["leaf3"][subnet] = fib["leaf3"][subnet][:1]
    run.fib_end = fib
    assert [r.status for r in check("deadlock_observed", lab, run.write())] == [Status.PASS]
    assert len(searched) == 1
    for node, nxt in [("leaf3", "spine1"), ("spine1", "leaf4"), ("leaf4", "spine2")]:
        fib[node][subnet] = (NextHop(nxt, port(lab, node, nxt)),)
    fib["spine2"][subnet] = (NextHop("leaf3", port(lab, "spine2", "leaf3")),)
    searched.clear()
    assert [r.status for r in check("deadlock_observed", lab, run.write())] == [Status.FAIL]
    assert len(searched) == 2


# -- lossless_isolation ------------------------------------------------------------------------


def backup(src: str = "server1", dst: str = "server3", dscp: int = 10, **fields: Any) -> Any:
    """A backup flow of the storage class, marked `dscp`."""
    return flow(src, dst, cls="storage", dscp_sent=dscp, **fields)


def test_lossless_isolation_passes_a_backup_in_the_lossy_class(lab: Lab, run: SyntheticRun) -> None:
    run.kind = "backup"
    run.flows = [backup(), backup("server2", "server4")]
    results = by_scope(check("lossless_isolation", lab, run.write()))
    assert {s: r.status for s, r in results.items()} == {
        "bulk": Status.PASS,
        "loss storage": Status.PASS,
    }
    assert (
        results["loss storage"].reason
        == "lossy 0 of 1000 packets lost (0.00 %) outside faults (no budget: best effort)"
    )


def test_lossless_isolation_fails_a_backup_marked_into_the_roce_priority_on_every_hop(
    lab: Lab, run: SyntheticRun
) -> None:
    run.kind = "backup"
    run.flows = [backup(dscp=26)]
    result = by_scope(check("lossless_isolation", lab, run.write()))["bulk"]
    assert result.status is Status.FAIL
    # server1 (leaf1/leaf2) to server3 (leaf3/leaf4): every switch of every ECMP branch
    assert {f.device for f in result.findings} == {
        "leaf1",
        "leaf2",
        "spine1",
        "spine2",
        "leaf3",
        "leaf4",
    }
    first = result.findings[0]
    assert (first.device, first.port, first.where) == ("leaf1", "Ethernet0", "PORT_QOS_MAP")
    assert first.message == (
        "backup phase allreduce enters with DSCP 26: lossless priority 3, shared with the "
        "collectives"
    )


def test_lossless_isolation_reads_every_switch_on_the_path(tmp_path: Path) -> None:
    """Only spine2 maps the storage DSCP into the lossless priority: the leaves' maps (all
    the old check read) are right."""
    lab = generate_lab(tmp_path / "lab", "viso")

    def lossless_storage(db: dict[str, Any]) -> None:
        db["DSCP_TO_TC_MAP"]["RDMA"]["10"] = "3"

    edit_json(lab, "spine2", lossless_storage)
    run = SyntheticRun(lab, kind="backup", flows=[backup()])
    result = by_scope(check("lossless_isolation", lab, run.write()))["bulk"]
    assert result.status is Status.FAIL
    assert [(f.device, f.port) for f in result.findings] == [("spine2", "Ethernet0,Ethernet8")]


def test_lossless_isolation_reports_loss_per_class(
    lab: Lab, run: SyntheticRun, tmp_path: Path
) -> None:
    """RoCE lost 3 packets with no fault to explain them: lossless must lose nothing; the
    backup lost 20 of 500 in the lossy class: best effort by default, but 4 % is over a
    budget of 1 % the intent gives storage."""
    run.flows = [
        flow("server1", "server3", gaps=[(1.0, 3)]),
        backup("server2", "server4", gaps=[(2.0, 20)]),
    ]
    obs = run.write()
    assert by_scope(check("lossless_isolation", lab, obs))["loss storage"].status is Status.PASS
    budgeted = Lab.open(Path(shutil.copytree(lab.path, tmp_path / "lab")))
    intent = budgeted.path / "fabric.yaml"
    data = yaml.safe_load(intent.read_text())
    data["qos"]["classes"]["storage"]["loss_budget_percent"] = 1.0
    intent.write_text(yaml.safe_dump(data))
    results = by_scope(check("lossless_isolation", budgeted, obs))
    roce, storage = results["loss roce"], results["loss storage"]
    assert roce.status is Status.FAIL
    assert [str(f) for f in roce.findings] == [
        "server1->server3 qp0 allreduce: 3 packets lost outside any fault (lossless by the intent)"
    ]
    assert storage.status is Status.FAIL
    assert storage.reason.endswith("class storage lost 4.00 % outside faults > budget 1 %")
    assert storage.figures["lossy_lost"] == 20


def test_lossless_isolation_leaves_loss_in_a_fault_to_failover(lab: Lab, run: SyntheticRun) -> None:
    run.fault(1.0, "link-down", link="leaf1:spine1")
    run.flows = [flow("server1", "server3", gaps=[(1.2, 10)])]
    roce = by_scope(check("lossless_isolation", lab, run.write()))["loss roce"]
    assert (roce.status, roce.figures["lossless_lost"]) == (Status.PASS, 0)


def test_lossless_isolation_leaves_a_restore_while_routing_settles_to_failover(
    lab: Lab, run: SyntheticRun
) -> None:
    """A link given back (failover judges what that costs) loses packets until the routes
    that use it again are installed: not loss outside faults; later loss is."""
    run.fault(1.0, "link-down", link="leaf1:spine1")
    run.fault(3.0, "link-up", link="leaf1:spine1")
    run.flows = [flow("server1", "server3", gaps=[(3.3, 10)])]  # began at 3.2 s
    roce = by_scope(check("lossless_isolation", lab, run.write()))["loss roce"]
    assert (roce.status, roce.figures["lossless_lost"]) == (Status.PASS, 0)
    run.flows = [flow("server1", "server3", gaps=[(4.6, 10)])]  # began at 4.5 s
    roce = by_scope(check("lossless_isolation", lab, run.write()))["loss roce"]
    assert (roce.status, roce.figures["lossless_lost"]) == (Status.FAIL, 10)


def test_lossless_isolation_leaves_a_pfc_storms_drops_to_the_watchdog_check(
    lab: Lab, run: SyntheticRun
) -> None:
    """A NIC storming pauses: the PFC watchdog drops its queue's packets (the fix of the
    pfc-storm incident); pfc_watchdog_behaviour judges that, not loss outside faults."""
    run.fault(1.0, "pfc-storm", link="server3:nic0", priority=3)
    run.flows = [flow("server1", "server3", gaps=[(2.5, 100)])]
    roce = by_scope(check("lossless_isolation", lab, run.write()))["loss roce"]
    assert (roce.status, roce.figures["lossless_lost"]) == (Status.PASS, 0)


def test_lossless_isolation_owns_no_drop_at_a_faults_very_instant(
    lab: Lab, run: SyntheticRun
) -> None:
    """The simulator's times are exact (`fault_margin` 0): a drop at the instant a link went
    down is that fault's, though its start rebuilt from the gap's end and rate falls a
    rounding error before it."""
    # as the reference recorded them in a leaf-reboot: the gap began (t - 990 / pps) 2e-19 s
    # before the node-down
    pps, down = 2547591.9565458675, 0.0011367857142857143
    run.fault(0.0, "link-down", link="leaf1:spine1")
    run.flows = [flow("server2", "server3", pps=pps)]
    path = run.write().path
    saved = json.loads((path / "run.json").read_text())
    fault = {**saved["faults"][0], "t": down, "began": down}
    phase = {**saved["phases"][0], "start": 0.0, "end": 0.0127}
    sim = {"started": 0.0, "ended": 0.0127, "fault_margin": 0.0}
    (path / "run.json").write_text(json.dumps(saved | sim | {"faults": [fault], "phases": [phase]}))
    (path / "flows.json").write_text(
        json.dumps([{**run.flows[0], "lost": 990, "gaps": [[0.001525387977190642, 990]]}])
    )
    roce = by_scope(check("lossless_isolation", lab, Observations.open(path)))["loss roce"]
    assert (roce.status, roce.figures["lossless_lost"]) == (Status.PASS, 0)


def test_lossless_isolation_tells_a_backup_from_the_all_reduce_on_its_pair(
    lab: Lab, run: SyntheticRun
) -> None:
    """The receiver counts both under one flow id (each record shows DSCPs 10 and 26): the
    backup is not blamed for the All-Reduce's 26, nor the All-Reduce made lossy by the 10."""
    run.kinds = {"backup": "backup"}
    both = {26: 500, 10: 500}
    run.flows = [
        flow("server1", "server3", dscp_received=both),
        backup(dscp_received=both, phase="backup"),
    ]
    results = by_scope(check("lossless_isolation", lab, run.write()))
    assert results["bulk"].status is Status.PASS
    assert results["loss roce"].figures["lossless_sent"] == 500
    assert results["loss roce"].figures["lossy_sent"] == 0


def test_dscp_preserved_reads_each_flow_where_the_backend_counts_them_apart(
    lab: Lab, run: SyntheticRun
) -> None:
    """The simulator counts each flow on its own: a backup sharing its flow id with an
    All-Reduce flow (same pair, same queue pair) is judged by its own counts. Its DSCP 10
    rewritten to 0 on the path fails storage, naming the pair; the All-Reduce's 26 passes."""
    run.kinds = {"backup": "backup"}
    run.flows = [
        flow("server1", "server3", dscp_received={26: 500}),
        backup(dscp_received={0: 500}, phase="backup"),
    ]
    results = by_scope(check("dscp_preserved", lab, run.write()))
    assert results["roce"].status is Status.PASS
    assert results["roce"].figures["packets"] == 500
    storage = results["storage"]
    assert storage.status is Status.FAIL
    assert [str(f) for f in storage.findings] == [
        "server1->server3 path: sent DSCP 10, received [0]"
    ]
    # Counted apart and kept: both arrive as sent.
    run.flows[1] = backup(dscp_received={10: 500}, phase="backup")
    results = by_scope(check("dscp_preserved", lab, run.write()))
    assert (results["storage"].status, results["storage"].figures["packets"]) == (Status.PASS, 500)


# -- pfc_behaviour and ecn_behaviour judged against the intent ----------------------------


def pfc_row(
    port: str, priority: int = 3, *, sent: int = 0, received: int = 0, marks: int = 0, **drops: int
) -> dict[str, Any]:
    """One pfc.json row as the simulator writes it."""
    counts = {"lossless": 0, "lossy": 0, "ttl": 0, "no_route": 0, "link": 0, "watchdog": 0}
    return {
        "port": port,
        "priority": priority,
        "pause_sent": sent,
        "pause_received": received,
        "paused_s": 0.0,
        "ecn_marks": marks,
        "tx_bytes": 0,
        "drops": counts | drops,
    }


def with_pfc(run: SyntheticRun, rows: list[dict[str, Any]]) -> Observations:
    """The run written with a pfc.json (and no queue samples)."""
    run.capabilities = sorted({*NETNS, "pfc", "ecn", "queues"})
    run.flows = [flow("server1", "server3")]
    obs = run.write()
    (obs.path / "pfc.json").write_text(json.dumps(rows))
    (obs.path / "queues.json").write_text(json.dumps({"interval": 1e-5, "queues": {}}))
    return obs


def test_drops_of_roce_on_a_switch_that_maps_it_lossy_are_lossless_drops(
    lab: Lab, run: SyntheticRun, tmp_path: Path
) -> None:
    """spine2 maps DSCP 26 to TC 0 (no PFC): its drops on queue 0 are drops of a class the
    intent makes lossless, whatever its config says; the same drops on spine1, which keeps
    26 in TC 3, are storage's or the default class's and pass."""
    broken = Lab.open(Path(shutil.copytree(lab.path, tmp_path / "lab")))
    edit_json(broken, "spine2", lambda db: db["DSCP_TO_TC_MAP"]["RDMA"].update({"26": "0"}))
    rows = [pfc_row("spine2:Ethernet0", 0, lossy=40), pfc_row("spine1:Ethernet0", 0, lossy=7)]
    drops = by_scope(check("pfc_behaviour", broken, with_pfc(SyntheticRun(broken), rows)))
    assert drops["lossless drops"].status is Status.FAIL
    assert [str(f) for f in drops["lossless drops"].findings] == [
        "spine2 Ethernet0 priority 0: 40 drops on a queue without PFC carrying roce "
        "(lossless by the intent)"
    ]
    healthy = by_scope(check("pfc_behaviour", lab, with_pfc(run, rows)))
    assert healthy["lossless drops"].status is Status.PASS


def test_propagation_without_a_congestion_point_is_not_observable(
    lab: Lab, run: SyntheticRun
) -> None:
    """leaf1 and spine1 pause each other and nobody else: every pausing node was paused, so
    there is no congestion point to count hops from (it passed as '0 hops from ')."""
    rows = [
        pfc_row("leaf1:Ethernet24", sent=50, received=50, marks=3),
        pfc_row("spine1:Ethernet0", sent=50, received=50, marks=3),
    ]
    spread = by_scope(check("pfc_behaviour", lab, with_pfc(run, rows)))["propagation"]
    assert spread.status is Status.NOT_OBSERVABLE
    assert spread.reason.startswith("100 pause frames, but every node that paused was itself")


def test_ecn_before_pfc_is_judged_per_switch(lab: Lab, run: SyntheticRun) -> None:
    """leaf3 marks plenty; leaf4 pauses without marking (ECN off): the fabric-wide ratio
    (40 pauses for 2,000 marks) would pass, leaf4 fails, named with its pausing port."""
    rows = [
        pfc_row("leaf3:Ethernet0", marks=2000),
        pfc_row("leaf4:Ethernet24", sent=40),
        pfc_row("spine1:Ethernet0", received=40),
    ]
    (result,) = [
        r for r in check("ecn_behaviour", lab, with_pfc(run, rows)) if r.scope.startswith("ecn")
    ]
    assert result.status is Status.FAIL
    assert [str(f) for f in result.findings] == [
        "leaf4 Ethernet24 queue 3: 40 pause frames sent for 0 ECN marks (at most 0.1 per mark)"
    ]
