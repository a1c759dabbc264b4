"""NCCL-style collective schedules, their completion-time bounds and nccl-tests bandwidths.

A schedule is a list of steps; a step is a list of flows that run at the same time, and
a step starts when the previous one is done. Ranks are server names; each rank sends
over one link of the given rate through a non-blocking fabric.

>>> s = ring_all_reduce(["a", "b", "c", "d"], 4_000_000)
>>> len(s.steps), s.sent_by("a")
(6, 6000000)
>>> t = s.completion_bound_s(link_bps=100e9)
>>> round(t * 1e6), round(s.busbw(t) * 8 / 1e9)
(480, 100)
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property

import numpy as np
import numpy.typing as npt

Cut = tuple[Collection[str], float]
"""Ranks that share links (a rack behind its leaves' uplinks) and those links' bandwidth, b/s."""


class Collective(StrEnum):
    """Collective operations nccl-tests measures."""

    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_TO_ALL = "all_to_all"


def bus_factor(kind: Collective, n: int) -> float:
    """nccl-tests busbw/algbw factor for ``n`` ranks.

    >>> bus_factor(Collective.ALL_REDUCE, 8), bus_factor(Collective.ALL_TO_ALL, 8)
    (1.75, 0.875)
    """
    if n < 1:
        raise ValueError("need at least one rank")
    if kind is Collective.ALL_REDUCE:
        return 2 * (n - 1) / n
    return (n - 1) / n


def algbw(message_bytes: int, seconds: float) -> float:
    """Algorithm bandwidth in bytes/s: message size over time."""
    return message_bytes / seconds


def busbw(kind: Collective, n: int, message_bytes: int, seconds: float) -> float:
    """Bus bandwidth in bytes/s, comparable with one rank's link bandwidth.

    >>> busbw(Collective.ALL_GATHER, 4, 1_000_000, 0.001)
    750000000.0
    """
    return algbw(message_bytes, seconds) * bus_factor(kind, n)


def flow_id(src: str, dst: str, qp: int) -> int:
    """32-bit flow id of the ``qp``-th QP from ``src`` to ``dst`` (distinct across senders).

    >>> flow_id("server1", "server2", 0), flow_id("server1", "server2", 1)
    (834281568, 1186795766)
    """
    return zlib.crc32(f"{src}>{dst}/{qp}".encode())


@dataclass(frozen=True)
class Flow:
    """``bytes`` from ``src`` to ``dst`` on the ``qp``-th queue pair between them."""

    src: str
    dst: str
    bytes: int
    qp: int = 0


Step = tuple[Flow, ...]
I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class StepTable:
    """A schedule's flows as columns, a row each, in step order: ``src`` and ``dst`` index
    the schedule's ranks. A ring over n ranks has 2(n-1) x n x QPs flows; as columns they
    are built and read without a Python object each."""

    n_steps: int
    step: I32
    src: I32
    dst: I32
    qp: I32
    bytes: I64

    def __len__(self) -> int:
        return len(self.step)

    def bounds(self) -> list[int]:
        """Where each step's rows start, and the end: step k is rows [b[k], b[k + 1])."""
        found: list[int] = np.searchsorted(self.step, np.arange(self.n_steps + 1)).tolist()
        return found

    @staticmethod
    def of(ranks: Sequence[str], steps: Sequence[Step]) -> StepTable:
        """The table of steps of `Flow`s."""
        index = {r: i for i, r in enumerate(ranks)}
        rows = [
            (k, index[f.src], index[f.dst], f.qp, f.bytes) for k, s in enumerate(steps) for f in s
        ]
        step, src, dst, qp, nbytes = np.array(rows, np.int64).reshape(-1, 5).T
        i32 = np.int32
        return StepTable(
            len(steps),
            step.astype(i32),
            src.astype(i32),
            dst.astype(i32),
            qp.astype(i32),
            nbytes.copy(),
        )


class _Bandwidths:
    """nccl-tests' bandwidths of a collective's run."""

    kind: Collective
    ranks: tuple[str, ...]
    message_bytes: int

    def algbw(self, seconds: float) -> float:
        """Algorithm bandwidth (bytes/s) of a run that took ``seconds``."""
        return algbw(self.message_bytes, seconds)

    def busbw(self, seconds: float) -> float:
        """Bus bandwidth (bytes/s) of a run that took ``seconds``."""
        return busbw(self.kind, len(self.ranks), self.message_bytes, seconds)


@dataclass(frozen=True, eq=False)
class Schedule(_Bandwidths):
    """Steps of one collective over ``ranks``; ``message_bytes`` is nccl-tests' size S."""

    kind: Collective
    algorithm: str
    ranks: tuple[str, ...]
    message_bytes: int
    table: StepTable

    @cached_property
    def steps(self) -> tuple[Step, ...]:
        """The steps as `Flow`s (built on first use: the table is what schedules are read as)."""
        t, names = self.table, self.ranks
        rows = zip(t.src.tolist(), t.dst.tolist(), t.bytes.tolist(), t.qp.tolist(), strict=True)
        flows = [Flow(names[s], names[d], b, qp) for s, d, b, qp in rows]
        b = self.table.bounds()
        return tuple(tuple(flows[b[k] : b[k + 1]]) for k in range(t.n_steps))

    def sent_by(self, rank: str) -> int:
        """Bytes ``rank`` sends over the whole schedule."""
        t = self.table
        return int(t.bytes[t.src == self.ranks.index(rank)].sum())

    def queue_pairs(self) -> list[tuple[str, str, int]]:
        """Each (src, dst, qp) that carries bytes, once, in order of first use."""
        t, n = self.table, len(self.ranks)
        keys = (t.src.astype(np.int64) * n + t.dst) * (int(t.qp.max(initial=0)) + 1) + t.qp
        _, first = np.unique(keys, return_index=True)
        first.sort()
        names = self.ranks
        rows = zip(t.src[first].tolist(), t.dst[first].tolist(), t.qp[first].tolist(), strict=True)
        return [(names[s], names[d], qp) for s, d, qp in rows]

    def completion_bound_s(
        self,
        link_bps: float,
        step_latency_s: float | Callable[[str, str], float] = 0.0,
        cuts: Sequence[Cut] = (),
    ) -> float:
        """Lower bound on the run time: per step, the busiest rank's egress or ingress
        bytes at ``link_bps``, or the busiest cut's (the bytes a step sends out of or into a
        set of ranks, over the bandwidth of the links that set shares: a rack's uplinks),
        whichever takes longer, plus ``step_latency_s``: seconds per step, or per (src, dst)
        pair (a step then waits for its slowest pair's)."""
        t, n = self.table, len(self.ranks)
        cells = t.n_steps * n
        weights = t.bytes.astype(np.float64)  # exact: sums below 2**53
        egress = np.bincount(t.step.astype(np.int64) * n + t.src, weights, cells)
        ingress = np.bincount(t.step.astype(np.int64) * n + t.dst, weights, cells)
        busiest = np.maximum(egress, ingress).reshape(t.n_steps, n).max(axis=1, initial=0.0)
        busiest = busiest * 8 / link_bps
        if cuts:  # a cut reads its own ranks' rows, not every row
            index = {name: i for i, name in enumerate(self.ranks)}
            by_src, by_dst = np.argsort(t.src, kind="stable"), np.argsort(t.dst, kind="stable")
            src_at = np.searchsorted(t.src[by_src], np.arange(n + 1))
            dst_at = np.searchsorted(t.dst[by_dst], np.arange(n + 1))
        for members, bps in cuts:
            ids = sorted(index[m] for m in members if m in index)
            inside = np.zeros(n, bool)
            inside[ids] = True
            for by, at, other in ((by_src, src_at, t.dst), (by_dst, dst_at, t.src)):
                rows = np.concatenate([by[at[i] : at[i + 1]] for i in ids] or [by[:0]])
                rows = rows[~inside[other[rows]]]  # leaving the cut, or entering it
                load = np.bincount(t.step[rows], weights[rows], t.n_steps)
                busiest = np.maximum(busiest, load * 8 / bps)
        if callable(step_latency_s):
            pairs, pair = np.unique(t.src.astype(np.int64) * n + t.dst, return_inverse=True)
            names = self.ranks
            seconds = np.array(
                [step_latency_s(names[p // n], names[p % n]) for p in pairs.tolist()]
            )
            latency = np.full(t.n_steps, -np.inf)
            np.maximum.at(latency, t.step, seconds[pair.reshape(-1)])
            latencies = np.where(np.isinf(latency), 0.0, latency).tolist()
        else:
            latencies = [step_latency_s] * t.n_steps
        total = 0.0
        for latency_s, seconds in zip(latencies, busiest.tolist(), strict=True):
            total += latency_s + seconds
        return total


def split(total: int, parts: int) -> list[int]:
    """``total`` in ``parts`` near-equal integers, larger ones first.

    >>> split(10, 4)
    [3, 3, 2, 2]
    """
    base, extra = divmod(total, parts)
    return [base + (k < extra) for k in range(parts)]


def _flows(src: str, dst: str, nbytes: int, qps: int) -> list[Flow]:
    return [Flow(src, dst, b, qp) for qp, b in enumerate(split(nbytes, qps)) if b]


def _check(ranks: Sequence[str], message_bytes: int, qps: int) -> tuple[str, ...]:
    if not ranks or len(set(ranks)) != len(ranks):
        raise ValueError("ranks must be a non-empty list of distinct names")
    if message_bytes < 0 or qps < 1:
        raise ValueError("need message_bytes >= 0 and qps_per_peer >= 1")
    return tuple(ranks)


def _ring(
    kind: Collective, ranks: Sequence[str], message_bytes: int, qps: int, n_steps: int
) -> Schedule:
    """In step k rank i sends chunk (i - k) mod n to rank i + 1, split over the QPs (the
    larger parts first; a QP with no bytes sends nothing)."""
    names = _check(ranks, message_bytes, qps)
    n = len(names)
    chunks = np.array(split(message_bytes, n), np.int64)
    step = np.repeat(np.arange(n_steps, dtype=np.int32), n)
    rank = np.tile(np.arange(n, dtype=np.int32), n_steps)
    base, extra = np.divmod(chunks[(rank - step) % n], qps)
    qp = np.arange(qps, dtype=np.int32)
    parts = (base[:, None] + (qp[None, :] < extra[:, None])).reshape(-1)
    keep = parts > 0
    table = StepTable(
        n_steps,
        np.repeat(step, qps)[keep],
        np.repeat(rank, qps)[keep],
        np.repeat((rank + 1) % n, qps)[keep].astype(np.int32),
        np.tile(qp, n * n_steps)[keep],
        parts[keep],
    )
    return Schedule(kind, "ring", names, message_bytes, table)


def ring_all_reduce(ranks: Sequence[str], message_bytes: int, qps_per_peer: int = 1) -> Schedule:
    """Ring All-Reduce: reduce-scatter then all-gather, 2(n-1) steps of S/n per rank."""
    n_steps = 2 * (len(ranks) - 1)
    return _ring(Collective.ALL_REDUCE, ranks, message_bytes, qps_per_peer, n_steps)


def ring_all_gather(ranks: Sequence[str], message_bytes: int, qps_per_peer: int = 1) -> Schedule:
    """Ring All-Gather of S bytes in total: n-1 steps of S/n per rank.

    >>> len(ring_all_gather(["a", "b", "c"], 300).steps)
    2
    """
    n_steps = len(ranks) - 1
    return _ring(Collective.ALL_GATHER, ranks, message_bytes, qps_per_peer, n_steps)


def ring_reduce_scatter(
    ranks: Sequence[str], message_bytes: int, qps_per_peer: int = 1
) -> Schedule:
    """Ring Reduce-Scatter of S bytes per rank: n-1 steps of S/n per rank."""
    n_steps = len(ranks) - 1
    return _ring(Collective.REDUCE_SCATTER, ranks, message_bytes, qps_per_peer, n_steps)


@dataclass(frozen=True)
class RingShape(_Bandwidths):
    """A ring schedule told by its shape, not a row per step and flow (O(ranks x QPs)): in
    step k rank i sends chunk (i - k) mod n to rank i + 1 over its QPs, `n_steps` steps; every
    QP of every rank carries bytes (each chunk >= `qps` bytes)."""

    kind: Collective
    ranks: tuple[str, ...]
    message_bytes: int
    qps: int
    n_steps: int

    @cached_property
    def chunks(self) -> list[int]:
        return split(self.message_bytes, len(self.ranks))

    def queue_pairs(self) -> list[tuple[str, str, int]]:
        """As `Schedule.queue_pairs` of the same ring."""
        r, n = self.ranks, len(self.ranks)
        return [(r[i], r[(i + 1) % n], qp) for i in range(n) for qp in range(self.qps)]

    def completion_bound_s(
        self,
        link_bps: float,
        step_latency_s: float | Callable[[str, str], float] = 0.0,
        cuts: Sequence[Cut] = (),
    ) -> float:
        """As `Schedule.completion_bound_s` of the same ring: every step moves each chunk
        once between neighbours, so the busiest rank moves the largest chunk; a cut's load in
        step k is the chunks (i - k) mod n that ranks i send across it to i + 1."""
        r, n = self.ranks, len(self.ranks)
        latency = (
            max(step_latency_s(r[i], r[(i + 1) % n]) for i in range(n))
            if callable(step_latency_s)
            else step_latency_s
        )
        busiest = np.full(self.n_steps, 8 * float(max(self.chunks)) / link_bps)
        chunks = np.array(self.chunks, np.float64)
        steps = np.arange(self.n_steps)[:, None]
        for members, bps in cuts:
            inside = np.isin(np.array(r), list(members))
            for crossing in (inside & ~np.roll(inside, -1), ~inside & np.roll(inside, -1)):
                senders = np.flatnonzero(crossing)
                load = chunks[(senders[None, :] - steps) % n].sum(axis=1)
                busiest = np.maximum(busiest, 8 * load / bps)
        return float(busiest.sum() + latency * self.n_steps)


RING_STEPS: dict[Callable[..., Schedule], tuple[Collective, Callable[[int], int]]] = {}
"""The ring builders, with their collective and their number of steps for n ranks."""


def ring_shape(
    build: Callable[..., Schedule], ranks: Sequence[str], message_bytes: int, qps: int
) -> RingShape | None:
    """The shape of `build`'s schedule when it is a ring in which every QP carries bytes
    (None otherwise: build the schedule).

    >>> s = ring_shape(ring_all_reduce, ["a", "b", "c"], 300, 2)
    >>> s.n_steps, s.chunks, s.completion_bound_s(8e9) == ring_all_reduce(
    ...     ["a", "b", "c"], 300, 2).completion_bound_s(8e9)
    (4, [100, 100, 100], True)
    """
    found = RING_STEPS.get(build)
    names = _check(ranks, message_bytes, qps)
    if found is None or len(names) < 2 or message_bytes // len(names) < qps:
        return None
    kind, steps = found
    return RingShape(kind, names, message_bytes, qps, steps(len(names)))


def halving_doubling_all_reduce(
    ranks: Sequence[str], message_bytes: int, qps_per_peer: int = 1
) -> Schedule:
    """Rabenseifner All-Reduce for a power-of-two number of ranks.

    Recursive halving (reduce-scatter: S/2, S/4, ... S/n to partners at distance n/2,
    n/4, ... 1) then recursive doubling (all-gather, the same in reverse): 2·log2(n)
    steps and 2(n-1)/n·S per rank, like the ring, in far fewer steps.

    >>> s = halving_doubling_all_reduce(["a", "b", "c", "d"], 4000)
    >>> [[f.bytes for f in step if f.src == "a"] for step in s.steps]
    [[2000], [1000], [1000], [2000]]
    """
    names = _check(ranks, message_bytes, qps_per_peer)
    n = len(names)
    if n & (n - 1):
        raise ValueError("halving-doubling needs a power-of-two number of ranks")
    chunks = split(message_bytes, n)
    segment = [(0, n)] * n  # chunk range [lo, hi) each rank is responsible for
    halving: list[Step] = []
    doubling: list[Step] = []
    distance = n // 2
    while distance:
        step_out: list[Flow] = []
        step_back: list[Flow] = []
        for i in range(n):
            lo, hi = segment[i]
            mid = (lo + hi) // 2
            keep, give = ((lo, mid), (mid, hi)) if not i & distance else ((mid, hi), (lo, mid))
            peer = names[i ^ distance]
            step_out += _flows(names[i], peer, sum(chunks[give[0] : give[1]]), qps_per_peer)
            step_back += _flows(names[i], peer, sum(chunks[keep[0] : keep[1]]), qps_per_peer)
            segment[i] = keep
        halving.append(tuple(step_out))
        doubling.append(tuple(step_back))
        distance //= 2
    steps = (*halving, *reversed(doubling))
    table = StepTable.of(names, steps)
    return Schedule(Collective.ALL_REDUCE, "halving_doubling", names, message_bytes, table)


def all_to_all(ranks: Sequence[str], message_bytes: int, qps_per_peer: int = 1) -> Schedule:
    """All-to-All: one step in which every rank sends S/n to each other rank.

    >>> s = all_to_all(["a", "b", "c", "d"], 4000, qps_per_peer=2)
    >>> len(s.steps), len(s.steps[0]), s.sent_by("a")
    (1, 24, 3000)
    """
    names = _check(ranks, message_bytes, qps_per_peer)
    chunks = split(message_bytes, len(names))
    step = tuple(
        flow
        for src in names
        for j, dst in enumerate(names)
        if dst != src
        for flow in _flows(src, dst, chunks[j], qps_per_peer)
    )
    table = StepTable.of(names, (step,))
    return Schedule(Collective.ALL_TO_ALL, "all_to_all", names, message_bytes, table)


Build = Callable[[Sequence[str], int, int], Schedule]


def beside(names: Sequence[str], parts: Sequence[Schedule]) -> StepTable:
    """Schedules over some of `names` each, side by side: step k of each is step k of the
    whole."""
    index = {r: i for i, r in enumerate(names)}
    tables = [p.table for p in parts]
    at = [np.array([index[r] for r in p.ranks], np.int32) for p in parts]
    step = np.concatenate([t.step for t in tables])
    rows = np.argsort(step, kind="stable")
    return StepTable(
        max((t.n_steps for t in tables), default=0),
        step[rows],
        np.concatenate([a[t.src] for a, t in zip(at, tables, strict=True)])[rows],
        np.concatenate([a[t.dst] for a, t in zip(at, tables, strict=True)])[rows],
        np.concatenate([t.qp for t in tables])[rows],
        np.concatenate([t.bytes for t in tables])[rows],
    )


def then(tables: Sequence[StepTable]) -> StepTable:
    """Step tables over the same ranks one after the other."""
    offsets = np.cumsum([0, *(t.n_steps for t in tables)])
    return StepTable(
        int(offsets[-1]),
        np.concatenate([t.step + o for t, o in zip(tables, offsets.tolist(), strict=False)]),
        np.concatenate([t.src for t in tables]),
        np.concatenate([t.dst for t in tables]),
        np.concatenate([t.qp for t in tables]),
        np.concatenate([t.bytes for t in tables]),
    )


def rail_local(
    build: Build, ranks: Sequence[str], rails: Sequence[int], message_bytes: int, qps: int = 1
) -> Schedule:
    """``build``'s schedule run once per rail, over the ranks of that rail, side by side:
    NCCL's rail-aligned channels on a rail-optimized fabric (``NCCL_CROSS_NIC=0``: a ring
    leaves and enters every server on the same NIC), the S bytes split evenly over the rails
    (the NVLink part inside each server is not on the network). ``rails[i]`` is the rail of
    ``ranks[i]``; step k of every rail's schedule is step k of the whole.

    >>> s = rail_local(ring_all_reduce, ["a0", "a1", "b0", "b1"], [0, 1, 0, 1], 4000)
    >>> sorted({(f.src, f.dst) for step in s.steps for f in step}), s.sent_by("a0")
    ([('a0', 'b0'), ('a1', 'b1'), ('b0', 'a0'), ('b1', 'a1')], 2000)
    """
    names = _check(ranks, message_bytes, qps)
    order = sorted(set(rails))
    parts = [
        build([r for r, k in zip(names, rails, strict=True) if k == rail], share, qps)
        for rail, share in zip(order, split(message_bytes, len(order)), strict=True)
    ]
    table = beside(names, parts)
    return Schedule(parts[0].kind, parts[0].algorithm, names, message_bytes, table)


RING_STEPS.update(
    {
        ring_all_reduce: (Collective.ALL_REDUCE, lambda n: 2 * (n - 1)),
        ring_all_gather: (Collective.ALL_GATHER, lambda n: n - 1),
        ring_reduce_scatter: (Collective.REDUCE_SCATTER, lambda n: n - 1),
    }
)
