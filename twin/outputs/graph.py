"""The topology of a lab as a picture: Graphviz dot, mermaid, and SVG/PNG through Graphviz's
`dot` (`twin graph`).

Nodes are placed in tiers by role (superspines, spines, leaves, servers), parallel links
between two nodes are drawn as one edge labelled with their count and speed, MLAG peer links
dashed and labelled `MLAG`. On request the edges carry the port names at each end. With a
run, the picture shows what happened in it: each link's utilisation (the busier direction's
bytes over the run, against the link's speed), ports paused by PFC (from `pfc.json`) and
links a fault took down (with the faults that took them down and back up).
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from twin import safeio
from twin.errors import LabError
from twin.lab.directory import Lab
from twin.scenario.observations import Observations
from twin.scenario.records import FaultRecord

TIERS = ("superspine", "spine", "leaf", "server")
ROW = 16
"""Servers per row: a larger server tier wraps onto rows of its own under the leaves."""
FILL = {"superspine": "#c6dbef", "spine": "#9ecae1", "leaf": "#a1d99b", "server": "#fdd0a2"}


@dataclass
class Edge:
    """The links between two nodes, drawn as one edge."""

    a: str
    b: str
    kind: str
    count: int = 0
    speed_mbps: int = 0
    ports: list[tuple[str, str]] = field(default_factory=list)
    utilisation: float | None = None
    down: list[str] = field(default_factory=list)
    """The faults that took the link down or up during the run, in order."""


@dataclass
class Topology:
    """What is drawn: nodes by tier, edges, and a run's paused ports by node."""

    name: str
    tiers: dict[str, list[str]]
    edges: list[Edge]
    paused: dict[str, list[str]] = field(default_factory=dict)
    run: str = ""


def build(lab: Lab, servers: bool = True) -> Topology:
    """A lab's nodes in tiers and one edge per pair of linked nodes."""
    g = lab.graph
    tiers = {t: sorted(lab.nodes(t), key=_order) for t in TIERS if t != "server" or servers}
    shown = {n for nodes in tiers.values() for n in nodes}
    edges: dict[tuple[str, str], Edge] = {}
    for a, b, e in g.edges(data=True):
        if a not in shown or b not in shown:
            continue
        (a, ap), (b, bp) = sorted([(e["a"], e["a_port"]), (e["b"], e["b_port"])], key=_tier)
        edge = edges.setdefault((a, b), Edge(a, b, str(e["kind"])))
        edge.count += 1
        edge.speed_mbps += int(e["speed"])
        edge.ports.append((ap, bp))
    return Topology(lab.name, {t: n for t, n in tiers.items() if n}, list(edges.values()))


def _order(node: str) -> tuple[str, int]:
    digits = "".join(c for c in node if c.isdigit())
    return node.rstrip("0123456789"), int(digits or 0)


def _tier(end: tuple[str, str]) -> tuple[int, tuple[str, int]]:
    role = end[0].rstrip("0123456789")
    return (TIERS.index(role) if role in TIERS else len(TIERS), _order(end[0]))


def overlay(topo: Topology, lab: Lab, obs: Observations) -> Topology:
    """The topology with a run's link utilisation, paused ports and links taken down."""
    topo.run = obs.path.name
    for edge, sent, seconds in _carried(topo, lab, obs):
        if seconds > 0 and edge.speed_mbps and sent:
            edge.utilisation = max(sent) * 8 / (edge.speed_mbps * 1e6 * seconds)
    for row in obs.extra("pfc") or []:
        if float(row.get("paused_s", 0)) > 0:
            node, port = str(row["port"]).split(":", 1)
            topo.paused.setdefault(node, []).append(f"{port} prio {row['priority']}")
    pairs = {frozenset((e.a, e.b)): e for e in topo.edges}
    for i, fault in enumerate(obs.run.get("faults", [])):
        if fault.get("fault") in ("link-down", "link-up"):
            hit = pairs.get(_link_nodes(lab, fault))
            if hit is not None:
                hit.down.append(f"fault{i + 1} {fault['fault'].removeprefix('link-')}")
    return topo


def _carried(
    topo: Topology, lab: Lab, obs: Observations
) -> Iterator[tuple[Edge, list[int], float]]:
    """Per edge, the bytes each end sent over the run and the seconds they took: from the
    simulator's per-port counts (`pfc.json`, over the simulated span) when it played the
    data plane (alone or in a hybrid run), else from the port counters over the run."""
    rows = obs.extra("pfc") or []
    if rows and all("tx_bytes" in r for r in rows):
        seconds = float((obs.extra("sim") or {}).get("simulated_s", 0.0))
        sent: dict[str, int] = defaultdict(int)
        for r in rows:
            sent[str(r["port"])] += int(r["tx_bytes"])
        for e in topo.edges:
            ends = [
                sum(sent[f"{e.a}:{a}"] for a, _ in e.ports),
                sum(sent[f"{e.b}:{b}"] for _, b in e.ports),
            ]
            yield e, ends, seconds
        return
    keys = _counter_keys(lab)
    for e in topo.edges:
        counted = [_sent(obs, keys, x, y) for x, y in ((e.a, e.b), (e.b, e.a))]
        yield e, [c for c in counted if c is not None], obs.duration


def _counter_keys(lab: Lab) -> dict[tuple[str, str], set[str]]:
    """(node, peer) -> the counter keys (`node:port`, a bundle's name when bundled) of the
    node's links to the peer."""
    keys: dict[tuple[str, str], set[str]] = defaultdict(set)
    for _, _, e in lab.graph.edges(data=True):
        for mine, theirs in (("a", "b"), ("b", "a")):
            port = e.get(f"{mine}_bundle") or e[f"{mine}_port"]
            keys[(e[mine], e[theirs])].add(f"{e[mine]}:{port}")
    return keys


def _sent(obs: Observations, keys: dict[tuple[str, str], set[str]], a: str, b: str) -> int | None:
    """Bytes `a` sent towards `b` over the run, None when no counter saw them."""
    samples = obs.counters["samples"]
    column = obs.counters["fields"].index("tx_bytes")
    found = [k for k in keys.get((a, b), ()) if k in samples[0]["c"] and k in samples[-1]["c"]]
    if len(samples) < 2 or not found:
        return None
    return sum(int(samples[-1]["c"][k][column] - samples[0]["c"][k][column]) for k in found)


def _link_nodes(lab: Lab, fault: FaultRecord) -> frozenset[str]:
    """The two nodes of a link fault (`leaf1:spine1`, or a node and its port `server2:nic0`)."""
    ends = fault.get("ends")
    if isinstance(ends, list) and len(ends) == 2:
        return frozenset(str(e).split(":")[0] for e in ends)
    node, _, other = str(fault.get("link", "")).partition(":")
    if other in lab.graph:
        return frozenset((node, other))
    for _, peer, e in lab.graph.edges(node, data=True) if node in lab.graph else ():
        if other in (e["a_port"], e["b_port"]) and node in (e["a"], e["b"]):
            return frozenset((node, peer))
    return frozenset()


def _colour(edge: Edge) -> str:
    if edge.utilisation is None:
        return "black"
    return "red" if edge.utilisation >= 0.8 else "orange" if edge.utilisation >= 0.5 else "green3"


def _label(edge: Edge) -> str:
    """'2x400G', the MLAG mark, the utilisation and the faults of an edge."""
    per = edge.speed_mbps // max(edge.count, 1) // 1000
    parts = ["MLAG " if edge.kind == "peerlink" else ""]
    parts.append(f"{edge.count}x{per}G" if edge.count > 1 else f"{per}G")
    if edge.utilisation is not None:
        parts.append(f" {edge.utilisation:.0%}")
    if edge.down:
        parts.append(" " + ", ".join(edge.down))
    return "".join(parts)


def _quote(text: str) -> str:
    return '"' + text.replace('"', '\\"') + '"'


def dot(topo: Topology, ports: bool = False) -> str:
    """The topology in Graphviz's dot language."""
    title = topo.name + (f" (run {topo.run})" if topo.run else "")
    if topo.run:
        title += "\nlink utilisation: green < 50 % <= orange < 80 % <= red; dashed red: taken down"
    out = [f"graph {_quote(topo.name)} {{", f"  label={_quote(title)}; labelloc=t;"]
    out.append("  rankdir=TB; nodesep=0.3; ranksep=1.2; newrank=true;")
    out.append('  node [shape=box, style="rounded,filled"];')
    for tier, nodes in topo.tiers.items():
        rows = (
            [nodes[i : i + ROW] for i in range(0, len(nodes), ROW)] if tier == "server" else [nodes]
        )
        for r, row in enumerate(rows):
            out.append(f"  {{ rank=same; // {tier}{f' row {r + 1}' if len(rows) > 1 else ''}")
            for n in row:
                paused = topo.paused.get(n)
                text = n + ("\\npaused: " + ", ".join(paused[:3]) if paused else "")
                extra = ", color=orange, penwidth=3" if paused else ""
                fill = _quote(FILL[tier])
                out.append(f"    {_quote(n)} [label={_quote(text)}, fillcolor={fill}{extra}];")
            if len(row) > 1:  # keeps the row in name order
                out.append(f"    {' -- '.join(_quote(n) for n in row)} [style=invis];")
            out.append("  }")
        for above, below in itertools.pairwise(rows):  # each row under the last
            out.append(f"  {_quote(above[0])} -- {_quote(below[0])} [style=invis];")
    for e in topo.edges:
        attrs = [
            f"label={_quote(_label(e))}",
            f"tooltip={_quote(_label(e))}",
            f"color={_colour(e)}",
            "fontsize=9",
        ]
        if e.kind == "peerlink":
            attrs += ["style=dashed", "constraint=false", "penwidth=2"]
        if e.down:
            attrs += ["style=dashed", "color=red", "penwidth=2"]
        if ports:
            attrs += [
                f"taillabel={_quote(compact([a for a, _ in e.ports]))}",
                f"headlabel={_quote(compact([b for _, b in e.ports]))}",
                "labelfontsize=7",
            ]
        out.append(f"  {_quote(e.a)} -- {_quote(e.b)} [{', '.join(attrs)}];")
    out.append("}")
    return "\n".join(out) + "\n"


def compact(ports: list[str]) -> str:
    """Port names of a bundle, their common name said once.

    >>> compact(["Ethernet0", "Ethernet8", "Ethernet16"]), compact(["nic0"])
    ('Ethernet0,8,16', 'nic0')
    >>> compact(["Ethernet4", "PortChannel1"])
    'Ethernet4, PortChannel1'
    """
    stems = {p.rstrip("0123456789") for p in ports}
    if len(stems) != 1 or len(ports) == 1:
        return ", ".join(ports)
    stem = stems.pop()
    return stem + ",".join(p[len(stem) :] for p in ports)


def _id(node: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in node)


def mermaid(topo: Topology, ports: bool = False) -> str:
    """The topology as a mermaid flowchart, one subgraph per tier."""
    out = ["flowchart TB"]
    for tier, nodes in topo.tiers.items():
        out.append(f"  subgraph {tier}s")
        for n in nodes:
            paused = topo.paused.get(n)
            text = n + ("<br/>paused: " + ", ".join(paused[:3]) if paused else "")
            out.append(f'    {_id(n)}["{text}"]')
        out.append("  end")
    for e in topo.edges:
        text = _label(e)
        if ports:
            text += f" {compact([a for a, _ in e.ports])} - {compact([b for _, b in e.ports])}"
        link = "-.-" if e.kind == "peerlink" or e.down else "---"
        out.append(f'  {_id(e.a)} {link}|"{text.strip()}"| {_id(e.b)}')
    for tier in topo.tiers:
        out.append(f"  style {tier}s fill:{FILL[tier]}22")
    return "\n".join(out) + "\n"


def render(source: str, fmt: str) -> bytes:
    """dot source drawn by Graphviz's `dot` as `fmt` (svg, png); one line when dot is
    missing or refuses it."""
    exe = shutil.which("dot")
    if exe is None:
        raise LabError("Graphviz's dot is not installed (apt-get install graphviz)")
    done = subprocess.run([exe, f"-T{fmt}"], input=source.encode(), capture_output=True)
    if done.returncode != 0:
        raise LabError(f"dot -T{fmt}: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def write(path: Path, data: bytes) -> None:
    """Write a picture (refusing a directory or a symlink)."""
    if path.is_symlink() or path.is_dir():
        raise LabError(f"{path}: not a regular file: will not overwrite it")
    safeio.write(path, data)
