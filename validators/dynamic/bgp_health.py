"""`bgp_health`: every session Established at the end, the expected routes present, and no
session flapping that no fault on the timeline explains; and at the start of the run, what a
deploy waits for: every leaf reaches every remote server subnet over its full uplink width
(the design's; a twin whose configs kept it from converging is judged here, naming each
leaf and prefix).

A session going down is explained when a fault touched either of its ends (a link of that
node, the node itself, or one of its daemons) within `holdtime` + 2 s before it. Expected
routes: every leaf holds a route to every other switch's loopback and to every remote server
subnet in its FIB at the end. `max_flaps` (default 0) unexplained downs are allowed.
"""

from __future__ import annotations

from ipaddress import IPv4Network

from twin.design.graph import short_paths
from twin.lab.directory import Lab
from twin.model.fib import Routes
from twin.scenario.observations import Observations
from twin.scenario.records import FaultRecord
from validators.dynamic.failover import fault_began
from validators.registry import Params, dynamic
from validators.result import Finding, Result, Status, verdict

NAME = "bgp_health"


def _touched(lab: Lab, fault: FaultRecord) -> set[str]:
    """The nodes a fault acted on: its node, or both ends of its link (`ends`, by node and
    SONiC port; else the link's name, `NODE:PEER` or `NODE:PORT`)."""
    nodes = {str(fault.get("node", ""))}
    nodes |= {end.split(":")[0] for end in fault.get("ends", [])}
    node, _, port = str(fault.get("link", "")).partition(":")
    nodes.add(node)
    if port in lab.graph.nodes:
        nodes.add(port)
    elif node in lab.graph.nodes:
        for _, peer, e in lab.graph.edges(node, data=True):
            if e["a_port" if e["a"] == node else "b_port"] == port:
                nodes.add(str(peer))
    return nodes - {""}


def _addresses(lab: Lab) -> dict[str, str]:
    """Address -> node, for the link ends of the design (BGP peers are named by address)."""
    owners = {}
    for _, _, e in lab.graph.edges(data=True):
        for side in ("a", "b"):
            if e.get(f"{side}_ip"):
                owners[e[f"{side}_ip"].split("/")[0]] = e[side]
    return owners


def _widths(routes: Routes) -> dict[str, int]:
    """Paths per prefix of one node's FIB."""
    return {str(prefix): len(hops) for prefix, hops in routes.items()}


@dynamic(NAME, needs={"bgp", "fib"}, max_flaps=0)
def check(lab: Lab, obs: Observations, params: Params) -> list[Result]:
    """Sessions, routes and flaps."""
    max_flaps = int(params["max_flaps"])
    window = lab.fabric.bgp.holdtime + 2.0
    sessions = obs.bgp["end"]
    down = [
        Finding(s.node, f"session to {s.name or s.peer} is {s.state}", port=s.peer, where="BGP")
        for s in sessions
        if s.state != "Established"
    ]
    results = [
        verdict(
            NAME,
            "sessions",
            down,
            f"all {len(sessions)} sessions Established",
            {"sessions": len(sessions), "not_established": len(down)},
        )
    ]
    missing = [
        Finding(leaf, f"{short.partition(': ')[2]} at the start", where="FIB")
        for leaf in lab.nodes("leaf")
        for short in short_paths(lab.graph, leaf, _widths(obs.fib("start").get(leaf, {})))
    ]
    fib = obs.fib("end")
    loopbacks = {n: lab.graph.nodes[n]["loopback"] for n in lab.switches()}
    for leaf in lab.nodes("leaf"):
        have = {str(prefix) for prefix in fib.get(leaf, {})}
        want = {str(IPv4Network(lp)) for n, lp in loopbacks.items() if n != leaf}
        want |= {
            lab.graph.nodes[o]["subnet"]
            for o in lab.nodes("leaf")
            if lab.graph.nodes[o]["subnet"] != lab.graph.nodes[leaf]["subnet"]
        }
        missing += [Finding(leaf, f"no route to {p}", where="FIB") for p in sorted(want - have)]
    results.append(
        verdict(
            NAME,
            "routes",
            missing,
            "every leaf reached every remote server subnet over its full uplink width at the "
            "start and has every expected route at the end",
            {"missing_routes": len(missing)},
        )
    )
    faults = obs.run.get("faults", [])
    owners = _addresses(lab)
    flaps = []
    for event in obs.events:
        if event["event"] != "bgp" or event["state"] != "down":
            continue
        ends = {event["node"], owners.get(event["peer"], event["peer"])}
        explained = any(
            ends & _touched(lab, f) or f.get("fault") == "node-down"
            for f in faults
            if fault_began(f) - 1.0 <= event["t"] <= f["t"] + window
        )
        if not explained:
            flaps.append(
                Finding(
                    event["node"],
                    f"session to {event['peer']} went down "
                    f"({event['reason'] or 'no reason'}) with no fault to explain it",
                    port=event["peer"],
                    where="BGP",
                )
            )
    status = Status.FAIL if len(flaps) > max_flaps else Status.PASS
    reason = (
        f"{len(flaps)} unexplained session downs: {flaps[0]}"
        if status is Status.FAIL
        else f"{len(flaps)} unexplained session downs (allowed {max_flaps})"
    )
    results.append(
        Result(
            NAME,
            "flaps",
            status,
            reason,
            {"unexplained_downs": len(flaps)},
            flaps if status is Status.FAIL else [],
        )
    )
    return results
