"""`lossless_isolation`: bulk traffic must not ride the lossless priority of the collectives.

The article's incident: a backup job marked into the RoCE class filled the lossless queue and
its PFC pauses spread hop by hop, so All-Reduce latency spiked. For every phase that is not a
collective (backup, micro-bursts, incast unless `allow_incast`), the DSCP its packets arrived
with is classified the way each leaf's config does (DSCP_TO_TC_MAP, TC_TO_PRIORITY_GROUP_MAP,
PORT_QOS_MAP pfc_enable); a phase landing on a PFC-enabled priority fails.
"""

from __future__ import annotations

from twin.labdir import Lab
from twin.scenario.observations import Observations
from validators.registry import Params, dynamic
from validators.result import Finding, Result, Status, verdict

NAME = "lossless_isolation"
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")


def lossless_dscps(lab: Lab, leaf: str) -> dict[int, int]:
    """DSCP -> PFC priority, for the DSCPs a leaf classifies into a lossless priority."""
    db = lab.config_db(leaf)
    qos = db.get("PORT_QOS_MAP", {})
    ports = [p for p in qos if p != "global"]
    if not ports:
        return {}
    first = qos[ports[0]]
    enabled = {int(p) for p in first.get("pfc_enable", "").split(",") if p}
    dscp_map = db.get("DSCP_TO_TC_MAP", {}).get(first.get("dscp_to_tc_map", ""), {})
    pg_map = db.get("TC_TO_PRIORITY_GROUP_MAP", {}).get(first.get("tc_to_pg_map", ""), {})
    result = {}
    for dscp, tc in dscp_map.items():
        pg = int(pg_map.get(tc) or tc)
        if int(tc) in enabled and pg in enabled:
            result[int(dscp)] = int(tc)
    return result


@dynamic(NAME, allow_incast=False)
def check(lab: Lab, obs: Observations, params: Params) -> list[Result]:
    """One result for the run: bulk phases found in a lossless priority."""
    kinds = {p["label"]: p["kind"] for p in obs.run["phases"]}
    bulk = {
        label
        for label, kind in kinds.items()
        if kind not in COLLECTIVES and not (kind == "incast" and params["allow_incast"])
    }
    if not bulk:
        return [Result(NAME, "bulk", Status.NOT_OBSERVABLE, "no bulk phase in the scenario")]
    leaves = lab.nodes("leaf")
    lossless = lossless_dscps(lab, leaves[0]) if leaves else {}
    findings = []
    for label in sorted(bulk):
        flows = [f for f in obs.flows if f["phase"] == label]
        dscps = {int(d) for f in flows for d in f["dscp_received"]}
        for dscp in sorted(dscps & set(lossless)):
            pairs = sorted({f"{f['src']}->{f['dst']}" for f in flows})
            findings.append(
                Finding(
                    pairs[0],
                    f"{kinds[label]} phase {label} arrives with DSCP {dscp}: lossless "
                    f"priority {lossless[dscp]}, shared with the collectives",
                    where=label,
                )
            )
    return [
        verdict(
            NAME,
            "bulk",
            findings,
            f"{len(bulk)} bulk phases stay out of the lossless priorities",
            {"bulk_phases": len(bulk), "in_lossless": len(findings)},
        )
    ]
