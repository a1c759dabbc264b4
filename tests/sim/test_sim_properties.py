"""Invariants on random small fabrics: PFC with formula headroom never drops lossless
packets, bytes are conserved, every flow completes, and runs repeat exactly."""

from __future__ import annotations

import dataclasses
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labs.sim import Experiment, Flow, PgParams, QosProfile, QueueParams, simulate
from labs.sim.fabrics import leaf_spine, with_flows


def random_experiment(seed: int) -> Experiment:
    """A leaf-spine of random size, speeds (uplinks up to 4x faster), cables and buffers, with
    random lossless, lossy, DCQCN and open-loop flows."""
    rnd = random.Random(seed)
    qos = QosProfile(
        queues={
            3: QueueParams(ecn=rnd.random() < 0.5, kmin=20_000, kmax=200_000, pmax=0.1),
            6: QueueParams(strict=True),
        },
        pgs={0: PgParams(alpha=8), 3: PgParams(alpha=rnd.choice([0.125, 1, 4]))},
    )
    fabric = leaf_spine(
        servers=rnd.randint(2, 5),
        leaves=rnd.choice([2, 4]),
        spines=rnd.randint(1, 3),
        uplinks=rnd.randint(1, 2),
        speed=rnd.choice([25e9, 100e9, 400e9]),
        cable_m=rnd.choice([2, 50, 300]),
        buffer_bytes=rnd.choice([500_000, 2_000_000]),
        qos=qos,
    )
    links = [
        link
        if link.a.startswith("srv")
        else dataclasses.replace(link, speed=link.speed * rnd.choice([1, 4]))
        for link in fabric.links
    ]
    hosts = [h.name for h in fabric.hosts]
    flows = []
    for i in range(rnd.randint(1, 10)):
        src, dst = rnd.sample(hosts, 2)
        flows.append(
            Flow(
                f"f{i}",
                src,
                dst,
                size=rnd.choice([10_000, 500_000, 2_000_000]),
                cc=rnd.choice(["dcqcn", "none"]),
                dscp=rnd.choice([26, 26, 0]),
                start=rnd.random() * 1e-4,
                packet_bytes=rnd.choice([1000, 4096]),
            )
        )
    return with_flows(dataclasses.replace(fabric, links=links), flows, duration=0.05)


# Drawn the same way every run (derandomize), so that CI stays a verdict on the change; the
# seeds below, found by fresh draws, are kept as regression cases.
@settings(max_examples=12, deadline=None, derandomize=True)
@given(st.integers(min_value=0, max_value=2**31))
def test_random_fabrics_keep_the_invariants(seed: int) -> None:
    exp = random_experiment(seed)
    result = simulate(exp, seed)
    assert result.total("drops_lossless") == 0
    for flow in result.flows:
        assert flow.completion is not None, flow.name
        assert flow.bytes_delivered + flow.bytes_dropped == flow.size
    assert simulate(exp, seed).to_json() == result.to_json()


@settings(max_examples=12, deadline=None, derandomize=True)
@given(st.integers(min_value=0, max_value=2**31), st.sampled_from([208, 254]))
def test_random_fabrics_in_cells_drop_no_lossless_frame(seed: int, cell: int) -> None:
    """The same fabrics counting their buffers in cells (Trident2, Tomahawk 3), the formula's
    headroom scaled for the frame sizes the flows send."""
    exp = random_experiment(seed)
    switches = [dataclasses.replace(s, cell_bytes=cell) for s in exp.switches]
    result = simulate(dataclasses.replace(exp, switches=switches), seed)
    assert result.total("drops_lossless") == 0


@pytest.mark.parametrize("seed", [624, 682, 5226])
def test_seeds_that_dropped_lossless(seed: int) -> None:
    """1-3 lossless drops at formula headroom: the frame that took a PG past its XOFF point
    was charged to the headroom (624: a dynamic threshold that fell; 682, 5226: the frame
    itself crossing it), the formula's window then overflowing by up to a frame."""
    assert simulate(random_experiment(seed), seed).total("drops_lossless") == 0
