"""`failover` on a real twin judges each fault from probe flows pinned through it, and its
verdict flips when the fabric is broken on purpose.

The twin (the small lab with two MLAG pairs, `own_twin`) plays short scenarios with the
failover probes on (the default when `failover` is validated): 1,000 pps per flow, pinned by
the kernels' own lookups just before each fault. Beside the player's probes, the tests send
their own (`labs.netns.udpprobe`, pinned through the same element before the run, other
servers and ports) and compare what both lost. Cases:

- healthy: a leaf uplink cut that the leaves notice 300 ms later (`delay_ms`, loss of signal
  plus FIB programming) passes, with a loss window of about 300 ms that the test's own flows
  measure too;
- broken: BFD removed from both ends of the uplink, a gray failure (100 % loss, carrier up)
  is never routed around before the loss is cleared: fails "never recovered"; with BFD the
  same fault passes;
- a fault no flow can cross (the peer-link of a healthy pair) is not-observable, saying so;
- a server link that drops everything while its carrier stays up black-holes the flows to
  that server behind it: fails "never recovered";
- a slow fault verb (a cut whose loss of signal is noticed only 10 s later: the verb returns
  long after the next fault was due): the probes are held until the next fault's verb has
  returned, and show BFD routing around the cut within its limit;
- a restore (link-up after link-down): the cut's probe flows, followed until BGP routes them
  back through the link, pass; dropped on that link once it is back (iptables, on both ends,
  inserted while it is down), they fail "never recovered", as the test's own flows lose too.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from labs.netns.faults import resolve_link
from labs.netns.paths import UdpFlow, pin
from labs.netns.udpprobe import FlowLoss, Probe
from tests.conftest import plan, root_and_frr, wait_for
from twin.pytest_plugin import Twin
from twin.scenario.observations import Observations
from twin.verdict import verdict
from validators.result import Result, Status

pytestmark = [
    pytest.mark.skipif(root_and_frr() is not None, reason=str(root_and_frr())),
]

OWN_PORTS = range(40000, 41024)  # the test's own probes: apart from the player's (20000-23999)


@pytest.fixture(autouse=True)
def converged(own_twin: Twin) -> Iterator[None]:
    """Each test starts from, and leaves, a converged twin."""
    wait_for(lambda: own_twin.established() and own_twin.converged(), "converged", 90)
    yield
    wait_for(lambda: own_twin.established() and own_twin.converged(), "converged after", 90)


def scenario(name: str, faults: list[dict[str, Any]], duration: float) -> dict[str, Any]:
    """A light All-Reduce over every server for `duration` s, the faults, failover judged."""
    traffic = {"kind": "all_reduce", "duration": duration, "qps": 2, "pps": 25}
    return {
        "name": name,
        "settle": 0.5,
        "traffic": [traffic],
        "faults": faults,
        "validate": {"failover": {}},
    }


def judged(obs: Observations) -> dict[str, Result]:
    """The run's failover results by scope."""
    _, results = verdict.report_run(obs.path)
    return {r.scope: r for r in results if r.validator == "failover"}


def probe_records(obs: Observations) -> dict[str, dict[str, Any]]:
    """The run's failover probe records by element."""
    records: list[dict[str, Any]] = json.loads((obs.path / "failover_probes.json").read_text())
    return {r["element"]: r for r in records}


def with_own_probe(
    twin: Twin, link: str, src: str, dst: str, seconds: float, play: Callable[[], Observations]
) -> tuple[Observations, list[FlowLoss]]:
    """Play while the test's own 1,000 pps flows, pinned through `link` now, run beside."""
    servers = twin.servers()
    ends = resolve_link(twin.lab, plan(twin), link)
    template = UdpFlow(src, dst, servers[src], servers[dst], OWN_PORTS.start, 5700)
    flows = pin(plan(twin), template, ends, 4, OWN_PORTS)
    own = Probe(plan(twin), flows, 1000, seconds)
    own.start()
    try:
        obs = play()
        return obs, own.wait()
    finally:
        own.stop()


def crossing(record: dict[str, Any], ends: list[str]) -> list[dict[str, Any]]:
    """The probe flows whose way before the fault left by an end of the link."""
    return [f for f in record["flows"] if set(f["path"]) & set(ends) and f["crossed"] in ends]


def test_a_healthy_uplink_cut_passes_with_probes_that_crossed_it(
    own_twin: Twin, tmp_path: Path
) -> None:
    link, delay = "leaf1:spine1", 300
    faults = [
        {"at": 2, "fault": "link-down", "link": link, "delay_ms": delay},
        {"at": 4.5, "fault": "link-up", "link": link},
    ]
    # The test's own flows go the other way: from a server of the other pair into leaf1's.
    obs, own = with_own_probe(
        own_twin,
        link,
        "server3",
        "server2",
        25.0,
        lambda: own_twin.play(scenario("healthy-cut", faults, 5), tmp_path),
    )
    result = judged(obs)[f"fault1 link-down {link}"]
    assert result.status is Status.PASS, result.reason
    record = probe_records(obs)[link]
    ends = obs.run["faults"][0]["ends"]
    assert len(crossing(record, ends)) == len(record["flows"]) == result.figures["probe_flows"] == 8
    assert record["started"] < obs.run["faults"][0]["began"]
    assert result.reason.startswith("8 probe flows at 1000 pps crossed ")
    # The window: the 300 ms the leaves took to notice, at 1 ms resolution; the test's own
    # flows lost as much.
    window = float(result.figures["loss_window_ms"])
    assert delay * 0.9 <= window <= delay + 200, result.figures
    mine = max(loss.window_ms for loss in own)
    assert abs(mine - window) <= 100, (mine, window, [loss.as_dict() for loss in own])
    assert all(loss.recovered for loss in own)


def test_probes_are_held_until_a_slow_fault_verb_returns(own_twin: Twin, tmp_path: Path) -> None:
    link, delay = "leaf1:spine1", 10_000
    faults = [
        {"at": 2, "fault": "link-down", "link": link, "delay_ms": delay},
        {"at": 4, "fault": "link-up", "link": link},
    ]
    obs = own_twin.play(scenario("slow-verb", faults, 5), tmp_path)
    down, up = obs.run["faults"]
    assert up["began"] - down["began"] >= delay / 1000  # the up waited for the down's verb
    record = probe_records(obs)[link]
    assert record["ends"] >= up["t"]
    result = judged(obs)[f"fault1 link-down {link}"]
    assert result.status is Status.PASS, result.reason
    assert result.figures["never_recovered"] == 0
    assert 0 < float(result.figures["loss_window_ms"]) <= float(result.figures["limit_ms"])


def bfd(twin: Twin, nodes: list[str], on: bool) -> None:
    """Turn BFD on the fabric's BGP sessions of some switches off, or back on as generated."""
    for node in nodes:
        conf = (twin.path / "configs" / node / "frr.conf").read_text()
        asn = next(line.split()[2] for line in conf.splitlines() if line.startswith("router bgp"))
        command = "neighbor FABRIC bfd profile fabric" if on else "no neighbor FABRIC bfd"
        done = twin.exec(node, "vtysh", "-c", "configure", "-c", f"router bgp {asn}", "-c", command)
        assert done.returncode == 0, done.stdout + done.stderr


def test_a_gray_failure_without_bfd_never_recovers_and_with_bfd_passes(
    own_twin: Twin, tmp_path: Path
) -> None:
    link = "leaf1:spine1"
    faults = [
        {"at": 2, "fault": "loss", "link": link, "percent": 100},
        {"at": 5, "fault": "clear", "link": link},
    ]
    scope = f"fault1 loss {link}"
    bfd(own_twin, ["leaf1", "spine1"], on=False)
    try:
        wait_for(lambda: own_twin.established() and own_twin.converged(), "BFD off", 60)
        obs, own = with_own_probe(
            own_twin,
            link,
            "server1",
            "server4",
            25.0,
            lambda: own_twin.play(scenario("gray-no-bfd", faults, 5.5), tmp_path),
        )
    finally:
        bfd(own_twin, ["leaf1", "spine1"], on=True)
    broken = judged(obs)[scope]
    assert broken.status is Status.FAIL, broken.reason
    assert broken.reason.startswith("never recovered: ")
    assert int(broken.figures["never_recovered"]) >= 1
    # Cut from the loss until the probes ended (the clear was due), about 3 s; the test's
    # own flows from the loss until it was cleared.
    loss, clear = (float(f["began"]) for f in obs.run["faults"])
    until = float(probe_records(obs)[link]["until"])
    assert float(broken.figures["loss_window_ms"]) >= 800 * (until - loss)
    assert max(x.window_ms for x in own) >= 800 * (clear - loss), [x.as_dict() for x in own]

    wait_for(lambda: own_twin.established() and own_twin.converged(), "BFD back", 60)
    time.sleep(2)  # the BFD sessions up again
    healthy = judged(own_twin.play(scenario("gray-bfd", faults, 5.5), tmp_path))[scope]
    assert healthy.status is Status.PASS, healthy.reason
    # BFD (3 x 300 ms after the last packet it got: 600-900 ms after the loss began)
    # noticed, BGP withdrew: under a second and a half, the limit.
    assert 500 <= float(healthy.figures["loss_window_ms"]) <= 1400


def test_a_fault_no_flow_crosses_is_not_observable_and_a_black_hole_never_recovers(
    own_twin: Twin, tmp_path: Path
) -> None:
    nic = next(n for n in own_twin.lab.host("server2")["interfaces"] if n["peer"] == "leaf1")
    server_link = f"server2:{nic['name']}"
    faults = [
        {"at": 1.5, "fault": "link-down", "link": "leaf1:leaf2"},
        {"at": 3, "fault": "link-up", "link": "leaf1:leaf2"},
        # Carrier up, every frame dropped: nothing in the twin notices (no LACP, no BFD).
        {"at": 4.5, "fault": "loss", "link": server_link, "percent": 100},
        {"at": 7, "fault": "clear", "link": server_link},
    ]
    obs, own = with_own_probe(
        own_twin,
        server_link,
        "server4",
        "server2",
        25.0,
        lambda: own_twin.play(scenario("unseen-and-hole", faults, 7.5), tmp_path),
    )
    results = judged(obs)
    peer = results["fault1 link-down leaf1:leaf2"]
    assert peer.status is Status.NOT_OBSERVABLE
    assert "crosses leaf1:leaf2 before the fault" in peer.reason
    assert probe_records(obs)["leaf1:leaf2"]["flows"] == []
    hole = results[f"fault3 loss {server_link}"]
    assert hole.status is Status.FAIL, hole.reason
    assert "never recovered" in hole.reason
    ends = obs.run["faults"][2]["ends"]
    assert {f.where for f in hole.findings} <= {f"crossed {end}" for end in ends}
    assert len(crossing(probe_records(obs)[server_link], ends)) == hole.figures["probe_flows"]
    # The test's own flows into server2 over that link got nothing through until the clear
    # (they went on after it, so they closed their gap then).
    loss, clear = (float(f["began"]) for f in obs.run["faults"][2:])
    until = float(probe_records(obs)[server_link]["until"])
    assert max(x.window_ms for x in own) >= 800 * (clear - loss), [x.as_dict() for x in own]
    assert float(hole.figures["loss_window_ms"]) >= 800 * (until - loss)


PROBE_DPORTS = "47000:47999,5700"  # the player's probe flows and the test's own


def drop_probes_once_down(
    twin: Twin, link: str, stop: threading.Event, inserted: list[float] | None = None
) -> Callable[[], None]:
    """Once `link` has gone down, drop the probe flows leaving by either of its ends
    (iptables in each end's namespace; the time they are in appended to `inserted`); returns
    what removes the rules."""
    ends = resolve_link(twin.lab, plan(twin), link)
    since = time.time()

    def rule(verb: str) -> None:
        for end in ends:
            argv = ["iptables", verb, "FORWARD", "-o", end.ifname, "-p", "udp", "-m"]
            done = twin.exec(end.node, *argv, "multiport", "--dports", PROBE_DPORTS, "-j", "DROP")
            assert done.returncode == 0 or verb == "-D", done.stderr

    def watch() -> None:
        while not stop.wait(0.05):
            if any(e.get("fault") == "link-down" for e in twin.events(since)):
                rule("-I")
                if inserted is not None:
                    inserted.append(time.time())
                return

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()

    def undo() -> None:
        stop.set()
        thread.join()
        rule("-D")

    return undo


def lost_after(own: list[FlowLoss], t: float) -> list[float]:
    """Per test flow, the longest run of losses (seconds) that began after `t`, the loss
    still open at its end included."""
    out = []
    for loss in own:
        runs = [lost / loss.pps for _, lost, before, _ in loss.gaps if before >= t]
        if not loss.recovered:
            runs.append((loss.sent - 1 - loss.last_seq) / loss.pps)
        out.append(max(runs, default=0.0))
    return out


def test_a_restore_passes_when_the_flows_come_back_and_fails_when_dropped_there(
    own_twin: Twin, tmp_path: Path
) -> None:
    link = "leaf1:spine1"
    scope = f"fault2 link-up {link}"

    def play(name: str, down_s: float) -> tuple[Observations, list[FlowLoss]]:
        faults = [
            {"at": 2, "fault": "link-down", "link": link},
            {"at": 2 + down_s, "fault": "link-up", "link": link},
        ]
        return with_own_probe(
            own_twin,
            link,
            "server3",
            "server2",
            12.0 + down_s,
            lambda: own_twin.play(scenario(name, faults, 7 + down_s), tmp_path),
        )

    obs, own = play("restore", 2)
    healthy = judged(obs)[scope]
    assert healthy.status is Status.PASS, healthy.reason
    record = probe_records(obs)[link]
    up = float(obs.run["faults"][1]["began"])
    assert record["restore"]["index"] == 1 and record["restore"]["back"] > up
    assert int(healthy.figures["flows_back"]) >= 1
    assert record["ends"] >= record["restore"]["back"] + 1.5
    assert healthy.reason.startswith("8 probe flows at 1000 pps, routed back through leaf1:spine1")
    # The test's own flows, pinned through the link before the run, lost nothing worth a
    # verdict after the restore either.
    assert max(lost_after(own, up)) <= 0.5, [x.as_dict() for x in own]

    wait_for(lambda: own_twin.established() and own_twin.converged(), "converged again", 90)
    # The rules go in when the link-down is seen, by processes that take their time on a
    # loaded machine: the link stays down 6 s, and the rules must be in before it comes up.
    inserted: list[float] = []
    undo = drop_probes_once_down(own_twin, link, threading.Event(), inserted)
    try:
        obs, own = play("restore-dropped", 6)
    finally:
        undo()
    assert inserted and inserted[0] < float(obs.run["faults"][1]["began"]), inserted
    broken = judged(obs)[scope]
    assert broken.status is Status.FAIL, broken.reason
    assert broken.reason.startswith("never recovered: ") and "after the restore" in broken.reason
    assert judged(obs)[f"fault1 link-down {link}"].status is Status.PASS
    up = float(obs.run["faults"][1]["began"])
    assert max(lost_after(own, up)) >= 1.0, [x.as_dict() for x in own]
