"""queues.json's series: kept as their changes by the simulator, read as every sample.

A run of thousands of ports and samples holds mostly queues that stay put: `queues.json` with
`"encoding": "changes"` lists, per `node:port` and queue (or PG), `[sample, bytes, sample,
bytes, ...]`: the bytes held from that sample on (0 before the first), over `samples` samples
(docs/observations.md). `dense` gives readers the series of every sample, as a file without
an encoding holds them: each a `Series`, a sequence read from the changes as it is iterated
or indexed, never held sample by sample (a 1,024-server run's 22,000 series of 1,050
samples took 1.3 s and 300 MB as lists); `peak` is its largest value from the changes.

>>> dense({"interval": 1e-5, "encoding": "changes", "samples": 5,
...        "queues": {"leaf1:Ethernet0": {"3": [1, 700, 3, 0]}}, "pgs": {}})
{'interval': 1e-05, 'queues': {'leaf1:Ethernet0': {'3': [0, 700, 700, 0, 0]}}, 'pgs': {}}
"""

from __future__ import annotations

import bisect
import itertools
import operator
from collections.abc import Iterator, Sequence
from typing import Any, overload

from twin.errors import InputError


def dense(data: Any, where: str = "queues.json") -> Any:
    """`data` (a parsed queues.json) with every series as one value per sample; a file
    without an encoding as it is."""
    if not isinstance(data, dict) or data.get("encoding") is None:
        return data
    if data["encoding"] != "changes":
        raise InputError(where, "encoding", f"{data['encoding']!r} is not 'changes'")
    samples = data.get("samples")
    if not isinstance(samples, int) or samples < 0:
        raise InputError(where, "samples", "not a count of samples")
    out: dict[str, Any] = {"interval": data.get("interval")}
    for kind in ("queues", "pgs"):
        ports = data.get(kind, {})
        if not isinstance(ports, dict):
            raise InputError(where, kind, "not series by node:port")
        out[kind] = {
            port: {
                key: _series(flat, samples, f"{kind}.{port}.{key}", where)
                for key, flat in by.items()
            }
            for port, by in ports.items()
        }
    return out


class Series(Sequence[int]):
    """The bytes of every sample of a series held as its changes (sample, bytes)."""

    __slots__ = ("_at", "_samples", "_values")

    def __init__(self, at: list[int], values: list[int], samples: int) -> None:
        self._at, self._values, self._samples = at, values, samples

    def __len__(self) -> int:
        return self._samples

    def __iter__(self) -> Iterator[int]:
        at = self._at
        lengths = map(operator.sub, [*at[1:], self._samples], at)
        changes = itertools.chain.from_iterable(map(itertools.repeat, self._values, lengths))
        return itertools.chain(itertools.repeat(0, at[0] if at else self._samples), changes)

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> list[int]: ...

    def __getitem__(self, index: int | slice) -> int | list[int]:
        if isinstance(index, slice):
            return list(self)[index]
        i = operator.index(index)
        if not -self._samples <= i < self._samples:
            raise IndexError("sample out of range")
        k = bisect.bisect_right(self._at, i % self._samples) - 1
        return self._values[k] if k >= 0 else 0

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Series | list | tuple):
            return len(self) == len(other) and all(map(operator.eq, self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to lists, which are not hashable

    def __repr__(self) -> str:
        return repr(list(self))

    @property
    def peak(self) -> int:
        """The largest value (0 for no sample)."""
        zero = [0] if not self._at or self._at[0] > 0 else []
        return max([*zero, *self._values]) if self._samples else 0


def peak(series: Sequence[int]) -> int:
    """The largest value of a series (`Series` or list; 0 for no sample)."""
    return series.peak if isinstance(series, Series) else max(series, default=0)


def _series(flat: Any, samples: int, key: str, where: str) -> Series:
    """The series of [sample, bytes, ...] changes, checked."""
    if not (isinstance(flat, list) and len(flat) % 2 == 0 and set(map(type, flat)) <= {int}):
        raise InputError(where, key, "not [sample, bytes, ...] integers")
    at, values = flat[0::2], flat[1::2]
    increasing = all(map(operator.lt, at, at[1:]))
    if not increasing or (at and not 0 <= at[0] <= at[-1] < samples):
        raise InputError(where, key, f"samples not increasing within 0-{samples - 1}")
    return Series(at, values, samples)
