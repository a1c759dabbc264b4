"""`fib_agreement`: each switch's live FIB against the routing model, on written runs and on
live twins (small with static routes, a small 3-tier fabric, the reference) through a
link failure and its restore."""

from __future__ import annotations

import json
from collections.abc import Iterator
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any

import pytest
import yaml

from labs.backend import Fault
from labs.failures import Failures, Network
from tests.conftest import lab_name, root_and_frr, running_twin, wait_for, write_lab
from tests.synthetic import SyntheticRun
from twin.lab.directory import Lab
from twin.model.fib import Fib, NextHop, to_json
from twin.model.routing import Routing
from twin.model.wiring import Wiring
from twin.pytest_plugin import Twin
from twin.scenario.observations import Observations
from validators.dynamic import fib_agreement
from validators.examples import add_frr_line, generate, neighbor_address
from validators.registry import get
from validators.result import Status

REPO = Path(__file__).resolve().parents[2]
STATIC = IPv4Network("10.8.0.0/16")
BLACKHOLE = IPv4Network("10.9.0.0/16")


def judge(obs: Observations) -> list[Any]:
    return fib_agreement.check(obs_lab(obs), obs, get("fib_agreement").params({}))


def obs_lab(obs: Observations) -> Lab:
    return Lab.open(Path(obs.run["lab_dir"]))


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    path = write_lab(tmp_path_factory.mktemp("fa") / "lab", "fagree")
    return Lab.open(path)


def model(lab: Lab) -> Fib:
    """The routing model's FIB of the intact lab (a fresh copy)."""
    return {n: dict(routes) for n, routes in Routing(Wiring(lab)).fib.items()}


def written(lab: Lab, name: str, end: Fib | None = None) -> SyntheticRun:
    """A run whose snapshots hold the model's FIB (`end` at the end when given)."""
    return SyntheticRun(lab, name=name, fib_start=model(lab), fib_end=end or model(lab))


def test_agreeing_snapshots_pass(lab: Lab) -> None:
    results = judge(written(lab, "agree").write())
    assert [r.scope for r in results] == ["FIB start", "FIB end"]
    assert {r.status for r in results} == {Status.PASS}
    assert results[0].figures["routes"] == sum(len(model(lab)[s]) for s in lab.switches())


def test_a_missing_route_and_other_next_hops_fail_naming_switch_prefix_and_hops(lab: Lab) -> None:
    fib = model(lab)
    prefix = next(p for p, hops in fib["leaf1"].items() if len(hops) == 2)
    fib["leaf1"][prefix] = fib["leaf1"][prefix][:1]
    gone = next(iter(fib["spine2"]))
    del fib["spine2"][gone]
    results = judge(written(lab, "differ", fib).write())
    assert [r.status for r in results] == [Status.PASS, Status.FAIL]
    found = {(f.device, f.message.split(":")[0]) for f in results[1].findings}
    assert found == {("leaf1", str(prefix)), ("spine2", str(gone))}
    leaf1 = next(f for f in results[1].findings if f.device == "leaf1")
    kept = fib["leaf1"][prefix][0]
    assert f"live {kept.node}:{kept.port}, model " in leaf1.message
    assert "live no route" in next(f for f in results[1].findings if f.device == "spine2").message


def test_the_model_follows_the_faults_fired_before_each_snapshot(lab: Lab) -> None:
    """After a link-down, the intact FIB is judged against the model without that link: at
    the fault's snapshot it is still the FIB before the fault (converging), at the end it
    fails, naming the switches that lost the link."""
    run = written(lab, "faulted")
    run.fault(1.0, "link-down", link="leaf1:spine1")
    obs = run.write()
    intact = (obs.path / "fib" / "end.json").read_text()
    (obs.path / "fib" / "fault1-link-down.json").write_text(intact)
    obs.run["fibs"]["fault1-link-down"] = obs.run["started"] + 1.5
    results = {r.scope: r for r in judge(obs)}
    assert results["FIB start"].status is Status.PASS
    assert results["FIB fault1-link-down"].status is Status.PASS
    assert int(results["FIB fault1-link-down"].figures["converging"]) > 0
    assert results["FIB end"].status is Status.FAIL  # the link never came back
    assert {f.device for f in results["FIB end"].findings} >= {"leaf1", "spine1"}


def test_after_a_fault_routes_between_before_and_after_are_converging(lab: Lab) -> None:
    """Half a second after a link-up, the FIB still as it was with the link down is on its
    way (converging, not failing); a next hop neither state has fails there; the same FIB at
    the end (every fault over) fails."""
    run = written(lab, "restored")
    run.fault(1.0, "link-down", link="leaf1:spine1")
    run.fault(2.0, "link-up", link="leaf1:spine1")
    obs = run.write()
    intact = model(lab)
    down = Network(lab, Failures(), Routing(Wiring(lab))).after(
        Fault("link-down", link="leaf1:spine1")
    )
    pending = {n: dict(routes) for n, routes in down.fib.items()}
    (obs.path / "fib" / "fault2-link-up.json").write_text(json.dumps(to_json(pending)))
    obs.run["fibs"]["fault2-link-up"] = obs.run["started"] + 2.5
    changed = len(fib_agreement.differences(lab, pending, intact))
    restored = {r.scope: r for r in judge(obs)}["FIB fault2-link-up"]
    assert restored.status is Status.PASS, restored.reason
    assert restored.figures["converging"] == changed > 0
    prefix = next(p for p, hops in intact["leaf1"].items() if len(hops) > 1)
    pending["leaf1"][prefix] = (NextHop("leaf2", "PortChannel100"),)
    (obs.path / "fib" / "fault2-link-up.json").write_text(json.dumps(to_json(pending)))
    failed = {r.scope: r for r in judge(obs)}["FIB fault2-link-up"]
    assert failed.status is Status.FAIL
    assert [f.device for f in failed.findings] == ["leaf1"]
    (obs.path / "fib" / "end.json").write_text(json.dumps(to_json(down.fib)))
    end = {r.scope: r for r in judge(obs)}["FIB end"]
    assert end.status is Status.FAIL and len(end.findings) == changed


# bench_fabrics seed 6, fabric 1 (the live sample's m32fab2m1): single-homed servers, 4 spines
SINGLE_HOMED = {
    "spines": {"count": 4, "ports": 32, "speed": "100G"},
    "leaves": {"ports": 8, "speed": "100G", "peer_link_ports": 2},
    "servers": {"count": 8, "nics": 1, "dual_homed": False, "nic_speed": "100G",
                "name_prefix": "tdlbhxx5"},
    "oversubscription": {"target": 3.0, "max": 4.0},
}  # fmt: skip


def test_a_session_a_link_up_brought_back_may_still_be_coming_at_the_next_fault(
    tmp_path: Path,
) -> None:
    """The default scenario's faults on the live sample's fabric: leaf1:spine1 down, up, then
    a server link down 3 s later. spine1's routes over leaf1 not back yet at that fault's
    snapshot (FRR re-opens the session on its 5 s connect retry when the first attempt
    failed) are still converging from the link-down (before: `spine1 FIB: 10.0.0.5/32: live
    no route`, a false red on netns at load 30); a route that had come back and is gone
    again, or the same FIB at the end, fails."""
    lab = generate(tmp_path / "lab", SINGLE_HOMED, name=lab_name("fa"))
    server_link = "tdlbhxx52:nic0"
    run = written(lab, "late")
    run.duration = 10.0
    run.fault(1.0, "link-down", link="leaf1:spine1")
    run.fault(4.0, "link-up", link="leaf1:spine1")
    run.fault(7.0, "link-down", link=server_link)
    obs = run.write()
    net = Network(lab, Failures(), Routing(Wiring(lab)))
    down = net.after(Fault("link-down", link="leaf1:spine1"))
    late = down.after(Fault("link-down", link=server_link)).fib  # the session not yet back
    for label, at, fib in [
        ("fault1-link-down", 1.5, down.fib),
        ("fault2-link-up", 4.5, down.fib),
        ("fault3-link-down", 7.5, late),
    ]:
        (obs.path / "fib" / f"{label}.json").write_text(json.dumps(to_json(fib)))
        obs.run["fibs"][label] = obs.run["started"] + at
    loopback = next(p for p, hops in net.fib["spine1"].items() if p.prefixlen == 32 and
                    {h.node for h in hops} == {"leaf1"})  # fmt: skip
    assert late["spine1"].get(loopback) is None
    results = {r.scope: r for r in judge(obs)}
    fault3 = results["FIB fault3-link-down"]
    assert fault3.status is Status.PASS, fault3.reason
    assert (
        int(fault3.figures["converging"])
        >= int(results["FIB fault2-link-up"].figures["converging"])
        > 0
    )
    # Back at fault2's snapshot, gone again at fault3's: that is no convergence.
    back = down.after(Fault("link-up", link="leaf1:spine1")).fib
    (obs.path / "fib" / "fault2-link-up.json").write_text(json.dumps(to_json(back)))
    regressed = {r.scope: r for r in judge(obs)}["FIB fault3-link-down"]
    assert regressed.status is Status.FAIL
    assert f"{loopback}: live no route, model leaf1:" in " ".join(
        f.message for f in regressed.findings if f.device == "spine1"
    )
    (obs.path / "fib" / "end.json").write_text(json.dumps(to_json(late)))
    assert {r.scope: r for r in judge(obs)}["FIB end"].status is Status.FAIL


def test_not_observable_where_the_fibs_are_the_models_own(lab: Lab) -> None:
    run = SyntheticRun(lab, name="fake", capabilities=["counters", "fib", "flows"])
    (result,) = judge(run.write())
    assert result.status is Status.NOT_OBSERVABLE
    assert "routing model's own" in result.reason


# -- live twins --------------------------------------------------------------------------------

FAULTED = {
    "name": "fib-agreement",
    "settle": 0,
    "traffic": [{"at": 0, "duration": 6, "kind": "backup", "src": "server1", "dst": "server3"}],
    "faults": [
        {"at": 1, "fault": "link-down", "link": "leaf1:spine1"},
        {"at": 3, "fault": "link-up", "link": "leaf1:spine1"},
    ],
    "validate": {"fib_agreement": {}},
}


def with_statics(lab: Lab) -> None:
    """A static route via a leaf on spine1 and a blackhole on spine2, as a person adds them."""
    add_frr_line(lab, "spine1", f"ip route {STATIC} {neighbor_address(lab, 'spine1', 'leaf3')}")
    add_frr_line(lab, "spine2", f"ip route {BLACKHOLE} blackhole")


def small_3tier(out: Path, name: str) -> Path:
    """examples/small.yaml in two pods under two super-spines (4-port spines)."""
    small = yaml.safe_load((REPO / "examples" / "small.yaml").read_text())
    spines = {**small["spines"], "ports": 4}
    return generate(out, small, name=name, superspines={"count": 2}, spines=spines).path


def reference(out: Path, name: str) -> Path:
    return generate(out, REPO / "examples" / "reference.yaml", name=name).path


@pytest.fixture(scope="module", params=["small", "3-tier", "reference"])
def live(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Twin]:
    reason = root_and_frr()
    if reason:
        pytest.skip(reason)
    out = tmp_path_factory.mktemp("fa-live") / "lab"
    kind = request.param
    if kind == "small":
        path = write_lab(out, lab_name())
        with_statics(Lab.open(path))
    elif kind == "3-tier":
        path = small_3tier(out, lab_name())
    else:
        path = reference(out, lab_name())
    with running_twin(path) as twin:
        yield twin


def test_the_live_fibs_are_the_models_through_a_failure_and_its_restore(
    live: Twin, tmp_path: Path
) -> None:
    obs = live.play(FAULTED, tmp_path)
    results = judge(obs)
    assert [r.scope for r in results] == [
        "FIB start",
        "FIB fault1-link-down",
        "FIB fault2-link-up",
        "FIB end",
    ]
    assert {r.status for r in results} == {Status.PASS}, [r.reason for r in results]
    assert all(int(r.figures["routes"]) > 0 for r in results)


def test_a_static_route_the_twin_does_not_install_fails(live: Twin) -> None:
    """The state the twin was in before it ran staticd: the config's static routes missing
    from the live FIB. Taken out of the running twin here, the check names them."""
    model = Routing(Wiring(live.lab)).fib
    if STATIC not in model["spine1"]:
        pytest.skip("only the small lab has static routes")
    assert fib_agreement.differences(live.lab, live.fib(), model) == []
    gateway = neighbor_address(live.lab, "spine1", "leaf3")
    done = live.exec("spine1", "vtysh", "-c", "configure", "-c", f"no ip route {STATIC} {gateway}")
    assert done.returncode == 0, done.stderr
    try:
        wait_for(lambda: STATIC not in live.fib()["spine1"], "zebra removing the route", 10)
        found = fib_agreement.differences(live.lab, live.fib(), model)
        assert [(f.device, f.message) for f in found] == [
            ("spine1", f"{STATIC}: live no route, model leaf3:{hop(model, STATIC).port}")
        ]
    finally:
        live.exec("spine1", "vtysh", "-c", "configure", "-c", f"ip route {STATIC} {gateway}")


def hop(model: dict[str, Any], prefix: IPv4Network) -> NextHop:
    first: NextHop
    (first,) = model["spine1"][prefix]
    return first
