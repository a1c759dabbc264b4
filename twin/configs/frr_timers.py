"""How fast a switch's routing notices a dead neighbour, read from its `frr.conf`.

BFD, where a neighbour (or its peer-group) has `bfd` or `bfd profile NAME`: a session is
declared down after `detect-multiplier` x `receive-interval` (FRR's defaults: 3 x 300 ms; the
peer's transmit interval is the same profile in a generated fabric). Otherwise the BGP hold
time of the neighbour's (or its peer-group's) `timers KEEPALIVE HOLD`, else the router's
`timers bgp KEEPALIVE HOLD` (FRR's `datacenter` default: 9 s).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

BFD_DEFAULT = (3, 300)
HOLD_DEFAULT_S = 9


@dataclass(frozen=True)
class Detection:
    """A switch's dead-neighbour detection time and what it comes from."""

    ms: float
    source: str  # e.g. "BFD 3 x 300 ms", "BGP hold 9 s"


def _profiles(text: str) -> dict[str, tuple[int, int]]:
    """BFD profiles: name -> (detect multiplier, receive interval ms)."""
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
    return {name: (p[0], p[1]) for name, p in profiles.items()}


def neighbours(text: str) -> dict[str, Detection]:
    """Per BGP neighbour (address or interface) of an frr.conf, its detection."""
    profiles = _profiles(text)
    bfd: dict[str, tuple[int, int]] = {}
    hold: dict[str, int] = {}
    group: dict[str, str] = {}
    peers: list[str] = []
    for m in re.finditer(r"^\s*neighbor (\S+) (.*?)\s*$", text, re.M):
        name, rest = m.group(1), m.group(2).split()
        if rest[:1] == ["bfd"]:
            bfd[name] = (
                profiles.get(rest[2], BFD_DEFAULT) if rest[1:2] == ["profile"] else BFD_DEFAULT
            )
        elif rest[:1] == ["timers"] and len(rest) == 3 and rest[1].isdigit():
            hold[name] = int(rest[2])
        elif rest[:1] == ["peer-group"] and len(rest) == 2:
            group[name] = rest[1]
        elif rest[:1] == ["remote-as"]:
            peers.append(name)
    found = re.search(r"^\s*timers bgp \d+ (\d+)", text, re.M)
    router_hold = int(found.group(1)) if found else HOLD_DEFAULT_S
    out = {}
    for peer in peers:
        chain = [peer, group.get(peer, "")]
        own = next((bfd[n] for n in chain if n in bfd), None)
        if own is not None:
            out[peer] = Detection(float(own[0] * own[1]), f"BFD {own[0]} x {own[1]} ms")
        else:
            seconds = next((hold[n] for n in chain if n in hold), router_hold)
            out[peer] = Detection(seconds * 1000.0, f"BGP hold {seconds} s")
    return out
