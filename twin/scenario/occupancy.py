"""queues.json's series: kept as their changes by the simulator, read as every sample.

A run of thousands of ports and samples holds mostly queues that stay put: `queues.json` with
`"encoding": "changes"` lists, per `node:port` and queue (or PG), `[sample, bytes, sample,
bytes, ...]`: the bytes held from that sample on (0 before the first), over `samples` samples
(docs/observations.md). `dense` gives readers the series of every sample, as a file without
an encoding holds them.

>>> dense({"interval": 1e-5, "encoding": "changes", "samples": 5,
...        "queues": {"leaf1:Ethernet0": {"3": [1, 700, 3, 0]}}, "pgs": {}})
{'interval': 1e-05, 'queues': {'leaf1:Ethernet0': {'3': [0, 700, 700, 0, 0]}}, 'pgs': {}}
"""

from __future__ import annotations

import itertools
from typing import Any

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


def _series(flat: Any, samples: int, key: str, where: str) -> list[int]:
    """Every sample's bytes from [sample, bytes, ...] changes."""
    if not (isinstance(flat, list) and len(flat) % 2 == 0 and all(type(x) is int for x in flat)):
        raise InputError(where, key, "not [sample, bytes, ...] integers")
    at, values = flat[0::2], flat[1::2]
    increasing = all(a < b for a, b in itertools.pairwise(at))
    if not increasing or (at and not 0 <= at[0] <= at[-1] < samples):
        raise InputError(where, key, f"samples not increasing within 0-{samples - 1}")
    series = [0] * samples
    for a, b, value in zip(at, [*at[1:], samples], values, strict=True):
        series[a:b] = [value] * (b - a)
    return series
