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
from twin.lab.directory import Lab
from twin.outputs import graph as topology
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


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    """The reference fabric: 50 servers, 8 leaves, 4 spines (136 links, 120 drawn edges)."""
    from twin.intent import fabric as intent
    from twin.lab import directory as labdir

    source = Path(__file__).resolve().parents[2] / "examples" / "reference.yaml"
    out = tmp_path_factory.mktemp("graphref") / "lab"
    labdir.generate(intent.load(source), out, str(source))
    return Lab.open(out)


def test_every_bundle_is_labelled_at_any_size_and_servers_wrap_into_rows(reference: Lab) -> None:
    done = twin("graph", str(reference.path))
    assert done.returncode == 0, done.stderr
    edges = [line for line in done.stdout.splitlines() if " -- " in line and "invis" not in line]
    assert len(edges) == len(topology.build(reference).edges) > 100
    labels = [re.search(r'label="([^"]*)"', line) for line in edges]
    assert all(m and re.fullmatch(r"(MLAG )?(\d+x)?\d+G", m.group(1)) for m in labels), edges
    assert sum("MLAG" in line for line in edges) == 4
    uplink = next(line for line in edges if '"spine1" -- "leaf1"' in line)
    width = reference.graph.number_of_edges("leaf1", "spine1")
    assert f'label="{width}x400G"' in uplink and width > 1  # the PortChannel's links
    ranks = re.findall(r"\{ rank=same; // (\w+(?: row \d+)?)", done.stdout)
    assert ranks == ["spine", "leaf", "server row 1", "server row 2", "server row 3",
                     "server row 4"]  # fmt: skip
    svg = subprocess.run(["dot", "-Tsvg"], input=done.stdout, capture_output=True, text=True)
    assert svg.returncode == 0 and svg.stderr == ""
    ports = twin("graph", str(reference.path), "--ports").stdout
    heads = re.findall(r'"spine1" -- "leaf1" .*headlabel="([^"]*)"', ports)
    assert heads and re.fullmatch(r"PortChannel|Ethernet\d+(,\d+)+", heads[0]), heads


def test_an_unknown_suffix_is_refused_in_one_line(lab: Lab, tmp_path: Path) -> None:
    out = tmp_path / "fabric.jpg"
    done = twin("graph", str(lab.path), "-o", str(out))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert f"{out}: no format for .jpg" in done.stderr and not out.exists()
    assert twin("graph", str(lab.path), "-o", str(out), "-f", "svg").returncode == 0
    assert b"<svg" in out.read_bytes()[:400]


def test_another_labs_run_is_refused(
    reference: Lab, tmp_path_factory: pytest.TempPathFactory
) -> None:
    run = paused_incast(tmp_path_factory.mktemp("graphother") / "lab", [], {})
    done = twin("graph", str(reference.path), "--run", str(run))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert f"{run}: a run of lab small, not of reference" in done.stderr
