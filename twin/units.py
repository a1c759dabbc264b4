"""Link speeds and sizes as network engineers write them."""

from __future__ import annotations

import re

_SPEED = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([GMT]?)(?:b/?s|bps)?\s*$", re.IGNORECASE)
_FACTOR = {"": 1, "M": 1, "G": 1000, "T": 1_000_000}


def speed_mbps(value: str | int) -> int:
    """Parse a link speed into Mb/s, the unit of SONiC's PORT.speed.

    >>> speed_mbps("400G"), speed_mbps("100g"), speed_mbps(25000)
    (400000, 100000, 25000)
    """
    if isinstance(value, int):
        return value
    match = _SPEED.match(value)
    if not match:
        raise ValueError(f"not a link speed: {value!r} (write e.g. 400G or 100000)")
    return int(float(match.group(1)) * _FACTOR[match.group(2).upper()])


def speed_label(mbps: int) -> str:
    """Format Mb/s the way port profiles name speeds.

    >>> speed_label(400000), speed_label(2500)
    ('400G', '2500M')
    """
    return f"{mbps // 1000}G" if mbps % 1000 == 0 else f"{mbps}M"
