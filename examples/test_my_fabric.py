"""An engineer's own checks on a fabric, written as pytest tests with the twin plugin.

Run against any fabric or edited lab directory:

    .venv/bin/pytest examples/test_my_fabric.py --twin-fabric examples/small.yaml
    .venv/bin/pytest examples/test_my_fabric.py --twin-lab ./my-lab
    .venv/bin/pytest examples/test_my_fabric.py --twin-lab ./my-lab --twin-backend fake  # no root

What the chosen backend cannot observe is skipped with the reason (the fake backend has no BGP
sessions: the BGP test skips there, saying which backend observes them). So is a verdict that
could judge only part of what it covers: `twin.verdict(...)` is true only when every scope
passed, and skips, naming the others, when none failed (on the simulator, which pins no
failover probes, the failover test skips).
"""

from ipaddress import IPv4Network

import pytest

UPLINK_FAILURE = {
    "name": "uplink-failure",
    "settle": 1,
    "traffic": [
        {"kind": "all_reduce", "duration": 4, "qps": 2, "pps": 100, "order": "interleaved"}
    ],
    "faults": [
        {"at": 1, "fault": "link-down", "link": "leaf1:spine1"},
        {"at": 2.5, "fault": "link-up", "link": "leaf1:spine1"},
    ],
    "validate": {"failover": {}},  # so that the backend pins probe flows through the fault
}


def test_every_leaf_routes_to_every_other_leaf_over_all_spines(twin):
    spines = len(twin.lab.nodes("spine"))
    fib = twin.fib()
    for leaf in twin.lab.nodes("leaf"):
        for other in twin.lab.nodes("leaf"):
            if other != leaf:
                loopback = IPv4Network(twin.lab.graph.nodes[other]["loopback"])
                hops = fib[leaf].get(loopback, ())
                assert len({h.node for h in hops}) == spines, f"{leaf} -> {other}: {hops}"


@pytest.mark.twin_needs("bgp")
def test_every_bgp_session_is_established(twin):
    assert twin.established(), [s for s in twin.sessions() if s.state != "Established"]


def test_the_configs_pass_the_headroom_check(twin):
    # A static validator: judged on the lab's configs, any backend.
    assert twin.verdict("headroom")


def test_allreduce_loses_nothing_when_an_uplink_fails(twin, twin_play):
    observations = twin_play(UPLINK_FAILURE)
    flows = observations.flows
    assert flows, "the scenario sent no flow"
    assert all(f["received"] > 0 for f in flows)
    assert sum(f["lost"] + f["tail_lost"] for f in flows) <= 0.01 * sum(f["sent"] for f in flows)
    # The failover validator on the same run: every fault within 2 s of loss.
    assert twin.verdict("failover", max_loss_ms=2000)


def test_a_downed_uplink_takes_its_spine_out_of_ecmp(twin, twin_fault):
    twin_fault("link-down", link="leaf1:spine1")  # undone when the test ends
    spines = len(twin.lab.nodes("spine"))
    widths = twin.remote_widths()
    assert {w for (leaf, _), w in widths.items() if leaf == "leaf1"} == {spines - 1}
