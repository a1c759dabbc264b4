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

The mean and the spread are of the iterations during which every rank kept a link: a fault
that takes every link the design gives a server (a single-homed server's only link, both
links of a dual-homed one, the leaf of a single-homed rack) stalls the ring until it is given
back, which is the fabric's shape (`servers.dual_homed`, `nics`), not its efficiency, and is
`failover`'s to judge. Iterations run back to back from the phase's start, so each one's span
is known; those that overlap such a cut are counted (`cut_off`) and named in the reason, and
when every finished iteration did, the phase is not observable. On a hybrid run (a live
control plane, the simulator's data plane: `data_plane` in run.json) the iterations are the
simulator's, which plays the scenario's times x `time_scale`: their spans are its times / that
scale from the phase's start on the live run's clock, where its faults and other phases are.
"""

from __future__ import annotations

import math
import statistics

from traffic.collectives import Collective, busbw
from twin.lab.directory import Lab
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


def _ports(lab: Lab, server: str) -> dict[tuple[str, str], str]:
    """A server's links in the design: (server, port) -> the node at the other end."""
    found = {}
    for _, _, e in lab.graph.edges(server, data=True):
        mine, other = ("a", "b") if e["a"] == server else ("b", "a")
        found[(server, str(e[f"{mine}_port"]))] = str(e[other])
    return found


def cut_off(
    lab: Lab, obs: Observations, ranks: set[str], upto: int | None = None
) -> list[tuple[float, float, str]]:
    """(from, to, server) of each span in which a rank had every link of the design down: a
    link-down of it, or a node-down of the server or of the node at its other end, until the
    link-up or node-up (else the run's end); with `upto`, after the faults of index up to it
    only (faults at the same time taken in their order)."""
    ports = {s: _ports(lab, s) for s in sorted(ranks) if s in lab.graph}
    down: set[tuple[str, str]] = set()
    nodes: set[str] = set()
    opened: dict[str, float] = {}
    spans: list[tuple[float, float, str]] = []
    faults = [f for f in obs.run["faults"] if upto is None or int(f.get("index", 0)) <= upto]
    for fault in sorted(faults, key=lambda f: (float(f["t"]), int(f.get("index", 0)))):
        kind, t = fault["fault"], float(fault["t"])
        ends = {(n, p) for n, _, p in (e.partition(":") for e in fault.get("ends", []))}
        if kind == "link-down":
            down |= ends
        elif kind == "link-up":
            down -= ends
        elif kind == "node-down":
            nodes.add(str(fault.get("node")))
        elif kind == "node-up":
            nodes.discard(str(fault.get("node")))
        for server, far in ports.items():
            cut = server in nodes or all(p in down or n in nodes for p, n in far.items())
            if cut and server not in opened:
                opened[server] = t
            elif not cut and server in opened:
                spans.append((opened.pop(server), t, server))
    end = float(obs.run.get("ended") or math.inf)
    return spans + [(t, end, server) for server, t in opened.items()]


def class_weight(lab: Lab, klass: str) -> float:
    """The share of a link the intent's DWRR gives `klass` when another class is backlogged
    on it: the RoCE (lossless) queue `rdma_scheduler_weight` of 100, a lossy one the rest."""
    weight = lab.fabric.qos.rdma_scheduler_weight
    return (weight if klass == "roce" else 100 - weight) / 100


Shares = dict[str, tuple[float, float]]
"""Per rank, the (egress, ingress) fraction of its NICs another phase takes from a collective."""


def shared_nics(lab: Lab, obs: Observations, label: str) -> list[tuple[float, float, str, Shares]]:
    """(from, to, phase, shares) per other phase with flows that start or end at a rank of
    the collective `label`: they share its NICs, which no switch setting can prevent. A flow's
    demand is its receiver's NICs split among that receiver's senders (an incast's fan-in), or
    its sender's among that sender's receivers; a rank's egress and ingress demand are summed
    over its flows, as fractions of its NICs (the intent's `servers.nics` x `nic_speed`, every
    server alike). A phase of the collective's class takes its demand (one queue); one of
    another class at most what the intent's scheduler leaves the collective's class on a
    busy link (`class_weight`): its share is the demand, capped at 1 - that weight."""
    mine = obs.phase(label)
    ranks = {f[end] for f in mine["flows"] for end in ("src", "dst")}
    found = []
    for p in obs.run["phases"]:
        if p["label"] == label:
            continue
        cap = 1.0 if p["class"] == mine["class"] else 1 - class_weight(lab, mine["class"])
        into: dict[str, set[str]] = {}
        out_of: dict[str, set[str]] = {}
        for f in p["flows"]:
            into.setdefault(f["dst"], set()).add(f["src"])
            out_of.setdefault(f["src"], set()).add(f["dst"])
        shares: Shares = {}
        for rank in ranks & (set(into) | set(out_of)):
            egress = sum(1 / len(into[d]) for d in out_of.get(rank, ()))
            ingress = sum(1 / len(out_of[s]) for s in into.get(rank, ()))
            shares[rank] = (min(cap, egress), min(cap, ingress))
        if shares:
            found.append((float(p["start"]), float(p["end"]), p["label"], shares))
    return found


def slowdown(shares: list[Shares]) -> float:
    """The time an iteration beside phases taking these shares may take over one without:
    1 / (1 - the largest share of a rank's NICs in one direction, the phases' summed);
    infinite when they take a rank's NICs whole.

    >>> slowdown([{"a": (0.25, 0.0)}, {"a": (0.25, 0.5), "b": (0.0, 0.5)}]), slowdown([])
    (2.0, 1.0)
    """
    total: dict[tuple[str, int], float] = {}
    for phase in shares:
        for rank, pair in phase.items():
            for way, share in enumerate(pair):
                total[(rank, way)] = total.get((rank, way), 0.0) + share
    most = max(total.values(), default=0.0)
    return 1 / (1 - most) if most < 1 else math.inf


def credited(times: list[float], factors: list[float]) -> list[float]:
    """Each iteration's time as judged: one beside phases that may slow it by `factor` is
    credited up to that slowdown, down to the median of the iterations beside none, never
    below it (a slowdown that did not happen is not a gain) nor above its own time; without
    such iterations, its time / factor.

    >>> credited([1.0, 1.0, 1.05, 1.6, 3.0], [1.0, 1.0, 2.0, 2.0, 2.0])
    [1.0, 1.0, 1.0, 1.0, 1.5]
    >>> credited([0.9, 2.0], [2.0, 2.0])
    [0.45, 1.0]
    """
    alone = [t for t, k in zip(times, factors, strict=True) if k == 1.0]
    if not alone:
        return [t / k for t, k in zip(times, factors, strict=True)]
    typical = statistics.median(alone)
    return [min(t, max(t / k, typical)) for t, k in zip(times, factors, strict=True)]


def _spans(start: float, times: list[float | None]) -> list[tuple[float, float] | None]:
    """Each iteration's (start, end), run back to back from `start`; None from the first
    that never finished on.

    >>> _spans(1.0, [0.5, 0.25, None, 0.5])
    [(1.0, 1.5), (1.5, 1.75), None, None]
    """
    spans: list[tuple[float, float] | None] = []
    at: float | None = start
    for t in times:
        if at is None or t is None:
            at = None
            spans.append(None)
        else:
            spans.append((at, at + t))
            at += t
    return spans


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
    hybrid = obs.run.get("data_plane")
    scale = float(hybrid["time_scale"]) if hybrid else 1.0
    results = []
    for label, it in sorted(iterations.items()):
        phase = obs.phase(label)
        bound = float((phase.get("analytical") or {}).get("bound_s") or 0.0)
        finished = [t for t in it["times_s"] if t is not None]
        scope = f"{label} ({it['algorithm']}, {it['ranks']} ranks)"
        if not finished:
            results.append(
                Result(
                    NAME, scope, Status.FAIL, f"none of {len(it['times_s'])} iterations finished"
                )
            )
            continue
        ranks = {f[end] for f in phase["flows"] for end in ("src", "dst")}
        cuts = cut_off(lab, obs, ranks)
        beside = shared_nics(lab, obs, label)
        spans = _spans(float(phase["start"]), [t and t / scale for t in it["times_s"]])
        times, slowdowns, cut, shared = [], [], [], {}
        for t, span in zip(it["times_s"], spans, strict=True):
            hit = [s for lo, hi, s in cuts if span and lo < span[1] and span[0] < hi]
            near = [(s, k) for lo, hi, s, k in beside if span and lo < span[1] and span[0] < hi]
            factor = slowdown([k for _, k in near])
            if t is not None and (hit or math.isinf(factor)):
                cut += [f"{s} had every link down" for s in hit] or [
                    f"{', '.join(s for s, _ in near)} took a rank's NICs whole"
                ]
            elif t is not None:
                times.append(t)
                slowdowns.append(factor)
                shared.update({s: slowdown([k]) for s, k in near})
        judged = credited(times, slowdowns)
        left_out = ""
        if cut:
            who = ", ".join(sorted(set(cut)))
            n = len(finished) - len(times)
            left_out = f" (left out: {n} iteration{'s' * (n > 1)} while {who})"
        if not times:
            why = f"every finished iteration ran while a rank was cut off{left_out}"
            results.append(Result(NAME, scope, Status.NOT_OBSERVABLE, why, {"cut_off": len(cut)}))
            continue
        mean, judged_mean = statistics.fmean(times), statistics.fmean(judged)
        beside_n = sum(k > 1 for k in slowdowns)
        std = statistics.pstdev(judged)
        p50, p99 = percentile(judged, 0.5), percentile(judged, 0.99)
        kind = Collective(it["kind"]) if it["kind"] in set(Collective) else Collective.ALL_REDUCE
        bus = busbw(kind, int(it["ranks"]), int(it["message_bytes"]), mean) * 8 / 1e9
        figures: dict[str, int | float | str] = {
            "iterations": len(it["times_s"]),
            "finished": len(finished),
            "cut_off": len(finished) - len(times),
            "shared_nics": beside_n,
            "mean_ms": round(mean * 1e3, 4),
            "p50_ms": round(p50 * 1e3, 4),
            "p99_ms": round(p99 * 1e3, 4),
            "std_ms": round(std * 1e3, 4),
            "cv": round(std / judged_mean, 4),
            "p99_over_p50": round(p99 / p50, 3),
            "bound_ms": round(bound * 1e3, 4),
            "busbw_gbps": round(bus, 1),
            "busbw_bound_gbps": (phase.get("analytical") or {}).get("busbw_gbps", 0.0),
        }
        factors = ", ".join(f"{s} {k:.2f}x" for s, k in sorted(shared.items()))
        over = (
            f" ({beside_n} iteration{'s' * (beside_n > 1)} beside {factors} on the "
            "ranks' NICs, judged at their time / the slowdown of those beside each, not "
            "below the others' median)"
            if beside_n
            else ""
        )
        findings = []
        if len(finished) < len(it["times_s"]):
            findings.append(
                Finding(label, f"{len(it['times_s']) - len(finished)} iterations never finished")
            )
        if bound and judged_mean > float(params["max_slowdown"]) * bound:
            findings.append(
                Finding(
                    label, f"mean {mean * 1e3:.3f} ms is {judged_mean / bound:.1f}x the bound{over}"
                )
            )
        if p99 / p50 > float(params["max_p99_over_p50"]):
            findings.append(
                Finding(label, f"p99/p50 {p99 / p50:.2f} > {params['max_p99_over_p50']}{over}")
            )
        if std / judged_mean > float(params["max_cv"]):
            findings.append(
                Finding(
                    label,
                    f"std dev {std / judged_mean:.0%} of the mean > {params['max_cv']:.0%}{over}",
                )
            )
        slow = f"{judged_mean / bound:.2f}x the bound, " if bound else ""
        ok = (
            f"mean {mean * 1e3:.3f} ms ({slow}busbw {bus:.0f} Gb/s), "
            f"std {std * 1e3:.3f} ms, p99/p50 {p99 / p50:.2f} over {len(times)} iterations"
            f"{left_out}{over}"
        )
        results.append(verdict(NAME, scope, findings, ok, figures))
    return results
