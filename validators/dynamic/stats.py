"""Small statistics the dynamic validators need (no SciPy): chi-square tail probability."""

from __future__ import annotations

import math


def _gamma_q(a: float, x: float) -> float:
    """Regularized upper incomplete gamma Q(a, x) (series or continued fraction)."""
    if x <= 0:
        return 1.0
    lead = math.exp(-x + a * math.log(x) - math.lgamma(a))
    if x < a + 1:
        term = total = 1.0 / a
        n = a
        for _ in range(500):
            n += 1
            term *= x / n
            total += term
            if abs(term) < abs(total) * 1e-12:
                break
        return max(0.0, 1.0 - total * lead)
    b, c, d = x + 1 - a, 1e300, 1.0 / (x + 1 - a)
    h = d
    for i in range(1, 500):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = 1e-300 if abs(d) < 1e-300 else d
        c = b + an / c
        c = 1e-300 if abs(c) < 1e-300 else c
        d = 1.0 / d
        h *= d * c
        if abs(d * c - 1) < 1e-12:
            break
    return lead * h


def chi_square_uniform(counts: list[int], scale: float = 1.0) -> tuple[float, float]:
    """Chi-square statistic of counts against an even split, times `scale`, and its p-value.

    `scale` below 1 turns packet counts into an effective number of independent samples
    (packets of one flow follow one path, so flows, not packets, are the samples).

    >>> stat, p = chi_square_uniform([100, 100, 100, 100])
    >>> stat, p
    (0.0, 1.0)
    >>> round(chi_square_uniform([30, 10], 1.0)[1], 4)
    0.0016
    """
    total = sum(counts)
    if total == 0 or len(counts) < 2:
        return 0.0, 1.0
    expected = total / len(counts)
    stat = sum((c - expected) ** 2 / expected for c in counts) * scale
    return stat, _gamma_q((len(counts) - 1) / 2, stat / 2)
