"""`twin graph`: the topology as dot (rendered by Graphviz's `dot -Tsvg`), mermaid, SVG and
PNG, with tiers, MLAG pairs, port names on request, and a simulated run's overlay."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.simlab import paused_incast, small_lab
from twin import topology
from twin.labdir import Lab
from twin.scenario.observations import Observations

TWIN = Path(sys.executable).with_name("twin")
pytestmark = pytest.mark.skipif(shutil.which("dot") is None, reason="needs Graphviz (graphviz)")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    return Lab.open(small_lab(tmp_path_factory.mktemp("graph") / "lab"))


def twin(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(TWIN), *argv], capture_output=True, text=True)


def test_dot_renders_with_graphviz_with_every_node_and_link(lab: Lab) -> None:
    done = twin("graph", str(lab.path))
    assert done.returncode == 0 and done.stderr == ""
    svg = subprocess.run(["dot", "-Tsvg"], input=done.stdout, capture_output=True, text=True)
    assert svg.returncode == 0 and svg.stderr == ""
    titles = re.findall(r"<title>([^<]+)</title>", svg.stdout)
    for node in lab.graph.nodes:
        assert node in titles
    pairs = {frozenset((a, b)) for a, b in lab.graph.edges()}
    drawn = {frozenset(t.split("&#45;&#45;")) for t in titles if "&#45;&#45;" in t}
    assert pairs <= drawn  # the rest are the invisible edges that order a tier
    # Tiers: one rank per role, spines above leaves above servers.
    ranks = re.findall(r"\{ rank=same; // (\w+)", done.stdout)
    assert ranks == ["spine", "leaf", "server"]
    mlag = [line for line in done.stdout.splitlines() if "MLAG" in line]
    peers = {frozenset((n, str(d["mlag_peer"]))) for n, d in lab.graph.nodes(data=True)
             if d.get("mlag_peer")}  # fmt: skip
    assert len(mlag) == len(peers) == 2 and all("style=dashed" in line for line in mlag)


def test_port_names_on_request(lab: Lab) -> None:
    plain = twin("graph", str(lab.path)).stdout
    named = twin("graph", str(lab.path), "--ports").stdout
    edge = next(e for *_, e in lab.graph.edges(data=True) if e["kind"] != "server")
    assert edge["a_port"] not in plain
    assert f'"{edge["a_port"]}' in named or f", {edge['a_port']}" in named


def test_mermaid_and_pictures(lab: Lab, tmp_path: Path) -> None:
    text = twin("graph", str(lab.path), "-f", "mermaid").stdout
    assert text.startswith("flowchart TB")
    assert text.count("---|") + text.count("-.-|") == len(topology.build(lab).edges)
    for suffix, magic in (("svg", b"<svg"), ("png", b"\x89PNG")):
        out = tmp_path / f"fabric.{suffix}"
        done = twin("graph", str(lab.path), "-o", str(out))
        assert done.returncode == 0, done.stderr
        assert magic in out.read_bytes()[:400]
    assert twin("graph", str(lab.path), "-f", "png").returncode == 2  # not to a terminal


def test_a_runs_overlay_shows_utilisation_pauses_and_failed_links(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    fault = {"at": 0.001, "fault": "link-down", "link": "leaf1:spine1"}
    run = paused_incast(tmp_path_factory.mktemp("graphrun") / "lab", [fault], {})
    lab = Lab.open(run.parent.parent)
    obs = Observations.open(run)
    done = twin("graph", str(lab.path), "--run", str(run), "--json")
    assert done.returncode == 0, done.stderr
    topo = json.loads(done.stdout)
    edges = {(e["a"], e["b"]): e for e in topo["edges"]}
    assert edges[("spine1", "leaf1")]["down"] == ["fault1 down"]
    # Utilisation: the busier direction's bytes the simulator sent on the link, over the
    # simulated span, against its speed; and it agrees with the ports' counters.
    span = obs.extra("sim")["simulated_s"]
    leaf, server = "leaf4", "server4"
    (port,) = [e for _, b, e in lab.graph.edges(leaf, data=True) if b == server]
    sent = {
        end: sum(r["tx_bytes"] for r in obs.extra("pfc") if r["port"] == end)
        for end in (f"{leaf}:{port['a_port']}", f"{server}:{port['b_port']}")
    }
    edge = edges[(leaf, server)]
    expected = max(sent.values()) * 8 / (edge["speed_mbps"] * 1e6 * span)
    assert edge["utilisation"] == pytest.approx(expected) and expected > 0.3
    first, last = obs.counters["samples"][0]["c"], obs.counters["samples"][-1]["c"]
    column = obs.counters["fields"].index("tx_bytes")
    bundle = f"{leaf}:{port['a_bundle'] or port['a_port']}"
    assert last[bundle][column] - first[bundle][column] == sent[f"{leaf}:{port['a_port']}"]
    paused = {r["port"].split(":")[0] for r in obs.extra("pfc") if r["paused_s"] > 0}
    assert paused and set(topo["paused"]) == paused
    dot = twin("graph", str(lab.path), "--run", str(run)).stdout
    assert "fault1 down" in dot and "paused:" in dot
    svg = subprocess.run(["dot", "-Tsvg"], input=dot, capture_output=True, text=True)
    assert svg.returncode == 0 and svg.stderr == ""
