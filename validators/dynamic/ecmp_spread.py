"""`ecmp_spread`: did each leaf spread the collective's traffic evenly over its uplinks?

Per leaf, the packets sent on each uplink (one routed bundle per spine) during the collective
phases, judged two ways: max/mean (fails above `max_over_mean`, default 1.5) and a chi-square
test against an even split, counted in flows (packets of one flow share a path; fails below
`p_min`, default 0.001). Also fails when a leaf's FIB at the start holds fewer ECMP next hops
to a remote server subnet than it has spines. Leaves that carried fewer than `min_packets`
(default 200) uplink packets are left out: too few to judge.
"""

from __future__ import annotations

from ipaddress import IPv4Network

from twin.labdir import Lab
from twin.scenario.observations import Observations
from validators.dynamic.stats import chi_square_uniform
from validators.registry import Params, dynamic
from validators.result import Finding, Result, Status

NAME = "ecmp_spread"
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")


def _fib_findings(lab: Lab, obs: Observations) -> list[Finding]:
    fib = obs.fib("start")
    findings = []
    for leaf in lab.nodes("leaf"):
        spines = sum(1 for n in lab.graph.neighbors(leaf) if lab.graph.nodes[n]["role"] == "spine")
        mine = lab.graph.nodes[leaf]["subnet"]
        remote = {lab.graph.nodes[o]["subnet"] for o in lab.nodes("leaf")} - {mine}
        routes = fib.get(leaf, {})
        for subnet in sorted(remote):
            hops = len(routes.get(IPv4Network(subnet), ()))
            if hops < spines:
                findings.append(
                    Finding(
                        leaf, f"{subnet} has {hops} ECMP next hops, {spines} spines", where="FIB"
                    )
                )
    return findings


@dynamic(NAME, needs={"fib", "counters"}, max_over_mean=1.5, p_min=0.001, min_packets=200)
def check(lab: Lab, obs: Observations, params: Params) -> list[Result]:
    """One result per leaf that carried enough uplink traffic, plus the FIB width check."""
    max_over_mean = float(params["max_over_mean"])
    p_min = float(params["p_min"])
    min_packets = int(params["min_packets"])
    phases = [p for p in obs.run["phases"] if p["kind"] in COLLECTIVES]
    results = []
    fib = _fib_findings(lab, obs)
    results.append(
        Result(
            NAME,
            "fib",
            Status.FAIL if fib else Status.PASS,
            f"{len(fib)} remote subnets short of ECMP width: {fib[0]}"
            if fib
            else "every leaf has an ECMP route per spine to every remote subnet",
            {"short_routes": len(fib)},
            fib,
        )
    )
    if not phases:
        results.append(
            Result(NAME, "traffic", Status.NOT_OBSERVABLE, "no collective phase in the scenario")
        )
        return results
    start, end = min(p["start"] for p in phases), max(p["end"] for p in phases)
    flows = [f for p in phases for f in p["flows"]]
    for leaf, ports in sorted(obs.run.get("uplinks", {}).items()):
        counts = [obs.delta(f"{leaf}:{port}", "tx_packets", start, end) for port in ports]
        total = sum(counts)
        if total < min_packets:
            continue
        group = lab.graph.nodes[leaf]["group"]
        behind = {s for s in lab.nodes("server") if lab.graph.nodes[s]["group"] == group}
        peers = sum(1 for n in lab.nodes("leaf") if lab.graph.nodes[n]["group"] == group)
        crossing = sum(1 for f in flows if f["src"] in behind and f["dst"] not in behind)
        samples = max(len(counts), crossing / peers)
        stat, p = chi_square_uniform(counts, samples / total)
        ratio = max(counts) / (total / len(counts))
        figures: dict[str, int | float | str] = {
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
        ok = f"max/mean {ratio:.2f}, chi-square p={p:.2g} over {len(counts)} uplinks"
        status = Status.FAIL if findings else Status.PASS
        reason = f"{findings[0]}" if findings else ok
        results.append(Result(NAME, leaf, status, reason, figures, findings))
    if len(results) == 1:
        results.append(
            Result(
                NAME,
                "traffic",
                Status.NOT_OBSERVABLE,
                f"no leaf sent {min_packets} packets on its uplinks",
            )
        )
    return results
