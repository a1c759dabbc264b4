"""NCCL's double binary tree All-Reduce as a step schedule (`traffic.collectives`).

The trees are NCCL's (``ncclGetBtree`` / ``ncclGetDtree``, ``src/graph/trees.cc``, NCCL
2.30.7): tree 0 a binary tree over ranks 0..n-1 whose leaves are the odd ranks, tree 1 the
same tree mirrored (n even: rank r in the place of n-1-r) or shifted by one (n odd), so
each rank is a leaf in one tree and interior in the other (n odd: rank 0 interior in both).
Each tree reduces half of the S bytes up to its root and broadcasts it back down,
pipelined in chunks of NCCL's Simple step (`PIPELINE_CHUNK`): chunk c leaves a rank at
depth d (of a tree of depth D) for its parent in step c + D - d and, reduced, leaves the
parent for the rank in step c + D + d - 1. A rank's send in a step needs only what it
received in the step before.

>>> s = tree_all_reduce(["a", "b", "c", "d"], 4000)
>>> len(s.steps), s.sent_by("a") + s.sent_by("d"), sorted(s.sent_by(r) for r in "abcd")
(4, 8000, [4000, 4000, 8000, 8000])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from traffic.collectives import Collective, Flow, Schedule, StepTable, split

PIPELINE_CHUNK = 1 << 19
"""Bytes a tree moves per pipeline step: NCCL's DEFAULT_BUFFSIZE (4 MiB) over NCCL_STEPS (8)."""
MAX_CHUNKS = 16
"""Pipeline chunks per tree at most (larger halves make larger chunks), so that a schedule's
rows stay O(ranks) per iteration."""


def btree(n: int, rank: int) -> int:
    """``rank``'s parent in NCCL's binary tree of ``n`` ranks (-1: the root).

    >>> [btree(13, r) for r in (0, 8, 4, 12, 2, 1, 3)]
    [-1, 0, 8, 8, 4, 2, 2]
    """
    if rank == 0:
        return -1
    bit = 1
    while not bit & rank:
        bit <<= 1
    up = (rank ^ bit) | (bit << 1)
    return up if up < n else rank ^ bit


def parents(n: int) -> tuple[list[int], list[int]]:
    """Each rank's parent (-1 at the root) in NCCL's two trees of ``n`` ranks."""
    first = [btree(n, r) for r in range(n)]
    if n % 2:
        moved = [btree(n, (r - 1) % n) for r in range(n)]
        return first, [-1 if u < 0 else (u + 1) % n for u in moved]
    mirrored = [btree(n, n - 1 - r) for r in range(n)]
    return first, [-1 if u < 0 else n - 1 - u for u in mirrored]


def depths(parent: Sequence[int]) -> list[int]:
    """Each rank's distance from the root."""
    found: list[int] = []
    for r in range(len(parent)):
        d, p = 0, parent[r]
        while p >= 0:
            d, p = d + 1, parent[p]
        found.append(d)
    return found


def chunks(half: int) -> list[int]:
    """A tree's bytes as pipeline chunks of `PIPELINE_CHUNK` (at most `MAX_CHUNKS`)."""
    return split(half, max(1, min(MAX_CHUNKS, -(-half // PIPELINE_CHUNK))))


class Send(NamedTuple):
    """One tree send: in `step`, `bytes` of chunk `chunk` of tree `tree` from `src` to `dst`."""

    step: int
    src: int
    dst: int
    bytes: int
    tree: int
    chunk: int


def sends(n: int, message_bytes: int) -> tuple[int, list[Send]]:
    """The steps of the double binary tree All-Reduce over ``n`` ranks and its sends, in
    step order."""
    found: list[Send] = []
    n_steps = 0
    for tree, (parent, half) in enumerate(zip(parents(n), split(message_bytes, 2), strict=True)):
        depth = depths(parent)
        top = max(depth)
        parts = chunks(half)
        n_steps = max(n_steps, len(parts) + 2 * top - 1) if top else n_steps
        for r, p in enumerate(parent):
            if p < 0:
                continue
            for c, size in enumerate(parts):
                found.append(Send(c + top - depth[r], r, p, size, tree, c))
                found.append(Send(c + top + depth[r] - 1, p, r, size, tree, c))
    found.sort(key=lambda send: send.step)
    return n_steps, found


def tree_all_reduce(ranks: Sequence[str], message_bytes: int, qps_per_peer: int = 1) -> Schedule:
    """Double binary tree All-Reduce: each tree reduces and broadcasts half of S, chunk by
    chunk, in C + 2D - 1 steps for C chunks and depth D. A rank sends and receives S/2 each
    way as a leaf and 3 x S/2 where interior with two children (2S in all, as a ring's
    2(n-1)/n x S); a root has one child. Each send's bytes are split over the QPs."""
    if not ranks or len(set(ranks)) != len(ranks) or message_bytes < 0 or qps_per_peer < 1:
        raise ValueError("need distinct ranks, message_bytes >= 0 and qps_per_peer >= 1")
    names = tuple(ranks)
    n_steps, found = sends(len(names), message_bytes)
    steps: list[list[Flow]] = [[] for _ in range(n_steps)]
    for send in found:
        steps[send.step] += [
            Flow(names[send.src], names[send.dst], b, qp)
            for qp, b in enumerate(split(send.bytes, qps_per_peer))
            if b
        ]
    table = StepTable.of(names, [tuple(s) for s in steps])
    return Schedule(Collective.ALL_REDUCE, "tree", names, message_bytes, table)
