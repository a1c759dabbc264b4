"""`pfc_behaviour`: PFC kept the lossless classes lossless, without storms, close to where
congestion was.

From a run's per port and priority PFC counters (`pfc.json`) and its flows:

- `lossless drops`: no packet of a lossless class dropped by buffer overflow, judged against
  the intent: a drop on a PFC-enabled queue (headroom or thresholds too small for the cables
  and speeds), and a drop on any queue that carries, at that switch, the DSCP of a class the
  intent makes lossless (its config maps the DSCP to a TC without PFC: the class is lossy
  there whatever the config says);
- `pause storms`: no port paused (as an egress, by its peer) for more than `storm_share`
  (0.2) of the run's (simulated) time on any priority;
- `propagation`: pauses travel at most `max_hops` (2) hops from the congestion point. The
  congestion points are the nodes that sent pauses without being paused themselves; a node
  paused by one at distance d is at d+1. When every node that paused was itself paused (a
  loop of pauses, no congestion point to measure from), propagation is not observable.
  Victim flows are flows sent from a paused NIC to a destination other than the far end of
  a congested port (a congestion point's egress port whose queue filled to at least half the
  fullest one's, by `queues.json`; without queue samples, any port of a congestion point):
  they name whom the pauses hurt. With no pause frame at all, a pass needs ECN marks
  (congestion that paused nothing; the reason names the switches that marked most); with
  neither, nothing was congested and propagation is not observable.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from twin.configs.qos import traffic_class
from twin.lab.directory import Lab
from twin.scenario.observations import Observations
from validators.dynamic.lossless_isolation import lossless_by_intent
from validators.registry import Params, dynamic
from validators.result import Finding, Result, Status, verdict

NAME = "pfc_behaviour"
SCOPES = ("lossless drops", "pause storms", "propagation")


def _rows(obs: Observations) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = obs.extra("pfc") or []
    return rows


def peers(lab: Lab) -> dict[str, str]:
    """`node:port` -> the node at its other end."""
    out = {}
    for _, _, e in lab.graph.edges(data=True):
        out[f"{e['a']}:{e['a_port']}"] = e["b"]
        out[f"{e['b']}:{e['b_port']}"] = e["a"]
    return out


def depths(lab: Lab, rows: list[dict[str, Any]]) -> tuple[dict[str, int], set[str]]:
    """Per node reached by pauses, its distance in hops from a congestion point; and the
    congestion points."""
    far = peers(lab)
    senders = {r["port"].split(":")[0] for r in rows if r["pause_sent"]}
    paused_by: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        if r["pause_received"]:
            paused_by[r["port"].split(":")[0]].add(far.get(r["port"], ""))
    roots = {n for n in senders if not paused_by.get(n)}
    depth = dict.fromkeys(roots, 0)
    frontier = sorted(roots)
    while frontier:
        nxt = []
        for node, by in sorted(paused_by.items()):
            if node not in depth and by & set(frontier):
                depth[node] = min(depth[b] for b in by if b in depth) + 1
                nxt.append(node)
        frontier = nxt
    return depth, roots


def congested(obs: Observations, roots: set[str]) -> set[str]:
    """The congestion points' egress ports whose queue peaked at half the fullest one's or
    more (none without queue samples)."""
    queues: dict[str, dict[str, list[int]]] = (obs.extra("queues") or {}).get("queues", {})
    peaks = {
        port: max((max(series, default=0) for series in by_queue.values()), default=0)
        for port, by_queue in queues.items()
        if port.split(":")[0] in roots
    }
    top = max(peaks.values(), default=0)
    return {port for port, peak in peaks.items() if top and peak >= top / 2}


def victims(obs: Observations, lab: Lab, rows: list[dict[str, Any]], roots: set[str]) -> list[str]:
    """Flows sent from a NIC that was paused, to a destination other than the far end of a
    congested port."""
    far = peers(lab)
    servers = set(lab.nodes("server"))
    paused_nics = {r["port"].split(":")[0] for r in rows if r["pause_received"]}
    ports = congested(obs, roots) or {r["port"] for r in rows if r["port"].split(":")[0] in roots}
    hot = {far[port] for port in ports if port in far} | (roots & servers)
    return sorted(
        {
            f"{f['src']}->{f['dst']} ({f['phase']})"
            for f in obs.flows
            if f["src"] in paused_nics & servers and f["dst"] not in hot
        }
    )


def _at(row: dict[str, Any], message: str) -> Finding:
    """A finding on a pfc.json row's port and priority."""
    node, _, port = row["port"].partition(":")
    return Finding(node, message, port, f"priority {row['priority']}")


def carried(lab: Lab) -> dict[tuple[str, int], str]:
    """(switch, TC) -> the intent's lossless classes whose DSCP some port of the switch maps
    to that TC."""
    qos = lab.fabric.qos
    lossless = {name: c.dscp for name, c in qos.classes.items() if qos.lossless(name)}
    out: dict[tuple[str, int], set[str]] = defaultdict(set)
    switches = set(lab.switches())
    for _, _, e in lab.graph.edges(data=True):
        for node, port in ((e["a"], e["a_port"]), (e["b"], e["b_port"])):
            if node in switches:
                db = lab.config_db(node)
                for name, dscp in lossless.items():
                    out[(node, traffic_class(db, port, dscp))].add(name)
    return {key: ", ".join(sorted(names)) for key, names in out.items()}


def lossless_drops(lab: Lab, rows: list[dict[str, Any]]) -> list[Finding]:
    """Drops on PFC queues, and drops on any queue carrying a class the intent makes
    lossless."""
    classes = carried(lab) if any(r["drops"]["lossy"] for r in rows) else {}
    found = []
    for r in rows:
        lossy = classes.get((r["port"].split(":")[0], int(r["priority"])))
        if r["drops"]["lossless"]:
            found.append(_at(r, f"{r['drops']['lossless']} lossless drops"))
        if lossy and r["drops"]["lossy"]:
            what = f"{r['drops']['lossy']} drops on a queue without PFC carrying {lossy}"
            found.append(_at(r, f"{what} (lossless by the intent)"))
    return found


@dynamic(NAME, needs={"pfc", "flows"}, storm_share=0.2, max_hops=2)
def check(lab: Lab, obs: Observations, params: Params) -> list[Result]:
    """Lossless drops, pause storms and how far pauses spread."""
    if not obs.flows:
        why = "the scenario sent no traffic"
        return [Result(NAME, s, Status.NOT_OBSERVABLE, why) for s in SCOPES]
    rows = _rows(obs)
    sim = obs.extra("sim") or {}
    duration = max(float(sim.get("simulated_s", obs.duration)), 1e-12)
    drops = lossless_drops(lab, rows)
    sent = sum(r["pause_sent"] for r in rows)
    lossless = sum(int(f["sent"]) for f in obs.flows if lossless_by_intent(lab, f))
    counted: dict[str, int | float | str] = {
        "lossless_drops": sum(r["drops"]["lossless"] for r in rows),
        "pause_frames": sent,
        "lossless_packets": lossless,
    }
    if drops or lossless:
        ok = f"no drop of a lossless class ({sent} pause frames sent)"
        results = [verdict(NAME, "lossless drops", drops, ok, counted)]
    else:
        why = "no packet of a class the intent makes lossless was sent: nothing to keep lossless"
        results = [Result(NAME, "lossless drops", Status.NOT_OBSERVABLE, why, counted)]
    share = float(params["storm_share"])
    worst = max(rows, key=lambda r: r["paused_s"], default=None)
    storms = [
        _at(r, f"paused {r['paused_s'] / duration:.0%} of the run")
        for r in sorted(rows, key=lambda r: -r["paused_s"])
        if r["paused_s"] > share * duration
    ]
    results.append(
        verdict(
            NAME,
            "pause storms",
            storms,
            f"no port paused over {share:.0%} of the run"
            + (f" (most: {worst['port']} {worst['paused_s'] / duration:.1%})" if worst else ""),
            {
                "ports_over": len(storms),
                "max_paused_share": round((worst["paused_s"] if worst else 0.0) / duration, 4),
            },
        )
    )
    if not sent:
        results.append(_unpaused(rows))
        return results
    depth, roots = depths(lab, rows)
    if not roots:
        pausing = sorted({r["port"].split(":")[0] for r in rows if r["pause_sent"]})
        reason = (
            f"{sent} pause frames, but every node that paused was itself paused "
            f"({', '.join(pausing[:6])}): no congestion point to measure from"
        )
        results.append(Result(NAME, "propagation", Status.NOT_OBSERVABLE, reason, {"hops": 0}))
        return results
    hops = max(depth.values(), default=0)
    hurt = victims(obs, lab, rows, roots)
    limit = int(params["max_hops"])
    figures: dict[str, int | float | str] = {
        "hops": hops,
        "congestion_points": ",".join(sorted(roots)),
        "victim_flows": len(hurt),
        "paused_nodes": len(depth),
    }
    spread = [
        Finding(node, f"paused {d} hops from {', '.join(sorted(roots))}")
        for node, d in sorted(depth.items(), key=lambda i: -i[1])
        if d > limit
    ]
    spread += [Finding(v.split("->")[0], f"victim flow {v}") for v in hurt[:5]] if spread else []
    ok = f"pauses reached {hops} hops from {', '.join(sorted(roots))} (at most {limit})"
    results.append(verdict(NAME, "propagation", spread, ok, figures))
    return results


def _unpaused(rows: list[dict[str, Any]]) -> Result:
    """Propagation when no pause frame was sent: a pass when queues congested (ECN marks),
    naming the switches that marked most; not observable without."""
    marks: dict[str, int] = defaultdict(int)
    for r in rows:
        marks[r["port"].split(":")[0]] += r["ecn_marks"]
    total = sum(marks.values())
    if not total:
        reason = "no queue congested: no pause frame, no ECN mark"
        return Result(
            NAME, "propagation", Status.NOT_OBSERVABLE, reason, {"hops": 0, "ecn_marks": 0}
        )
    top = sorted(marks, key=lambda n: -marks[n])[:3]
    where = ", ".join(f"{n} {marks[n]}" for n in top)
    reason = f"no pause frame was sent: {total} ECN marks held congestion ({where})"
    return Result(NAME, "propagation", Status.PASS, reason, {"hops": 0, "ecn_marks": total})
