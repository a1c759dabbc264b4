"""`dscp_preserved`: each class arrives with the DSCP the fabric's QoS policy gives it.

Two ways to fail, named apart: a server that marks a class with another DSCP than the policy
(its host file is wrong), and a path that rewrites the DSCP between sender and receiver.
"""

from __future__ import annotations

from collections import Counter

from twin.lab.directory import Lab
from twin.scenario.observations import Observations
from twin.scenario.records import FlowRecord
from validators.registry import Params, dynamic
from validators.result import Finding, Result, Status, verdict

NAME = "dscp_preserved"


def groups(flows: list[FlowRecord]) -> dict[tuple[str, int, int], list[FlowRecord]]:
    """Flows by what the receiver counts them under. A live receiver counts by (destination,
    flow id): flows of two phases between the same servers on the same queue pair share one,
    their records carry the same counts (the sum of both), and they are judged together. A
    backend that counts each flow on its own (the simulator, the fake) gives records of one
    flow id different counts: each is then a group of its own (key index >= 0)."""
    by_id: dict[tuple[str, int], list[FlowRecord]] = {}
    for f in flows:
        by_id.setdefault((f["dst"], int(f["flow_id"])), []).append(f)
    out: dict[tuple[str, int, int], list[FlowRecord]] = {}
    for (dst, flow_id), group in by_id.items():
        if all(f["dscp_received"] == group[0]["dscp_received"] for f in group):
            out[(dst, flow_id, -1)] = group
        else:
            out.update({(dst, flow_id, i): [f] for i, f in enumerate(group)})
    return out


def received(flow: FlowRecord, group: list[FlowRecord]) -> set[int]:
    """The DSCPs a flow arrived with, as far as its receiver's counts can tell: those its
    group's other flows were not sent with (their counts are mixed with this flow's)."""
    others = {int(f["dscp_sent"]) for f in group if f is not flow}
    return {int(d) for d in flow["dscp_received"]} - others


def _rewritten(group: list[FlowRecord]) -> str | None:
    """What the path did to the DSCP of a group of flows, or None when every packet arrived
    with a DSCP it was sent with (and no more packets with it than were sent)."""
    sent: Counter[int] = Counter()
    for f in group:
        sent[int(f["dscp_sent"])] += int(f["sent"])
    got = {int(d): int(n) for d, n in group[0]["dscp_received"].items()}
    if all(d in sent and n <= sent[d] for d, n in got.items()):
        return None
    marks = " and ".join(str(d) for d in sorted(sent))
    return f"sent DSCP {marks}, received {sorted(got)}"


@dynamic(NAME, needs={"flows"})
def check(lab: Lab, obs: Observations, params: Params) -> list[Result]:
    """One result per traffic class seen in the run, from each flow's own counts where the
    backend keeps them apart (`groups`).

    A class fails when a server marks it with another DSCP than the policy (the host file
    is named, once per server), or when a flow of it arrives with a DSCP it was not sent with
    (the pair is named, once). Flows the receiver counts together (two phases on the same
    pair and queue pair, e.g. All-Reduce and a backup) are judged together: each DSCP that
    arrived must have been sent by one of them, no more often than it was sent. A class
    none of whose packets arrived (and no host mismarks) is not-observable.
    """
    policy = {name: c.dscp for name, c in lab.fabric.qos.classes.items()}
    if not obs.flows:
        return [Result(NAME, "classes", Status.NOT_OBSERVABLE, "the scenario sent no traffic")]
    findings: dict[str, dict[Finding, None]] = {}
    packets: Counter[str] = Counter()
    flows: Counter[str] = Counter()
    for group in groups(obs.flows).values():
        problem = _rewritten(group)
        received = {int(d): int(n) for d, n in group[0]["dscp_received"].items()}
        for cls in dict.fromkeys(f["class"] for f in group):
            found = findings.setdefault(cls, {})
            want = policy.get(cls)
            packets[cls] += received.get(want, 0) if want is not None else 0
            for f in group:
                if f["class"] != cls:
                    continue
                flows[cls] += 1
                if f["dscp_sent"] != want:
                    message = f"marks class {cls} with DSCP {f['dscp_sent']}, policy says {want}"
                    found[Finding(f["src"], message, where="host.json")] = None
            if problem:
                pair = f"{group[0]['src']}->{group[0]['dst']}"
                found[Finding(pair, problem, where="path")] = None
    results = []
    for cls, found in sorted(findings.items()):
        want = policy.get(cls)
        if not found and not any(f["received"] for f in obs.flows if f["class"] == cls):
            why = f"no packet of class {cls} arrived: no marking to judge"
            results.append(Result(NAME, cls, Status.NOT_OBSERVABLE, why, {"flows": flows[cls]}))
            continue
        ordered = sorted(found, key=lambda f: (f.where != "host.json", f.device, f.message))
        results.append(
            verdict(
                NAME,
                cls,
                ordered,
                f"{packets[cls]} packets of class {cls} arrived with DSCP {want}",
                {
                    "policy_dscp": want if want is not None else "none",
                    "flows": flows[cls],
                    "packets": packets[cls],
                },
            )
        )
    return results
