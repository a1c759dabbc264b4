"""NCCL's double binary tree All-Reduce and NCCL's choice between ring and tree."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from traffic import trees, tuning
from traffic.collectives import Collective

NAMES = [f"s{i}" for i in range(64)]


def children(parent: list[int]) -> list[list[int]]:
    found: list[list[int]] = [[] for _ in parent]
    for r, p in enumerate(parent):
        if p >= 0:
            found[p].append(r)
    return found


def test_the_trees_are_nccls_pictures() -> None:
    """trees.cc draws 13 ranks shifted (odd) and 12 ranks mirrored (even)."""
    first, shifted = trees.parents(13)
    assert [first[r] for r in (8, 4, 12, 2, 6, 10, 1, 3, 11)] == [0, 8, 8, 4, 4, 12, 2, 2, 10]
    assert first[0] == -1 and shifted[1] == -1
    assert [shifted[r] for r in (9, 5, 0, 3, 11, 2)] == [1, 9, 9, 5, 0, 3]
    _, mirrored = trees.parents(12)
    assert mirrored[11] == -1 and [mirrored[r] for r in (3, 7, 9, 1, 0, 10)] == [11, 3, 7, 3, 1, 9]


@pytest.mark.parametrize("n", range(2, 65))
def test_each_rank_is_a_leaf_in_one_tree_and_interior_in_the_other(n: int) -> None:
    one, two = (children(p) for p in trees.parents(n))
    for p in trees.parents(n):
        assert sorted(p).count(-1) == 1  # one root, every other rank reaches it
        assert all(len(c) <= 2 for c in children(p))
        assert max(trees.depths(p)) <= n.bit_length()
    interior_in_both = [r for r in range(n) if one[r] and two[r]]
    leaf_in_both = [r for r in range(n) if not one[r] and not two[r]]
    assert leaf_in_both == []
    assert interior_in_both == ([0] if n % 2 else [])  # the shifted tree's price (trees.cc)


@given(st.integers(1, 40), st.integers(0, 20_000_000))
def test_every_rank_ends_with_every_ranks_contribution(n: int, size: int) -> None:
    """Play the sends in step order: a send carries what its source held at the end of the
    step before; in the end every rank holds every rank's part of every chunk."""
    n_steps, sends = trees.sends(n, size)
    held = {(r, s.tree, s.chunk): {r} for s in sends for r in range(n)}
    for k in range(n_steps):
        now = [s for s in sends if s.step == k]
        before = {key: set(v) for key, v in held.items()}
        for s in now:
            held[s.dst, s.tree, s.chunk] |= before[s.src, s.tree, s.chunk]
    assert all(v == set(range(n)) for v in held.values())
    assert all(0 <= s.step < n_steps for s in sends)


@pytest.mark.parametrize("n", [2, 3, 8, 13, 49])
def test_bytes_per_rank(n: int) -> None:
    """S/2 per tree each way along each of its edges: a rank sends a half up to its parent
    and down to each child."""
    size = 8_000_000
    s = trees.tree_all_reduce(NAMES[:n], size, 2)
    for r in range(n):
        expected = sum(size // 2 * ((p[r] >= 0) + len(children(p)[r])) for p in trees.parents(n))
        assert s.sent_by(NAMES[r]) == expected
    assert sum(s.sent_by(r) for r in s.ranks) == 2 * (n - 1) * size
    assert s.kind is Collective.ALL_REDUCE and s.algorithm == "tree"


def test_a_pipeline_of_ncclss_simple_steps() -> None:
    """8 MB over 49 ranks: halves of 4 MB in 8 chunks of 512 KiB (NCCL's 4 MiB buffer over
    its 8 steps), trees 6 deep: 8 + 2 x 6 - 1 steps."""
    s = trees.tree_all_reduce(NAMES[:49], 8_000_000)
    assert len(s.steps) == 19
    assert max(f.bytes for step in s.steps for f in step) == 500_000
    big = trees.tree_all_reduce(NAMES[:4], 1 << 30)  # chunks grow past 16
    assert len(big.steps) == 16 + 2 * 2 - 1


def nccl_time_us(latency_us: float, bytes_per_us: float, size: int) -> float:
    return latency_us + size / bytes_per_us


def test_nccl_estimates_by_hand() -> None:
    """49 servers of 8 Hopper GPUs, 2 x 400G: tree LL128 and ring Simple worked out from
    tuning.cc's constants."""
    found = {(e.algorithm, e.protocol): e for e in tuning.estimates(49, 8, 2, 800, 8_000_000)}
    tree = found["tree", "LL128"]
    # latency 14.0 + 2 x (7 x 1.25 + log2i(49) x 8.5); bus 100 GB/s x 0.92 x 120/128, x 0.5,
    # x 0.8 (treeCorrectionFactor[LL128][log2i(8e6 / 64) = 16])
    assert tree.latency_us == pytest.approx(116.5)
    assert tree.bandwidth_gbytes == pytest.approx(100 * 0.92 * 120 / 128 * 0.5 * 0.8)
    assert tree.time_us == pytest.approx(nccl_time_us(116.5, 34_500, 8_000_000))
    ring = found["ring", "Simple"]
    # 782 steps, 96 of them between servers: (8.4 + 686 x 3.4 + 96 x 14) x 1.4 (plateau)
    assert ring.latency_us == pytest.approx((8.4 + 686 * 3.4 + 96 * 14) * 1.4)
    assert ring.bandwidth_gbytes == pytest.approx(100 * 392 / 782)


@pytest.mark.parametrize(
    ("nodes", "size", "algorithm", "protocol"),
    [
        (49, 8_000_000, "tree", "LL128"),  # the reference's All-Reduce
        (49, 1 << 16, "tree", "LL"),  # small: latency decides
        (2, 1 << 30, "ring", "Simple"),  # few servers, large: bandwidth decides
        (49, 1 << 32, "ring", "Simple"),
        (1024, 1 << 32, "tree", "Simple"),  # a ring's 2 x 1,023 network steps cost 40 ms
    ],
)
def test_nccl_choice(nodes: int, size: int, algorithm: str, protocol: str) -> None:
    picked = tuning.choice(nodes, 8, 2, 800, size)
    assert (picked.algorithm, picked.protocol) == (algorithm, protocol)
    assert picked.time_us == min(e.time_us for e in tuning.estimates(nodes, 8, 2, 800, size))


def test_nccl_choice_needs_two_servers() -> None:
    with pytest.raises(ValueError, match="two servers"):
        tuning.choice(1, 8, 2, 800, 1000)
