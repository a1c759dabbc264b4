"""Ring collectives made in the core step by step (labs/sim/csrc/coll.c) play the same run, bit
for bit, as the flow table of every step, in O(ranks x QPs) flows; occupancy samples halve
when a run outgrows its budget."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from labs.sim import Flow, Monitor, simulate
from labs.sim.fabrics import leaf_spine, with_flows
from labs.sim.flows import Ring
from labs.sim.timeline import plan as sim_plan
from tests.simlab import beside_incast, observations, play, small_lab
from traffic import collectives
from twin.intent.inputs import parse_model
from twin.lab.directory import Lab
from twin.scenario import plan
from twin.scenario.model import Scenario


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_lab(tmp_path_factory.mktemp("lab") / "small")


def scenario(how: str, kind: str = "all_reduce", message: int = 2_000_003) -> dict[str, Any]:
    """A ring beside an incast into one of its ranks, a link failing under both."""
    return beside_incast(how, {"kind": kind, "message": message, "iterations": 3})


@pytest.mark.parametrize("kind", ["all_reduce", "all_gather"])
def test_a_ring_in_the_core_plays_as_its_table(base: Path, kind: str) -> None:
    core = play(base, scenario("core", kind))
    table = play(base, scenario("table", kind))
    assert observations(core) == observations(table)
    times = core.extra["iterations"][f"{kind}@0"]["times_s"]
    assert len(times) == 3 and all(t is not None and t > 0 for t in times)
    assert core.extra["sim"]["packet_hops"] == table.extra["sim"]["packet_hops"]


def test_a_ring_holds_a_flow_per_rank_and_queue_pair(base: Path) -> None:
    lab = Lab.open(base)
    timeline = plan.timeline(lab, parse_model(Scenario, {"settle": 0, **scenario("core")}, "t"))
    from labs.failures import Failures, Network
    from labs.sim import lab as simlab

    net = simlab.network(lab)
    p = sim_plan(lab, timeline, net, Network(lab, Failures.load(lab)))
    ranks = len(timeline.phases[0].ranks)
    (ring,) = p.experiment.collectives
    assert isinstance(ring, Ring)
    assert ring.slots == ranks * 2 and ring.iterations == 3 and ring.n_steps == 2 * (ranks - 1)
    incast = 2  # the other phase's rows
    assert p.n_flows == ranks * 2 + incast


def test_an_unfinished_ring_reports_as_its_table(base: Path) -> None:
    runs = []
    for how in ("core", "table"):
        cut = scenario(how)
        cut["faults"] = [{"at": 0.00001, "fault": "node-down", "node": "server3"}]
        runs.append(play(base, cut))
    core, table = runs
    assert observations(core) == observations(table)
    assert core.extra["iterations"]["all_reduce@0"]["times_s"] == [None, None, None]
    ring_flows = [f for f in core.flows if f["phase"] == "all_reduce@0"]
    assert ring_flows and not any(f["completed"] for f in ring_flows)


def test_ring_shape_bound_and_pairs_match_the_schedule() -> None:
    ranks = [f"r{i}" for i in range(7)]
    for build in (collectives.ring_all_reduce, collectives.ring_reduce_scatter):
        shape = collectives.ring_shape(build, ranks, 1_000_001, 3)
        schedule = build(ranks, 1_000_001, 3)
        assert shape is not None and shape.queue_pairs() == schedule.queue_pairs()
        latency = {(a, b): 1e-6 * (i + 1) for i, (a, b, _) in enumerate(schedule.queue_pairs())}
        for step in (0.0, lambda a, b, seconds=latency: seconds[(a, b)]):
            assert shape.completion_bound_s(4e11, step) == schedule.completion_bound_s(4e11, step)
    assert collectives.ring_shape(collectives.ring_all_reduce, ranks, 20, 3) is None  # a 0-byte QP
    assert collectives.ring_shape(collectives.all_to_all, ranks, 1_000_000, 1) is None


def test_samples_halve_past_their_budget() -> None:
    fabric = leaf_spine(servers=4, leaves=2, spines=1, uplinks=1)
    hosts = [h.name for h in fabric.hosts]
    flows = [Flow(f"f{i}", hosts[i], hosts[-1], size=3_000_000, cc="none") for i in range(3)]
    exp = with_flows(fabric, flows, duration=1.0)
    exp = dataclasses.replace(exp, monitor=Monitor(interval=2e-6, flows=True))
    full = simulate(exp, seed=3)
    capped = simulate(
        dataclasses.replace(exp, monitor=dataclasses.replace(exp.monitor, max_samples=20)), 3
    )
    n = len(next(iter(full.flows)).rate_series) + 1
    assert n > 4 * 20 + 1  # halved at least twice
    k = round(capped.sample_interval / full.sample_interval)
    assert k >= 4 and k & (k - 1) == 0 and capped.end_time == full.end_time
    for port, queues in full.queues.items():
        for q, series in queues.items():
            kept = capped.queues.get(port, {}).get(q, [0] * len(series[::k]))
            assert kept == series[::k][: len(kept)]
            assert 20 < len(kept) <= 2 * 20 + 1
    for a, b in zip(full.flows, capped.flows, strict=True):
        assert np.allclose(
            np.add.reduceat(a.rate_series, range(0, len(a.rate_series), k))[: len(b.rate_series)]
            / k,
            b.rate_series,
        )
