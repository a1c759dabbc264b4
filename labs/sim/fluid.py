"""The DCQCN fluid model of Zhu et al., "ECN or Delay", CoNEXT 2016, section 3: N identical
flows through one RED/ECN queue, its fixed point and its delayed dynamics (Euler steps), to
hold the engine's incasts against (docs/simulator.md, Fidelity 1).

Rates are packets per second on the wire (`wire` bytes per packet); the byte counter counts
payload (`payload` bytes per packet); the queue is in bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from labs.sim.model import Dcqcn


def _events(rate: float, p: float, log: float, k: float) -> float:
    """Rate of the increase events that come after k packets with no mark in a row."""
    x = log * k
    return 0.0 if x > 700 else rate * p / math.expm1(x)


@dataclass(frozen=True)
class Incast:
    """N senders into one port of `line` b/s marked by RED (kmin, kmax bytes, pmax), with the
    DCQCN set `dcqcn` and a feedback delay `delay` (seconds, mark to the sender's reaction)."""

    n: int
    line: float = 40e9
    kmin: float = 5e3
    kmax: float = 200e3
    pmax: float = 0.01
    dcqcn: Dcqcn = field(default_factory=Dcqcn)
    payload: int = 1000
    wire: int = 1082
    delay: float = 4e-6

    def mark(self, queue: float) -> float:
        """RED's marking probability at a queue of `queue` bytes."""
        if queue <= self.kmin:
            return 0.0
        if queue > self.kmax:
            return 1.0
        return self.pmax * (queue - self.kmin) / (self.kmax - self.kmin)

    def slopes(
        self, rc: float, rt: float, alpha: float, p: float, rc_then: float
    ) -> tuple[float, float, float]:
        """d(Rc)/dt, d(Rt)/dt and d(alpha)/dt (CoNEXT'16 eqs. 1-3) at marking probability `p`
        seen by packets sent at rate `rc_then` one feedback delay ago."""
        d = self.dcqcn
        tau, tau_a, timer = d.cnp_interval, d.alpha_period, d.timer
        b = d.byte_counter / self.payload
        r_ai = d.r_ai / (8 * self.wire)
        if p <= 0.0:
            return (rt - rc) / 2 / timer, r_ai / timer, -alpha * d.g / tau_a
        log = -math.log1p(-min(p, 1 - 1e-12))
        cnp = -math.expm1(-log * tau * rc_then) / tau
        events = [_events(rc_then, p, log, k) for k in (b, timer * rc_then)]
        increase = sum(
            e * math.exp(-log * d.f * k) for e, k in zip(events, (b, timer * rc_then), strict=True)
        )
        d_rc = -rc * alpha / 2 * cnp + (rt - rc) / 2 * sum(events)
        d_rt = -(rt - rc) * cnp + r_ai * increase
        d_alpha = d.g / tau_a * (-math.expm1(-log * tau_a * rc_then) - alpha)
        return d_rc, d_rt, d_alpha

    def fixed_point(self) -> float:
        """The queue (bytes) at which N x Rc = C and Rc, Rt and alpha stand still."""
        rc = self.line / self.n / (8 * self.wire)
        d = self.dcqcn
        tau, tau_a, timer = d.cnp_interval, d.alpha_period, d.timer
        b = d.byte_counter / self.payload
        r_ai = d.r_ai / (8 * self.wire)

        def excess_decrease(p: float) -> float:
            log = -math.log1p(-p)
            cnp = -math.expm1(-log * tau * rc) / tau
            alpha = -math.expm1(-log * tau_a * rc)
            events = [_events(rc, p, log, k) for k in (b, timer * rc)]
            increases = [
                e * math.exp(-log * d.f * k) for e, k in zip(events, (b, timer * rc), strict=True)
            ]
            gap = r_ai * sum(increases) / cnp  # Rt - Rc where d(Rt)/dt = 0
            return rc * alpha / 2 * cnp - gap / 2 * sum(events)

        low, high = 1e-9, min(self.pmax, 0.5)
        for _ in range(100):
            mid = math.sqrt(low * high)
            low, high = (mid, high) if excess_decrease(mid) < 0 else (low, mid)
        return self.kmin + low / self.pmax * (self.kmax - self.kmin)

    def run(self, duration: float, step: float = 0.1e-6) -> list[float]:
        """The queue (bytes) every 10 us from a line-rate start with alpha 1."""
        lag = max(1, round(self.delay / step))
        capacity = self.line / (8 * self.wire)
        rc = rt = capacity
        alpha, queue = self.dcqcn.initial_alpha, 0.0
        history = [(0.0, rc)] * lag  # (p, rc) of the packets the senders now hear about
        out: list[float] = []
        every = round(10e-6 / step)
        for i in range(round(duration / step)):
            p_then, rc_then = history[i % lag]
            history[i % lag] = (self.mark(queue), rc)
            d_rc, d_rt, d_alpha = self.slopes(rc, rt, alpha, p_then, rc_then)
            rc = min(capacity, max(self.dcqcn.min_rate / (8 * self.wire), rc + d_rc * step))
            rt = min(capacity, rt + d_rt * step)
            alpha = min(1.0, max(0.0, alpha + d_alpha * step))
            queue = max(0.0, queue + (self.n * rc - capacity) * self.wire * step)
            if i % every == 0:
                out.append(queue)
        return out
