"""`twin exec DIR NODES -- CMD ...`: run a command in nodes of a running twin: one node, a role
(`leaves`, `spines`, `superspines`, `servers`, `switches`, `all`), a name pattern (`'leaf*'`),
or a comma-separated list of these. On several nodes it runs side by side, each output line
prefixed with its node (`leaf1: ...`), and the exit code is the first non-zero one."""

from __future__ import annotations

import argparse
import fnmatch
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from twin.cli.options import add_backend, running
from twin.errors import LabError
from twin.lab.directory import Lab

HELP = "run a command in nodes (vtysh on a switch reaches its FRR): a name, role or pattern"
ROLES = {
    "leaves": ("leaf",),
    "spines": ("spine",),
    "superspines": ("superspine",),
    "servers": ("server",),
    "switches": ("superspine", "spine", "leaf"),
    "all": ("superspine", "spine", "leaf", "server"),
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument("lab", type=Path, help="lab directory")
    add_backend(p)
    p.add_argument(
        "node",
        metavar="NODES",
        help="a node (leaf1), a role (" + ", ".join(ROLES) + "), a pattern ('leaf*'), "
        "or a comma-separated list of these",
    )
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")


def chosen(lab: Lab, selector: str) -> list[str]:
    """The nodes a selector names, in the lab's order; one line when a part names none."""
    order = [n for roles in ROLES["all"] for n in lab.nodes(roles)]
    picked: set[str] = set()
    for part in filter(None, (p.strip() for p in selector.split(","))):
        if part in ROLES:
            found = {n for n in order if lab.graph.nodes[n]["role"] in ROLES[part]}
        else:
            found = {n for n in order if fnmatch.fnmatchcase(n, part)}
        if not found:
            raise LabError(f"lab {lab.name} has no node {part}")
        picked |= found
    return [n for n in order if n in picked]


def run(args: argparse.Namespace) -> int:
    """Run the command and pass its output and exit code through (prefixed per node when
    several were chosen)."""
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise LabError("twin exec: give a command after --")
    lab = Lab.open(args.lab)
    nodes = chosen(lab, args.node)
    backend = running(args, lab)
    if nodes == [args.node]:
        done = backend.exec(lab, args.node, command)
        sys.stdout.write(done.stdout)
        sys.stderr.write(done.stderr)
        return done.returncode

    def one(node: str) -> subprocess.CompletedProcess[str]:
        return backend.exec(lab, node, command)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, nodes))
    for node, done in zip(nodes, results, strict=True):
        sys.stdout.writelines(f"{node}: {line}\n" for line in done.stdout.splitlines())
        sys.stderr.writelines(f"{node}: {line}\n" for line in done.stderr.splitlines())
    return next((d.returncode for d in results if d.returncode != 0), 0)
