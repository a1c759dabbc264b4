"""`mtu`: jumbo packets (the host MTU, DF set) cross every path; a hop with a smaller MTU is
found and named: the switch that answered "fragmentation needed", and its port configured
with that MTU (or the sending NIC when its own MTU is too small)."""

from __future__ import annotations

from twin.lab.directory import Lab
from twin.scenario.observations import Observations
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


def _named_first(item: tuple[tuple[str, str, str, int], list[str]]) -> tuple[bool, str]:
    """Findings naming a hop and its MTU before those that could only name the sender."""
    (node, port, where, mtu), _ = item
    return mtu == 0, f"{node} {port} {where} {mtu}"


@dynamic(NAME, needs={"probes"})
def check(lab: Lab, obs: Observations, params: Params) -> list[Result]:
    """Every ordered pair's jumbo probe must have passed."""
    probes = obs.probes or []
    owners = _owners(lab)
    size = probes[0]["size"] if probes else 0
    reachable = [p for p in probes if p["reachable"]]
    if not reachable:
        return [
            Result(
                NAME,
                "paths",
                Status.NOT_OBSERVABLE,
                f"no server pair answered a small ping: none of the {len(probes)} paths "
                "could be probed with jumbo frames",
                {"paths": len(probes), "reachable": 0},
            )
        ]
    hops: dict[tuple[str, str, str, int], list[str]] = {}
    for p in reachable:
        if p["jumbo_ok"]:
            continue
        if p["frag_from"] == "local":
            node, port, where = p["src"], "NIC", "host.json"
        elif p["frag_from"]:
            node = owners.get(p["frag_from"], p["frag_from"])
            port = _port_with_mtu(lab, node, int(p["mtu"] or 0)) if node in lab.graph else ""
            where = "PORT"
        else:
            node, port, where = p["src"], "", "path"
        key = (node, port, where, int(p["mtu"] or 0))
        hops.setdefault(key, []).append(f"{p['src']}->{p['dst']}")
    findings = [
        Finding(
            node,
            (
                f"MTU {mtu} drops {size}-byte packets on {len(pairs)} paths (e.g. {pairs[0]})"
                if mtu
                else f"{size}-byte packets with DF vanish, no ICMP answer, on {len(pairs)} "
                f"paths (e.g. {pairs[0]})"
            ),
            port=port,
            where=where,
        )
        for (node, port, where, mtu), pairs in sorted(hops.items(), key=_named_first)
    ]
    unjudged = len(probes) - len(reachable)
    return [
        verdict(
            NAME,
            "paths",
            findings,
            f"{size}-byte packets with DF cross all {len(reachable)} reachable paths"
            + (f" ({unjudged} unreachable, not judged)" if unjudged else ""),
            {
                "packet_bytes": size,
                "paths": len(probes),
                "reachable": len(reachable),
                "blocked": sum(len(v) for v in hops.values()),
            },
        )
    ]
