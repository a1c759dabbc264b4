"""`collective_efficiency`: collectives finish near their analytical bound, iteration after
iteration, whatever else the fabric carries.

The bounds are the intent's (`collectives:` in fabric.yaml: `max_slowdown`, `max_p99_over_p50`,
`max_cv`); a scenario's threshold of the same name (0: the intent's) overrides one.

Per collective phase, from its iteration times (`iterations.json`) and its analytical bound
(run.json: `message` bytes per rank at the servers' NIC bandwidth plus each step's
propagation delay over the cables, nccl-tests' algbw and busbw at that bound):

- every iteration finished;
- the mean iteration is at most `max_slowdown` (intent: 4) times the bound; the figures give the
  bus bandwidth nccl-tests would report (S/t x 2(n-1)/n for All-Reduce). The bound counts
  every NIC of a server at line rate; queue pairs placed on the NICs by a hash often leave
  one idle for a step (2x), and each of the 2(n-1) steps adds switching and serialisation
  to its cables' delay;
- the spread under background traffic: p99/p50 at most `max_p99_over_p50` (1.5) and the
  coefficient of variation (std dev / mean) at most `max_cv` (0.25), both the intent's.
"""

from __future__ import annotations

import statistics

from traffic.collectives import Collective, busbw
from twin.labdir import Lab
from twin.scenario.observations import Observations
from validators.registry import Params, dynamic
from validators.result import Finding, Result, Status, verdict

NAME = "collective_efficiency"


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank.

    >>> percentile([1.0, 2.0, 3.0, 4.0], 0.5), percentile([1.0, 2.0, 3.0, 4.0], 0.99)
    (2.0, 4.0)
    """
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 1))
    return ordered[int(rank) - 1]


@dynamic(NAME, needs={"iterations"}, max_slowdown=0.0, max_p99_over_p50=0.0, max_cv=0.0)
def check(lab: Lab, obs: Observations, given: Params) -> list[Result]:
    """One result per collective phase."""
    bounds = lab.fabric.collectives
    params = {k: float(v) or float(getattr(bounds, k)) for k, v in given.items()}
    iterations = obs.extra("iterations") or {}
    if not iterations:
        return [
            Result(NAME, "collectives", Status.NOT_OBSERVABLE, "no collective phase in the run")
        ]
    results = []
    for label, it in sorted(iterations.items()):
        phase = obs.phase(label)
        bound = float((phase.get("analytical") or {}).get("bound_s") or 0.0)
        times = [t for t in it["times_s"] if t is not None]
        scope = f"{label} ({it['algorithm']}, {it['ranks']} ranks)"
        if not times:
            results.append(
                Result(
                    NAME, scope, Status.FAIL, f"none of {len(it['times_s'])} iterations finished"
                )
            )
            continue
        mean = statistics.fmean(times)
        std = statistics.pstdev(times)
        p50, p99 = percentile(times, 0.5), percentile(times, 0.99)
        kind = Collective(it["kind"]) if it["kind"] in set(Collective) else Collective.ALL_REDUCE
        bus = busbw(kind, int(it["ranks"]), int(it["message_bytes"]), mean) * 8 / 1e9
        figures: dict[str, int | float | str] = {
            "iterations": len(it["times_s"]),
            "finished": len(times),
            "mean_ms": round(mean * 1e3, 4),
            "p50_ms": round(p50 * 1e3, 4),
            "p99_ms": round(p99 * 1e3, 4),
            "std_ms": round(std * 1e3, 4),
            "cv": round(std / mean, 4),
            "p99_over_p50": round(p99 / p50, 3),
            "bound_ms": round(bound * 1e3, 4),
            "busbw_gbps": round(bus, 1),
            "busbw_bound_gbps": (phase.get("analytical") or {}).get("busbw_gbps", 0.0),
        }
        findings = []
        if len(times) < len(it["times_s"]):
            findings.append(
                Finding(label, f"{len(it['times_s']) - len(times)} iterations never finished")
            )
        if bound and mean > float(params["max_slowdown"]) * bound:
            findings.append(
                Finding(label, f"mean {mean * 1e3:.3f} ms is {mean / bound:.1f}x the bound")
            )
        if p99 / p50 > float(params["max_p99_over_p50"]):
            findings.append(
                Finding(label, f"p99/p50 {p99 / p50:.2f} > {params['max_p99_over_p50']}")
            )
        if std / mean > float(params["max_cv"]):
            findings.append(
                Finding(label, f"std dev {std / mean:.0%} of the mean > {params['max_cv']:.0%}")
            )
        slow = f"{mean / bound:.2f}x the bound, " if bound else ""
        ok = (
            f"mean {mean * 1e3:.3f} ms ({slow}busbw {bus:.0f} Gb/s), "
            f"std {std * 1e3:.3f} ms, p99/p50 {p99 / p50:.2f} over {len(times)} iterations"
        )
        results.append(verdict(NAME, scope, findings, ok, figures))
    return results
