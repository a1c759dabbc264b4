"""How fast a switch's routing notices a dead neighbour, read from its `frr.conf`.

BFD, where a neighbour (or its peer-group) has `bfd` or `bfd profile NAME`: a session is
declared down after `detect-multiplier` x `receive-interval` (FRR's defaults: 3 x 300 ms; the
peer's transmit interval is the same profile in a generated fabric). Otherwise the BGP hold
time of `timers bgp KEEPALIVE HOLD` (FRR's `datacenter` default: 9 s).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from twin.labdir import Lab

BFD_DEFAULT = (3, 300)
HOLD_DEFAULT_S = 9


@dataclass(frozen=True)
class Detection:
    """A switch's dead-neighbour detection time and what it comes from."""

    ms: float
    source: str  # e.g. "BFD 3 x 300 ms", "BGP hold 9 s"


def detection(lab: Lab, switch: str) -> Detection:
    """The slowest detection among a switch's BGP neighbours (by its frr.conf)."""
    text = (lab.path / "configs" / switch / "frr.conf").read_text()
    profiles: dict[str, list[int]] = {}
    current = None
    for line in text.splitlines():
        words = line.split()
        if words[:1] == ["profile"]:
            current = profiles.setdefault(words[1], list(BFD_DEFAULT))
        elif current is not None and words[:1] == ["detect-multiplier"]:
            current[0] = int(words[1])
        elif current is not None and words[:1] == ["receive-interval"]:
            current[1] = int(words[1])
        elif words[:1] == ["exit"] or (line and not line.startswith(" ")):
            current = None
    used = [
        tuple(profiles.get(m.group(2), BFD_DEFAULT)) if m.group(2) else BFD_DEFAULT
        for m in re.finditer(r"^\s*neighbor (\S+) bfd(?: profile (\S+))?\s*$", text, re.M)
    ]
    if used:
        mult, interval = max(used, key=lambda p: p[0] * p[1])
        return Detection(float(mult * interval), f"BFD {mult} x {interval} ms")
    hold = re.search(r"^\s*timers bgp \d+ (\d+)", text, re.M)
    seconds = int(hold.group(1)) if hold else HOLD_DEFAULT_S
    return Detection(seconds * 1000.0, f"BGP hold {seconds} s")
