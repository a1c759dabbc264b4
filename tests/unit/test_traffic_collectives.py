"""Collective schedules: steps, bytes per rank, bounds and nccl-tests bandwidths."""

from collections.abc import Callable, Sequence

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from traffic.collectives import (
    Collective,
    Schedule,
    algbw,
    all_to_all,
    bus_factor,
    busbw,
    halving_doubling_all_reduce,
    ring_all_gather,
    ring_all_reduce,
    ring_reduce_scatter,
    ring_shape,
)
from traffic.hierarchical import hierarchical_ring_all_reduce
from traffic.trees import tree_all_reduce

RANKS = [f"s{i}" for i in range(8)]
Builder = Callable[[list[str], int], Schedule]


def ranks(n: int) -> list[str]:
    return RANKS[:n]


@pytest.mark.parametrize("n", range(2, 9))
def test_ring_all_reduce_steps_and_bytes(n: int) -> None:
    size = 840 * 1024  # divisible by 2..8
    s = ring_all_reduce(ranks(n), size)
    assert len(s.steps) == 2 * (n - 1)
    for r in ranks(n):
        assert s.sent_by(r) * n == 2 * (n - 1) * size
    for k, step in enumerate(s.steps):
        assert len(step) == n
        ring = {(ranks(n)[i], ranks(n)[(i + 1) % n]) for i in range(n)}
        assert {(f.src, f.dst) for f in step} == ring
        assert all(f.bytes == size // n for f in step), k


def test_ring_splits_chunks_over_qps() -> None:
    s = ring_all_reduce(ranks(4), 4000, qps_per_peer=3)
    step = s.steps[0]
    assert len(step) == 12
    assert sorted({f.qp for f in step}) == [0, 1, 2]
    assert sum(f.bytes for f in step if f.src == "s0") == 1000
    assert s.sent_by("s0") == 6000


@given(st.integers(2, 8), st.integers(0, 10**7), st.integers(1, 4))
def test_ring_all_reduce_moves_every_byte(n: int, size: int, qps: int) -> None:
    s = ring_all_reduce(ranks(n), size, qps)
    assert sum(s.sent_by(r) for r in ranks(n)) == 2 * (n - 1) * size


@pytest.mark.parametrize("build", [ring_all_gather, ring_reduce_scatter])
@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_all_gather_and_reduce_scatter(build: Builder, n: int) -> None:
    s = build(ranks(n), 840 * 1024)
    assert len(s.steps) == n - 1
    assert all(s.sent_by(r) * n == (n - 1) * 840 * 1024 for r in ranks(n))


@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_halving_doubling_matches_ring_bytes_in_fewer_steps(n: int) -> None:
    size = 1 << 20
    s = halving_doubling_all_reduce(ranks(n), size)
    assert len(s.steps) == 2 * (n.bit_length() - 1)
    assert all(s.sent_by(r) * n == 2 * (n - 1) * size for r in ranks(n))
    for step in s.steps:  # pairwise exchanges
        pairs = {(f.src, f.dst) for f in step}
        assert all((d, src) in pairs for src, d in pairs)


def test_halving_doubling_needs_power_of_two() -> None:
    with pytest.raises(ValueError, match="power-of-two"):
        halving_doubling_all_reduce(ranks(6), 1000)


@pytest.mark.parametrize("n", [2, 3, 8])
def test_all_to_all(n: int) -> None:
    s = all_to_all(ranks(n), 840 * 1024, qps_per_peer=2)
    assert len(s.steps) == 1
    assert len(s.steps[0]) == n * (n - 1) * 2
    assert all(f.src != f.dst for f in s.steps[0])
    assert all(s.sent_by(r) * n == (n - 1) * 840 * 1024 for r in ranks(n))


def test_ranks_must_be_distinct() -> None:
    with pytest.raises(ValueError):
        ring_all_reduce(["a", "a"], 10)


def test_bus_factors_and_bandwidths() -> None:
    assert bus_factor(Collective.ALL_REDUCE, 16) == 2 * 15 / 16
    assert bus_factor(Collective.ALL_GATHER, 16) == 15 / 16
    assert bus_factor(Collective.REDUCE_SCATTER, 16) == 15 / 16
    assert bus_factor(Collective.ALL_TO_ALL, 16) == 15 / 16
    assert bus_factor(Collective.ALL_REDUCE, 1) == 0
    assert algbw(8_000_000, 0.002) == 4e9
    assert busbw(Collective.ALL_REDUCE, 8, 8_000_000, 0.002) == 4e9 * 1.75


@pytest.mark.parametrize(
    "build",
    [
        ring_all_reduce,
        halving_doubling_all_reduce,
        ring_all_gather,
        ring_reduce_scatter,
        all_to_all,
    ],
)
def test_busbw_at_the_bound_is_the_link_rate(build: Builder) -> None:
    s = build(ranks(8), 64 << 20)
    t = s.completion_bound_s(link_bps=400e9)
    assert s.busbw(t) * 8 == pytest.approx(400e9)
    assert s.algbw(t) == s.message_bytes / t


def test_bound_adds_step_latency() -> None:
    s = ring_all_reduce(ranks(4), 4_000_000)
    assert s.completion_bound_s(100e9, step_latency_s=1e-5) == pytest.approx(480e-6 + 6e-5)
    assert ring_all_reduce(["solo"], 1000).completion_bound_s(100e9) == 0


def test_a_step_waits_for_its_slowest_pair() -> None:
    s = ring_all_reduce(ranks(4), 4_000_000)  # 6 steps, every pair in each
    far = {("s3", "s0"): 1e-5}
    assert s.completion_bound_s(100e9, lambda a, b: far.get((a, b), 1e-6)) == pytest.approx(
        480e-6 + 6e-5
    )


def hierarchical_in_pairs(names: list[str], size: int, qps: int = 1) -> Schedule:
    """The hierarchical ring over groups of two consecutive ranks."""
    return hierarchical_ring_all_reduce(names, [i // 2 for i in range(len(names))], size, qps)


BUILDERS = [
    ring_all_reduce,
    halving_doubling_all_reduce,
    ring_all_gather,
    ring_reduce_scatter,
    all_to_all,
    tree_all_reduce,
    hierarchical_in_pairs,
]


def per_step_bound(
    s: Schedule,
    link_bps: float,
    latency: Callable[[str, str], float],
    cuts: Sequence[tuple[set[str], float]] = (),
) -> float:
    """The bound as its definition reads, one step, one flow and one cut at a time."""
    total = 0.0
    for step in s.steps:
        load: dict[tuple[str, bool], int] = {}
        for f in step:
            load[f.src, True] = load.get((f.src, True), 0) + f.bytes
            load[f.dst, False] = load.get((f.dst, False), 0) + f.bytes
        slowest = max((latency(f.src, f.dst) for f in step), default=0.0)
        seconds = 8 * max(load.values(), default=0) / link_bps
        for members, bps in cuts:
            out = sum(f.bytes for f in step if f.src in members and f.dst not in members)
            into = sum(f.bytes for f in step if f.dst in members and f.src not in members)
            seconds = max(seconds, out * 8 / bps, into * 8 / bps)
        total += slowest + seconds
    return total


@given(st.sampled_from(BUILDERS), st.integers(0, 3), st.integers(0, 10**7), st.integers(1, 4))
def test_the_table_bound_is_the_per_step_bound(
    build: Builder, log_n: int, size: int, qps: int
) -> None:
    s = build(ranks(2**log_n), size, qps)  # type: ignore[call-arg]
    far = {r: i * 1e-7 for i, r in enumerate(RANKS)}
    latency = lambda a, b: far[a] + 2 * far[b]  # noqa: E731
    assert s.completion_bound_s(100e9, latency) == per_step_bound(s, 100e9, latency)
    assert s.completion_bound_s(3e9) == per_step_bound(s, 3e9, lambda a, b: 0.0)


@given(
    st.sampled_from(BUILDERS),
    st.integers(1, 3),
    st.integers(0, 10**7),
    st.lists(
        st.tuples(st.sets(st.sampled_from([*RANKS, "elsewhere"])), st.sampled_from([1e9, 4e11])),
        max_size=4,
    ),
)
def test_the_bound_over_cuts_is_the_per_step_bound(
    build: Builder, log_n: int, size: int, cuts: list[tuple[set[str], float]]
) -> None:
    """Cuts of any ranks (overlapping, empty, naming servers that are not ranks) load a step
    with the bytes that leave them and the bytes that enter them, each at the cut's rate."""
    s = build(ranks(2**log_n), size, 2)  # type: ignore[call-arg]
    latency = lambda a, b: 1e-7  # noqa: E731
    assert s.completion_bound_s(4e11, latency, cuts) == per_step_bound(s, 4e11, latency, cuts)


@given(st.integers(1, 8), st.integers(0, 10**7), st.integers(1, 4), st.sampled_from([1e9, 4e11]))
def test_a_trees_table_bound_is_its_per_step_bound(n: int, size: int, qps: int, bps: float) -> None:
    """The double binary tree over any number of ranks (the others' tests take powers of two)."""
    s = tree_all_reduce(ranks(n), size, qps)
    far = {r: i * 3e-7 for i, r in enumerate(RANKS)}
    latency = lambda a, b: far[a] + far[b]  # noqa: E731
    assert s.completion_bound_s(bps, latency) == per_step_bound(s, bps, latency)


@pytest.mark.parametrize("build", BUILDERS)
def test_the_table_holds_the_steps_rows(build: Builder) -> None:
    s = build(ranks(4), 1000)
    t = s.table
    bounds = t.bounds()
    assert len(bounds) == len(s.steps) + 1 and bounds[-1] == len(t)
    for k, step in enumerate(s.steps):
        rows = range(bounds[k], bounds[k + 1])
        assert [(f.src, f.dst, f.qp, f.bytes) for f in step] == [
            (s.ranks[t.src[r]], s.ranks[t.dst[r]], int(t.qp[r]), int(t.bytes[r])) for r in rows
        ]


def test_queue_pairs_in_order_of_first_use() -> None:
    s = ring_all_reduce(ranks(3), 2, qps_per_peer=2)  # chunks 1, 1, 0: qp 1 never carries
    assert s.queue_pairs() == [("s0", "s1", 0), ("s1", "s2", 0), ("s2", "s0", 0)]
    hd = halving_doubling_all_reduce(ranks(4), 4000)
    assert hd.queue_pairs()[:2] == [("s0", "s2", 0), ("s1", "s3", 0)]
    assert len(hd.queue_pairs()) == 8  # each rank's 2 partners


def test_a_cut_slower_than_the_nics_makes_the_bound() -> None:
    """Ring a-b-c-d: each step sends one chunk out of {a, b} (b to c) and one into it (d to
    a); over 50 Gb/s shared by a and b that takes twice a 100 Gb/s NIC's time."""
    s = ring_all_reduce(["a", "b", "c", "d"], 4_000_000)
    alone = s.completion_bound_s(100e9)
    assert s.completion_bound_s(100e9, cuts=[({"a", "b"}, 50e9)]) == pytest.approx(2 * alone)
    assert s.completion_bound_s(100e9, cuts=[({"a", "b"}, 400e9)]) == alone


@given(
    n=st.integers(3, 13),
    message=st.integers(52, 100_000),
    picked=st.sets(st.integers(0, 12), min_size=1),
    bps=st.sampled_from([1e9, 5e9, 2e10]),
)
def test_a_ring_told_by_its_shape_bounds_its_cuts_as_its_schedule(
    n: int, message: int, picked: set[int], bps: float
) -> None:
    names = [f"s{i}" for i in range(n)]
    members = {names[i % n] for i in picked}
    assume(len(members) < n)
    for build in (ring_all_reduce, ring_all_gather):
        shape = ring_shape(build, names, message, 2)
        assert shape is not None
        cut = [(members, bps)]
        expected = build(names, message, 2).completion_bound_s(8e9, 1e-6, cut)
        assert shape.completion_bound_s(8e9, 1e-6, cut) == pytest.approx(expected, rel=1e-12)
