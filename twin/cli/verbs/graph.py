"""`twin graph LAB`: the topology as Graphviz dot, mermaid, SVG or PNG (docs/graph.md)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from twin.errors import LabError
from twin.lab.directory import Lab
from twin.outputs import graph as topology
from twin.scenario.observations import Observations

HELP = "draw a lab's topology (dot, mermaid, SVG, PNG), optionally with a run's utilisation"
FORMATS = ("dot", "mermaid", "svg", "png")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument("lab", type=Path, help="lab directory")
    p.add_argument(
        "-f",
        "--format",
        choices=FORMATS,
        help="output format (default: from -o's suffix, else dot)",
    )
    p.add_argument("-o", "--output", type=Path, help="write to this file (default: stdout)")
    p.add_argument("--ports", action="store_true", help="name the ports at each end of a link")
    p.add_argument("--no-servers", action="store_true", help="leave the servers out")
    p.add_argument(
        "--run",
        type=Path,
        metavar="RUN_DIR",
        help="overlay a run: link utilisation, ports paused by PFC, links a fault took down",
    )
    p.add_argument("--json", action="store_true", help="the drawn topology as JSON")


def run(args: argparse.Namespace) -> int:
    """Print or write the picture."""
    lab = Lab.open(args.lab)
    fmt = args.format or _suffix(args.output)
    topo = topology.build(lab, servers=not args.no_servers)
    if args.run is not None:
        obs = Observations.open(args.run)
        ran = str(obs.run.get("lab", ""))
        if ran != lab.name:
            raise LabError(f"{args.run}: a run of lab {ran or '(unnamed)'}, not of {lab.name}")
        topology.overlay(topo, lab, obs)
    if args.json:
        print(json.dumps(asdict(topo), indent=2))
        return 0
    if fmt == "mermaid":
        data = topology.mermaid(topo, args.ports).encode()
    else:
        source = topology.dot(topo, args.ports)
        data = source.encode() if fmt == "dot" else topology.render(source, fmt)
    if args.output is None:
        if fmt == "png":
            raise LabError("a PNG goes to a file: give -o FILE.png")
        sys.stdout.write(data.decode())
        return 0
    topology.write(args.output, data)
    print(f"{args.output}: {fmt} of {lab.name}")
    return 0


SUFFIXES = {"dot": "dot", "gv": "dot", "mermaid": "mermaid", "mmd": "mermaid", "md": "mermaid",
            "svg": "svg", "png": "png"}  # fmt: skip
"""Output file suffixes and the format each means."""


def _suffix(output: Path | None) -> str:
    """The format an output file's suffix names (dot without a file or a suffix); one line
    for a suffix that names none of ours."""
    if output is None or not output.suffix:
        return "dot"
    suffix = output.suffix.lstrip(".").lower()
    if suffix not in SUFFIXES:
        known = ", ".join(f".{s}" for s in SUFFIXES)
        raise LabError(f"{output}: no format for .{suffix} (give -f, or one of {known})")
    return SUFFIXES[suffix]
