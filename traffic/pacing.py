"""When to send packet ``i``: constant-rate, unpaced, or periodic on/off bursts.

Each pacing maps a packet index to its send time in seconds after the start, so senders
keep an absolute schedule (sleeping late never lowers the average rate).

>>> [ConstantRate(1000).offset_s(i) for i in (0, 1, 10)]
[0.0, 0.001, 0.01]
>>> b = PeriodicBursts(period_s=0.01, burst_s=0.002, pps=1000)
>>> [round(b.offset_s(i), 4) for i in (0, 1, 2)]
[0.0, 0.001, 0.01]
"""

from dataclasses import dataclass
from typing import Protocol


class Pacing(Protocol):
    """Send schedule for a stream of packets."""

    def offset_s(self, index: int) -> float:
        """Seconds after the start at which packet ``index`` goes out."""
        ...

    def scaled(self, factor: float) -> "Pacing":
        """The same shape carrying ``factor`` times the packets per second."""
        ...


@dataclass(frozen=True)
class Unpaced:
    """As fast as the sender can go."""

    def offset_s(self, index: int) -> float:
        """Always now."""
        return 0.0

    def scaled(self, factor: float) -> "Unpaced":
        """Still unpaced."""
        return self


@dataclass(frozen=True)
class ConstantRate:
    """``pps`` packets per second, evenly spaced."""

    pps: float

    def __post_init__(self) -> None:
        if self.pps <= 0:
            raise ValueError("pps must be positive")

    @classmethod
    def from_bps(cls, bps: float, frame_bytes: int) -> "ConstantRate":
        """Rate giving ``bps`` bits/s of ``frame_bytes``-byte frames (FCS, preamble excluded).

        >>> ConstantRate.from_bps(8e6, 1000).pps
        1000.0
        """
        return cls(bps / (8 * frame_bytes))

    def offset_s(self, index: int) -> float:
        """``index / pps``."""
        return index / self.pps

    def scaled(self, factor: float) -> "ConstantRate":
        """``factor * pps``."""
        return ConstantRate(self.pps * factor)


@dataclass(frozen=True)
class PeriodicBursts:
    """Every ``period_s``, a burst of ``burst_s`` seconds at ``pps``; silent in between."""

    period_s: float
    burst_s: float
    pps: float

    def __post_init__(self) -> None:
        if not (0 < self.burst_s <= self.period_s and self.pps > 0):
            raise ValueError("need 0 < burst_s <= period_s and pps > 0")

    @property
    def per_burst(self) -> int:
        """Packets in one burst (at least one)."""
        return max(1, round(self.pps * self.burst_s))

    def offset_s(self, index: int) -> float:
        """Start of the packet's burst plus its place inside the burst."""
        burst, slot = divmod(index, self.per_burst)
        return burst * self.period_s + slot / self.pps

    def scaled(self, factor: float) -> "PeriodicBursts":
        """Same timing, ``factor * pps`` inside bursts."""
        return PeriodicBursts(self.period_s, self.burst_s, self.pps * factor)
