"""The hierarchical (two-level) ring All-Reduce: steps, bytes inside and across groups."""

import pytest

from traffic.collectives import Schedule, ring_all_reduce
from traffic.hierarchical import hierarchical_ring_all_reduce


def layout(groups: int, per: int) -> tuple[list[str], list[int]]:
    """`groups` racks of `per` ranks, rack-major."""
    return [f"r{g}.{i}" for g in range(groups) for i in range(per)], [
        g for g in range(groups) for _ in range(per)
    ]


@pytest.mark.parametrize(("groups", "per"), [(1, 4), (4, 1), (2, 2), (3, 4), (4, 3)])
def test_three_rings_inside_across_inside(groups: int, per: int) -> None:
    names, of = layout(groups, per)
    size = 12 * 12 * 1000  # divisible by every r and G here
    s = hierarchical_ring_all_reduce(names, of, size, 2)
    assert len(s.steps) == 2 * (per - 1) + 2 * (groups - 1)
    group = dict(zip(names, of, strict=True))
    local = {n: i % per for i, n in enumerate(names)}
    for k, step in enumerate(s.steps):
        crossing = {group[f.src] != group[f.dst] for f in step}
        if per - 1 <= k < per - 1 + 2 * (groups - 1):
            assert crossing == {True}  # the middle ring: across, same local index
            assert all(local[f.src] == local[f.dst] for f in step)
        else:
            assert crossing == {False}
    for r in names:
        sent = 2 * (per - 1) * size // per + 2 * (groups - 1) * size // per // groups
        assert s.sent_by(r) == sent
        out = sum(f.bytes for st in s.steps for f in st if f.src == r and group[f.dst] != group[r])
        assert out == 2 * (groups - 1) * (size // per) // groups


def test_fewer_bytes_cross_the_spines_than_an_interleaved_ring() -> None:
    names, of = layout(4, 4)
    group = dict(zip(names, of, strict=True))
    interleaved = [names[g * 4 + i] for i in range(4) for g in range(4)]
    flat = ring_all_reduce(interleaved, 1 << 20)
    two = hierarchical_ring_all_reduce(names, of, 1 << 20)

    def across(s: Schedule) -> int:
        return sum(f.bytes for st in s.steps for f in st if group[f.src] != group[f.dst])

    # 16 ranks: 2 x 15/16 x S each across, against 2 x 3/4 x S/4 (only a rack's chunk)
    assert (across(flat), across(two)) == (30 << 20, 6 << 20)


def test_groups_of_different_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="as many in each group"):
        hierarchical_ring_all_reduce(["a", "b", "c"], [0, 0, 1], 1000)
