"""An engineer's own checks on a fabric, written as pytest tests with the twin plugin.

Run against any fabric or edited lab directory:

    .venv/bin/pytest examples/test_my_fabric.py --twin-fabric examples/small.yaml
    .venv/bin/pytest examples/test_my_fabric.py --twin-lab ./my-lab
    .venv/bin/pytest examples/test_my_fabric.py --twin-lab ./my-lab --twin-backend fake  # no root
"""

from ipaddress import IPv4Network


def test_every_leaf_routes_to_every_other_leaf_over_all_spines(twin):
    spines = len(twin.lab.nodes("spine"))
    fib = twin.fib()
    for leaf in twin.lab.nodes("leaf"):
        for other in twin.lab.nodes("leaf"):
            if other != leaf:
                loopback = IPv4Network(twin.lab.graph.nodes[other]["loopback"])
                hops = fib[leaf].get(loopback, ())
                assert len({h.node for h in hops}) == spines, f"{leaf} -> {other}: {hops}"


def test_allreduce_loses_nothing_when_an_uplink_fails(twin_play):
    observations = twin_play(
        {
            "name": "uplink-failure",
            "settle": 1,
            "traffic": [
                {"kind": "all_reduce", "duration": 4, "qps": 2, "pps": 100, "order": "interleaved"}
            ],
            "faults": [
                {"at": 1, "fault": "link-down", "link": "leaf1:spine1"},
                {"at": 2.5, "fault": "link-up", "link": "leaf1:spine1"},
            ],
        }
    )
    flows = observations.flows
    assert flows, "the scenario sent no flow"
    assert all(f["received"] > 0 for f in flows)
    assert sum(f["lost"] + f["tail_lost"] for f in flows) <= 0.01 * sum(f["sent"] for f in flows)
