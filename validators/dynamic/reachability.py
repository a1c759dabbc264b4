"""`reachability`: every server reaches every other server, both directions (probes)."""

from __future__ import annotations

from twin.lab.directory import Lab
from twin.scenario.observations import Observations
from validators.registry import Params, dynamic
from validators.result import Finding, Result, verdict

NAME = "reachability"


@dynamic(NAME, needs={"probes"})
def check(lab: Lab, obs: Observations, params: Params) -> list[Result]:
    """Every ordered pair probed must have answered."""
    probes = obs.probes or []
    servers = lab.nodes("server")
    probed = {(p["src"], p["dst"]) for p in probes}
    expected = {(a, b) for a in servers for b in servers if a != b}
    findings = [
        Finding(p["src"], f"cannot reach {p['dst']} ({p['dst_ip']})", where="probe")
        for p in probes
        if not p["reachable"]
    ]
    findings += [
        Finding(a, f"{b} was never probed", where="probe") for a, b in sorted(expected - probed)
    ]
    return [
        verdict(
            NAME,
            "servers",
            findings,
            f"all {len(expected)} server pairs reach each other both ways",
            {"pairs": len(expected), "unreachable": len(findings)},
        )
    ]
