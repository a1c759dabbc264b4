"""Quantities with units in experiment files: ``40G`` (b/s), ``1us`` (s), ``200KB`` (bytes).

Bare numbers are SI (b/s, s, bytes). KB, MB and GB are powers of 1000, KiB, MiB and GiB of 1024.

>>> rate("400G"), seconds("55us"), size("200KB"), size("4KiB")
(400000000000.0, 5.5e-05, 200000, 4096)
"""

from __future__ import annotations

import re

_NUMBER = re.compile(r"^\s*([0-9.eE+-]+)\s*([A-Za-z]*)\s*$")
_RATE = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_PER_SECOND = {"": 1.0, "s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9, "ps": 1e12}
"""Units per second: a time divides by these, so 500ns is exactly 5e-7."""
_SIZE = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9}
_SIZE |= {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


class UnitError(ValueError):
    """A quantity whose number or unit cannot be read."""


def _split(value: object, what: str) -> tuple[float, str]:
    if isinstance(value, bool):
        raise UnitError(f"{value!r} is not a {what}")
    if isinstance(value, int | float):
        return float(value), ""
    match = _NUMBER.match(str(value))
    if not match:
        raise UnitError(f"{value!r} is not a {what}")
    try:
        return float(match.group(1)), match.group(2)
    except ValueError:
        raise UnitError(f"{value!r} is not a {what}") from None


def _scale(value: object, what: str, table: dict[str, float], divide: bool = False) -> float:
    number, unit = _split(value, what)
    for name in (unit, unit.removesuffix("bps").removesuffix("b/s")):
        if name in table:
            return number / table[name] if divide else number * table[name]
    raise UnitError(
        f"{value!r}: unknown unit {unit!r} for a {what} (use one of {', '.join(table)})"
    )


def rate(value: object) -> float:
    """A rate in bits per second (``40G``, ``40Gbps``, ``100M``)."""
    return _scale(value, "rate", _RATE)


def seconds(value: object) -> float:
    """A time in seconds (``1us``, ``55us``, ``2ms``)."""
    return _scale(value, "time", _PER_SECOND, divide=True)


def size(value: object) -> int:
    """A size in bytes (``1000``, ``200KB``, ``32MB``, ``4KiB``)."""
    return round(_scale(value, "size", {k: float(v) for k, v in _SIZE.items()}))
