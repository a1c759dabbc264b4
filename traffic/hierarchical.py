"""Hierarchical (two-level) ring All-Reduce as a step schedule (`traffic.collectives`).

The ranks come in groups of r (a leaf group: the servers of a rack), G groups. Three rings
one after the other: a ring Reduce-Scatter of S inside each group (r-1 steps; local rank i
then holds reduced chunk i+1 of the group's r chunks), a ring All-Reduce of that chunk
across the groups among the ranks of the same local index (2(G-1) steps, S/r per ring), and
a ring All-Gather of S inside each group (r-1 steps). A rank sends 2(r-1)/r x S inside its
group and 2(G-1)/G x S/r across groups: only S/r crosses the spines, where a flat ring over
interleaved ranks sends every chunk across them. This is the 2D all-reduce of Horovod's
``HOROVOD_HIERARCHICAL_ALLREDUCE`` and of Mikami et al., arXiv:1811.05233 (docs/traffic.md).

>>> s = hierarchical_ring_all_reduce(["a0", "a1", "b0", "b1"], [0, 0, 1, 1], 4000)
>>> len(s.steps), s.sent_by("a0"), sorted({(f.src, f.dst) for f in s.steps[1]})
(4, 6000, [('a0', 'b0'), ('a1', 'b1'), ('b0', 'a0'), ('b1', 'a1')])
"""

from __future__ import annotations

from collections.abc import Sequence

from traffic.collectives import (
    Collective,
    Schedule,
    beside,
    ring_all_gather,
    ring_all_reduce,
    ring_reduce_scatter,
    split,
    then,
)


def hierarchical_ring_all_reduce(
    ranks: Sequence[str], groups: Sequence[int], message_bytes: int, qps_per_peer: int = 1
) -> Schedule:
    """The two-level ring over `ranks`, `groups[i]` the group of ``ranks[i]`` (as many ranks
    in each group; a group's ranks in the order given)."""
    names = tuple(ranks)
    members: dict[int, list[str]] = {}
    for rank, group in zip(names, groups, strict=True):
        members.setdefault(group, []).append(rank)
    inside = list(members.values())
    r = len(inside[0]) if inside else 0
    if not names or len(set(names)) != len(names) or any(len(m) != r for m in inside):
        raise ValueError("hierarchical_ring needs distinct ranks, as many in each group")
    chunks = split(message_bytes, r)
    across = [
        ring_all_reduce([m[i] for m in inside], chunks[(i + 1) % r], qps_per_peer) for i in range(r)
    ]
    gather = [ring_all_gather(m[-1:] + m[:-1], message_bytes, qps_per_peer) for m in inside]
    table = then(
        [
            beside(names, [ring_reduce_scatter(m, message_bytes, qps_per_peer) for m in inside]),
            beside(names, across),
            beside(names, gather),
        ]
    )
    return Schedule(Collective.ALL_REDUCE, "hierarchical_ring", names, message_bytes, table)
