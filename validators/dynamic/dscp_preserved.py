"""`dscp_preserved`: each class arrives with the DSCP the fabric's QoS policy gives it.

Two ways to fail, named apart: a server that marks a class with another DSCP than the policy
(its host file is wrong), and a path that rewrites the DSCP between sender and receiver.
"""

from __future__ import annotations

from typing import Any

from twin.labdir import Lab
from twin.scenario.observations import Observations
from validators.registry import Params, dynamic
from validators.result import Finding, Result, Status, verdict

NAME = "dscp_preserved"


@dynamic(NAME)
def check(lab: Lab, obs: Observations, params: Params) -> list[Result]:
    """One result per traffic class seen in the run."""
    policy = {name: c.dscp for name, c in lab.fabric.qos.classes.items()}
    by_class: dict[str, list[dict[str, Any]]] = {}
    for flow in obs.flows:
        by_class.setdefault(flow["class"], []).append(flow)
    if not by_class:
        return [Result(NAME, "classes", Status.NOT_OBSERVABLE, "the scenario sent no traffic")]
    results = []
    for cls, flows in sorted(by_class.items()):
        want = policy.get(cls)
        findings: list[Finding] = []
        marked = sorted({(f["src"], f["dscp_sent"]) for f in flows if f["dscp_sent"] != want})
        findings += [
            Finding(
                src, f"marks class {cls} with DSCP {dscp}, policy says {want}", where="host.json"
            )
            for src, dscp in marked
        ]
        for f in flows:
            got = {int(d) for d in f["dscp_received"]}
            if got - {f["dscp_sent"]}:
                findings.append(
                    Finding(
                        f"{f['src']}->{f['dst']}",
                        f"sent DSCP {f['dscp_sent']}, received {sorted(got)}",
                        where="path",
                    )
                )
        received = sum(f["received"] for f in flows)
        results.append(
            verdict(
                NAME,
                cls,
                findings,
                f"{received} packets of class {cls} arrived with DSCP {want}",
                {
                    "policy_dscp": want if want is not None else "none",
                    "flows": len(flows),
                    "packets": received,
                },
            )
        )
    return results
