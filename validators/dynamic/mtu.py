"""`mtu`: jumbo packets (the host MTU, DF set) cross every path; a hop with a smaller MTU is
found and named: the switch that answered "fragmentation needed", and its port configured
with that MTU (or the sending NIC when its own MTU is too small)."""

from __future__ import annotations

from twin.labdir import Lab
from twin.observations import Observations
from validators.registry import Params, dynamic
from validators.result import Finding, Result, Status, verdict

NAME = "mtu"


def _owners(lab: Lab) -> dict[str, str]:
    """Address -> node, from the design (link ends, loopbacks, SVIs)."""
    owners = {}
    for _, _, e in lab.graph.edges(data=True):
        for side in ("a", "b"):
            if e[f"{side}_ip"]:
                owners[e[f"{side}_ip"].split("/")[0]] = e[side]
    for node, attrs in lab.graph.nodes(data=True):
        for key in ("loopback", "svi"):
            if attrs.get(key):
                owners[attrs[key].split("/")[0]] = node
    return owners


def _port_with_mtu(lab: Lab, node: str, mtu: int) -> str:
    if lab.graph.nodes[node]["role"] == "server":
        return ""
    db = lab.config_db(node)
    for table in ("PORT", "PORTCHANNEL"):
        for port, attrs in db.get(table, {}).items():
            if attrs.get("admin_status") == "up" and int(attrs.get("mtu", 9100)) == mtu:
                return port
    return ""


@dynamic(NAME)
def check(lab: Lab, obs: Observations, params: Params) -> list[Result]:
    """Every ordered pair's jumbo probe must have passed."""
    if obs.probes is None:
        return [Result(NAME, "paths", Status.NOT_OBSERVABLE, "the run did not probe")]
    owners = _owners(lab)
    hops: dict[tuple[str, str, int], list[str]] = {}
    for p in obs.probes:
        if p["jumbo_ok"] or not p["reachable"]:
            continue
        if p["frag_from"] == "local":
            node, port = p["src"], "NIC"
        elif p["frag_from"]:
            node = owners.get(p["frag_from"], p["frag_from"])
            port = _port_with_mtu(lab, node, int(p["mtu"] or 0)) if node in lab.graph else ""
        else:
            node, port = p["src"], "path (no ICMP answer)"
        hops.setdefault((node, port, int(p["mtu"] or 0)), []).append(f"{p['src']}->{p['dst']}")
    findings = [
        Finding(
            node,
            f"MTU {mtu} drops {obs.probes[0]['size']}-byte packets on "
            f"{len(pairs)} paths (e.g. {pairs[0]})",
            port=port,
            where="PORT",
        )
        for (node, port, mtu), pairs in sorted(hops.items())
    ]
    size = obs.probes[0]["size"] if obs.probes else 0
    return [
        verdict(
            NAME,
            "paths",
            findings,
            f"{size}-byte packets with DF cross all {len(obs.probes)} paths",
            {
                "packet_bytes": size,
                "paths": len(obs.probes),
                "blocked": sum(len(v) for v in hops.values()),
            },
        )
    ]
