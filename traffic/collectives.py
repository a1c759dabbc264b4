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

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum


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


@dataclass(frozen=True)
class Schedule:
    """Steps of one collective over ``ranks``; ``message_bytes`` is nccl-tests' size S."""

    kind: Collective
    algorithm: str
    ranks: tuple[str, ...]
    message_bytes: int
    steps: tuple[Step, ...]

    def sent_by(self, rank: str) -> int:
        """Bytes ``rank`` sends over the whole schedule."""
        return sum(f.bytes for step in self.steps for f in step if f.src == rank)

    def completion_bound_s(
        self, link_bps: float, step_latency_s: float | Callable[[str, str], float] = 0.0
    ) -> float:
        """Lower bound on the run time: per step, the busiest rank's egress or ingress
        bytes at ``link_bps``, plus ``step_latency_s``: seconds per step, or per (src, dst)
        pair (a step then waits for its slowest pair's)."""
        total = 0.0
        for step in self.steps:
            load: dict[tuple[str, bool], int] = {}
            for f in step:
                load[f.src, True] = load.get((f.src, True), 0) + f.bytes
                load[f.dst, False] = load.get((f.dst, False), 0) + f.bytes
            if callable(step_latency_s):
                latency = max((step_latency_s(f.src, f.dst) for f in step), default=0.0)
            else:
                latency = step_latency_s
            total += latency + 8 * max(load.values(), default=0) / link_bps
        return total

    def algbw(self, seconds: float) -> float:
        """Algorithm bandwidth (bytes/s) of a run that took ``seconds``."""
        return algbw(self.message_bytes, seconds)

    def busbw(self, seconds: float) -> float:
        """Bus bandwidth (bytes/s) of a run that took ``seconds``."""
        return busbw(self.kind, len(self.ranks), self.message_bytes, seconds)


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
    """In step k rank i sends chunk (i - k) mod n to rank i + 1."""
    names = _check(ranks, message_bytes, qps)
    n = len(names)
    chunks = split(message_bytes, n)
    steps = tuple(
        tuple(
            flow
            for i in range(n)
            for flow in _flows(names[i], names[(i + 1) % n], chunks[(i - k) % n], qps)
        )
        for k in range(n_steps)
    )
    return Schedule(kind, "ring", names, message_bytes, steps)


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
    return Schedule(Collective.ALL_REDUCE, "halving_doubling", names, message_bytes, steps)


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
    return Schedule(Collective.ALL_TO_ALL, "all_to_all", names, message_bytes, (step,))
