"""`ecmp_spread`: does each leaf spread flows evenly over its uplinks?

From the scenario's ECMP probe (`kind: ecmp_probe`) when it has one: per leaf, the packets
of the thousands of 5-tuples its probe sent into it, counted on each uplink (one routed bundle
per spine: tx_packets over the probe's window, which no other phase overlaps). A leaf passes
when max/mean <= 1 + `tolerance` and min/mean >= 1 - `tolerance` (default 0.25, the +-25 %
of sonic-mgmt's ECMP tests). It is not observable when its probe had too few tuples for that
to be decisive (an even hash spreads F tuples over n uplinks with a relative deviation of
sqrt((n - 1) / F) per uplink; at least `SIGMAS` of those must fit in the tolerance; a sender
that fell behind its schedule sent only its first tuples, one packet each), when its
uplinks saw fewer than half the packets sent into it, when its routes to remote subnets were
not whole and steady through the probe (the FIB snapshot before it short of a next hop per
spine: a fault in force; a route event during it), or when the backend did not play the probe
(sim). A probe that ran at the same time as another phase (one that started late or ran long
on a loaded machine) is not observable as a whole: its counters count both.

Without a probe, from the collective phases' flows, as before probes existed: max/mean
(fails above `max_over_mean`) and a chi-square test against an even split counted in flows
(fails below `p_min`), leaves with fewer than `min_packets` uplink packets left out. The
failover probes (`failover_probes.json`: a thousand packets a second pinned through the
faulted element) are not collective traffic: a leaf's uplinks are counted only outside the
spans its probe flows sent (from the leaves of their sources and on their ways, widened by a
counter interval each side), and a leaf they cover wholly is not observable. A
collective crosses a leaf with tens of flows, too few to be decisive (docs/validators.md):
each such result says it was judged from collective flows; a leaf with fewer than
`min_flows_per_uplink` (4) flows per uplink is not observable (with k flows per uplink one
flow moves max/mean by 1/k: below 4, a flow or two cross `max_over_mean` by chance), decided
from the scenario's flows before any counter, so the same in every run.

Also fails when a leaf's FIB at the start holds fewer ECMP next hops to a remote server subnet
than it has spines.
"""

from __future__ import annotations

import math
from collections import Counter
from ipaddress import IPv4Network
from typing import Any

from twin.lab.directory import Lab
from twin.model.fib import Fib
from twin.scenario.observations import Observations
from twin.scenario.records import PhaseRecord
from validators.dynamic.stats import chi_square_uniform
from validators.registry import Params, dynamic
from validators.result import Figure, Finding, Result, Status

NAME = "ecmp_spread"
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
SIGMAS = 4.0
"""A probe is decisive when the tolerance is this many standard deviations of an even hash."""


def _remote(lab: Lab, leaf: str) -> set[str]:
    """The server subnets of the other leaf groups."""
    mine = lab.graph.nodes[leaf]["subnet"]
    return {lab.graph.nodes[o]["subnet"] for o in lab.nodes("leaf")} - {mine}


def _short(lab: Lab, fib: Fib, leaf: str) -> list[tuple[str, int, int]]:
    """(subnet, next hops, spines) of the leaf's routes to remote subnets narrower than its
    spines."""
    spines = sum(1 for n in lab.graph.neighbors(leaf) if lab.graph.nodes[n]["role"] == "spine")
    routes = fib.get(leaf, {})
    hops = {subnet: len(routes.get(IPv4Network(subnet), ())) for subnet in _remote(lab, leaf)}
    return [(subnet, n, spines) for subnet, n in sorted(hops.items()) if n < spines]


def _fib_result(lab: Lab, obs: Observations) -> Result:
    fib = obs.fib("start")
    findings = [
        Finding(leaf, f"{subnet} has {hops} ECMP next hops, {spines} spines", where="FIB")
        for leaf in lab.nodes("leaf")
        for subnet, hops, spines in _short(lab, fib, leaf)
    ]
    return Result(
        NAME,
        "fib",
        Status.FAIL if findings else Status.PASS,
        f"{len(findings)} remote subnets short of ECMP width: {findings[0]}"
        if findings
        else "every leaf has an ECMP route per spine to every remote subnet",
        {"short_routes": len(findings)},
        findings,
    )


def needed_flows(uplinks: int, tolerance: float) -> int:
    """Tuples a probe needs on `uplinks` uplinks for +-`tolerance` to be decisive.

    >>> needed_flows(4, 0.25), needed_flows(2, 0.25), needed_flows(4, 0.1)
    (768, 256, 4800)
    """
    return math.ceil(SIGMAS**2 * (uplinks - 1) / tolerance**2 - 1e-9)


def _window(obs: Observations, phase: PhaseRecord) -> tuple[float, float]:
    """The probe's time span widened by a counter interval on each side (so the samples
    around its first and last packets count), but not into another phase."""
    interval = float(obs.counters.get("interval", 0.0))
    others = [p for p in obs.run["phases"] if p["index"] != phase["index"]]
    start, end = float(phase["start"]), float(phase["end"])
    lo = max([start - interval] + [float(p["end"]) for p in others if p["end"] <= start])
    hi = min([end + interval] + [float(p["start"]) for p in others if p["start"] >= end])
    return lo, hi


def _probe_leaf(
    leaf: str,
    ports: list[str],
    counts: list[int],
    pairs: list[dict[str, Any]],
    sent: int,
    tolerance: float,
) -> tuple[Status, str, dict[str, Figure], list[Finding]]:
    """One leaf's verdict from its probe's uplink counts."""
    flows, total, n = sum(int(p["flows"]) for p in pairs), sum(counts), len(counts)
    sent_tuples = min(flows, sent) if sent else flows  # a sender that fell behind sends fewer
    figures: dict[str, Figure] = {"source": "ecmp_probe", "flows": flows, "pairs": len(pairs)}
    figures |= {"sent": sent, "packets": total}
    if n < 2:
        return Status.NOT_OBSERVABLE, f"{n} uplink: nothing to spread", figures, []
    if sent_tuples < needed_flows(n, tolerance):
        why = (
            f"{sent_tuples} probe flows sent over {n} uplinks: {needed_flows(n, tolerance)} "
            f"needed for +-{tolerance:.0%} to be decisive"
        )
        return Status.NOT_OBSERVABLE, why, figures, []
    if total < sent / 2:
        why = f"its uplinks counted {total} packets of the {sent} its probe sent into it"
        return Status.NOT_OBSERVABLE, why, figures, []
    mean = total / n
    high, low = max(counts) / mean, min(counts) / mean
    _, p = chi_square_uniform(counts, sent_tuples / total)
    figures |= {"max_over_mean": round(high, 3), "min_over_mean": round(low, 3)}
    figures |= {"p_value": round(p, 5), **dict(zip(ports, counts, strict=True))}
    findings, bounds = [], []
    if high > 1 + tolerance:
        bounds.append(f"max/mean {high:.2f} > {1 + tolerance:.2f}")
        where = ports[counts.index(max(counts))]
        findings.append(Finding(leaf, f"uplink {bounds[-1]}", where, "uplinks"))
    if low < 1 - tolerance:
        bounds.append(f"min/mean {low:.2f} < {1 - tolerance:.2f}")
        where = ports[counts.index(min(counts))]
        findings.append(Finding(leaf, f"uplink {bounds[-1]}", where, "uplinks"))
    spread = ", ".join(bounds) or f"max/mean {high:.2f}, min/mean {low:.2f}"
    reason = f"{spread} over {n} uplinks ({flows} probe flows, {total} packets)"
    return (Status.FAIL if findings else Status.PASS), reason, figures, findings


def _overlapping(obs: Observations, phase: PhaseRecord) -> str | None:
    """Why the probe's counters also count another phase's packets (one that ran late), or
    None."""
    start, end = float(phase["start"]), float(phase["end"])
    for other in obs.run["phases"]:
        if other["index"] != phase["index"] and other["start"] < end and start < other["end"]:
            t0 = float(obs.run["started"])
            return (
                f"{phase['label']} ran {start - t0:.1f}-{end - t0:.1f} s with {other['label']} "
                f"(until {float(other['end']) - t0:.1f} s): its uplink counters count both"
            )
    return None


def _disturbed(lab: Lab, obs: Observations, leaf: str, start: float, end: float) -> str | None:
    """Why a leaf's routes to remote subnets were not whole and steady through the probe (a
    fault in force, or a route change during it), or None."""
    before = [label for label in obs.fib_labels() if obs.run["fibs"][label] <= start]
    if before:
        short = _short(lab, obs.fib(before[-1]), leaf)
        if short:
            subnet, hops, spines = short[0]
            return f"{subnet} had {hops} of {spines} next hops at the probe (FIB {before[-1]})"
    remote = _remote(lab, leaf)
    for e in obs.events:
        changed = e["event"] == "route" and e.get("node") == leaf and e.get("prefix") in remote
        if changed and start <= float(e["t"]) <= end:
            paths = f"{e['was']} -> {e['paths']} paths"
            return f"its route to {e['prefix']} changed during the probe ({paths})"
    return None


def _from_probe(
    lab: Lab, obs: Observations, phase: PhaseRecord, tolerance: float, tag: str
) -> list[Result]:
    """Per leaf the probe entered, its verdict."""
    if "probe" not in phase:
        backend = obs.run.get("backend", "this")
        why = (
            f"{phase['label']}: the {backend} backend did not play the ecmp_probe: "
            "ECMP is judged on a live twin (--backend netns)"
        )
        return [Result(NAME, f"{tag}probe", Status.NOT_OBSERVABLE, why)]
    overlap = _overlapping(obs, phase)
    if overlap:
        return [Result(NAME, f"{tag}probe", Status.NOT_OBSERVABLE, overlap)]
    start, end = _window(obs, phase)
    results = []
    for leaf, ports in sorted(obs.run.get("uplinks", {}).items()):
        pairs = [p for p in phase["probe"] if p["leaf"] == leaf]
        disturbed = _disturbed(lab, obs, leaf, start, end)
        if not pairs or disturbed:
            why = (
                disturbed
                or "the probe sent nothing into it (no server behind it, or none elsewhere)"
            )
            results.append(Result(NAME, f"{tag}{leaf}", Status.NOT_OBSERVABLE, why))
            continue
        counts = [obs.delta(f"{leaf}:{port}", "tx_packets", start, end) for port in ports]
        sent = sum(int(phase["sent"].get(str(p["flow_id"]), 0)) for p in pairs)
        status, reason, figures, findings = _probe_leaf(leaf, ports, counts, pairs, sent, tolerance)
        results.append(Result(NAME, f"{tag}{leaf}", status, reason, figures, findings))
    return results


def _probed(lab: Lab, obs: Observations) -> dict[str, list[tuple[float, float]]]:
    """Per leaf, the spans failover probe flows sent up through it: the leaves of their
    sources and those on their ways before the fault, from when they started until they
    stopped (`ends`; else the fault record's `until`), widened by a counter interval."""
    interval = float(obs.counters.get("interval", 0.0))
    leaves = set(lab.nodes("leaf"))
    spans: dict[str, list[tuple[float, float]]] = {}
    for record in obs.extra("failover_probes") or []:
        if not record.get("flows") or record.get("started") is None:
            continue
        stop = record.get("ends") or record.get("until") or obs.run["ended"]
        span = (float(record["started"]) - interval, float(stop) + interval)
        for flow in record["flows"]:
            src = flow["src"]
            near = set(lab.graph.neighbors(src)) if src in lab.graph else set()
            on_way = {str(hop).split(":")[0] for hop in flow.get("path", [])}
            for leaf in (near | on_way) & leaves:
                spans.setdefault(leaf, []).append(span)
    return spans


def _outside(
    start: float, end: float, spans: list[tuple[float, float]]
) -> list[tuple[float, float]]:
    """The parts of [start, end] outside every span.

    >>> _outside(0.0, 10.0, [(2.0, 4.0), (3.0, 5.0), (9.0, 12.0)])
    [(0.0, 2.0), (5.0, 9.0)]
    """
    free, at = [], start
    for lo, hi in sorted(spans):
        if lo > at:
            free.append((at, min(lo, end)))
        at = max(at, hi)
        if at >= end:
            break
    if at < end:
        free.append((at, end))
    return [(lo, hi) for lo, hi in free if lo < hi]


def _from_collectives(lab: Lab, obs: Observations, params: Params) -> list[Result]:
    """Per leaf that collective flows leave through, its verdict: not observable when they
    are too few (from the scenario's flows, whatever the counters say), else judged when its
    uplinks carried `min_packets` in the collectives (outside its failover probes' spans)."""
    max_over_mean = float(params["max_over_mean"])
    p_min = float(params["p_min"])
    min_packets = int(params["min_packets"])
    phases = [p for p in obs.run["phases"] if p["kind"] in COLLECTIVES]
    if not phases:
        why = "no collective or ecmp_probe phase in the scenario"
        return [Result(NAME, "traffic", Status.NOT_OBSERVABLE, why)]
    start, end = min(p["start"] for p in phases), max(p["end"] for p in phases)
    groups = {n: lab.graph.nodes[n]["group"] for n in lab.nodes("server") + lab.nodes("leaf")}
    peers = Counter(groups[n] for n in lab.nodes("leaf"))
    crossing = Counter(  # per leaf group, the collective flows leaving it for another
        groups.get(f["src"])
        for p in phases
        for f in p["flows"]
        if groups.get(f["src"]) != groups.get(f["dst"])
    )
    probed = _probed(lab, obs)
    results, crossed = [], False
    for leaf, ports in sorted(obs.run.get("uplinks", {}).items()):
        group = groups[leaf]
        if not crossing[group]:
            continue
        crossed = True
        # from the scenario's flows first, before any clock-bounded window or count: every
        # run of a lab says the same of a leaf of few flows
        samples = max(len(ports), crossing[group] / peers[group])
        if samples < int(params["min_flows_per_uplink"]) * len(ports):
            why = (
                f"{round(samples)} collective flows over {len(ports)} uplinks: too few to "
                f"judge (at least {params['min_flows_per_uplink']} per uplink; add an ecmp_probe)"
            )
            figures_few: dict[str, Figure] = {"source": "collectives", "flows": round(samples)}
            results.append(Result(NAME, leaf, Status.NOT_OBSERVABLE, why, figures_few))
            continue
        windows = _outside(start, end, probed.get(leaf, []))
        if not windows:
            why = "failover probe flows went up through it for the whole of the collectives"
            results.append(Result(NAME, leaf, Status.NOT_OBSERVABLE, why))
            continue
        counts = [
            sum(obs.delta(f"{leaf}:{port}", "tx_packets", lo, hi) for lo, hi in windows)
            for port in ports
        ]
        total = sum(counts)
        if total < min_packets:
            continue
        stat, p = chi_square_uniform(counts, samples / total)
        ratio = max(counts) / (total / len(counts))
        figures: dict[str, Figure] = {
            "source": "collectives",
            "max_over_mean": round(ratio, 3),
            "chi_square": round(stat, 2),
            "p_value": round(p, 5),
            "flows": round(samples),
            "packets": total,
            **{port: c for port, c in zip(ports, counts, strict=True)},
        }
        findings = []
        if ratio > max_over_mean:
            findings.append(
                Finding(leaf, f"uplink max/mean {ratio:.2f} > {max_over_mean}", where="uplinks")
            )
        if p < p_min:
            findings.append(
                Finding(leaf, f"chi-square p={p:.2g} < {p_min} (uneven split)", where="uplinks")
            )
        source = f"from {round(samples)} collective flows"
        ok = f"max/mean {ratio:.2f}, chi-square p={p:.2g} over {len(counts)} uplinks ({source})"
        status = Status.FAIL if findings else Status.PASS
        reason = f"{findings[0]} ({source})" if findings else ok
        results.append(Result(NAME, leaf, status, reason, figures, findings))
    if not results:
        why = (
            f"no leaf sent {min_packets} packets on its uplinks"
            if crossed
            else "no collective flow goes from a leaf's servers to another leaf's: none crosses "
            "the uplinks"
        )
        results.append(Result(NAME, "traffic", Status.NOT_OBSERVABLE, why))
    return results


@dynamic(
    NAME,
    needs={"fib", "counters"},
    tolerance=0.25,
    max_over_mean=1.5,
    p_min=0.001,
    min_packets=200,
    min_flows_per_uplink=4,
)
def check(lab: Lab, obs: Observations, params: Params) -> list[Result]:
    """The FIB width check, then one result per leaf: from the ECMP probe phases (each), or
    from the collectives' flows when there is none."""
    probes = [p for p in obs.run["phases"] if p["kind"] == "ecmp_probe"]
    results = [_fib_result(lab, obs)]
    if not probes:
        return results + _from_collectives(lab, obs, params)
    tolerance = float(params["tolerance"])
    if not 0 < tolerance < 1:
        why = f"tolerance {tolerance:g} is not between 0 and 1"
        return [*results, Result(NAME, "probe", Status.NOT_OBSERVABLE, why)]
    for phase in probes:
        tag = f"{phase['label']} " if len(probes) > 1 else ""
        results += _from_probe(lab, obs, phase, tolerance, tag)
    return results
