"""`twin show DIR`: a lab's figures, nodes, links and addresses; given a fabric file, the lab
it is in, or (an intent of no lab) the lab it would design."""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

from twin.cli import text as show
from twin.cli.output import add_json, emit
from twin.lab.directory import Lab

HELP = "print a lab's figures, nodes, links and addresses"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument(
        "lab", type=Path, help="lab directory, or a fabric file (a lab's fabric.yaml, or an intent)"
    )
    add_json(p)


@contextlib.contextmanager
def opened(path: Path) -> Iterator[tuple[Lab, str]]:
    """The lab a path names, and where it is: a lab directory, the directory of a lab's fabric
    file, or an intent designed into a scratch directory removed afterwards."""
    if not path.is_file():
        yield Lab.open(path), ""
    elif (path.parent / "design.json").is_file() and path.name == "fabric.yaml":
        yield Lab.open(path.parent), ""
    else:
        from twin.intent import fabric as intent
        from twin.lab import directory as labdir

        with tempfile.TemporaryDirectory(prefix="twin-show-") as scratch:
            out = Path(scratch) / "lab"
            labdir.generate(intent.load(path), out, str(path))
            yield Lab.open(out), f"designed from {path}, not generated"


def run(args: argparse.Namespace) -> int:
    """Print the lab."""
    with opened(args.lab) as (lab, where):
        _print(args, lab, where)
    return 0


def _print(args: argparse.Namespace, lab: Lab, where: str) -> None:
    if args.json:
        g = lab.graph
        nodes = [{"node": n, **attrs} for n, attrs in g.nodes(data=True)]
        links = [dict(e) for _, _, e in g.edges(data=True)]
        emit(args, {"lab": lab.name, "figures": lab.figures, "nodes": nodes, "links": links}, "")
        return
    print(show.render(lab, where), end="")
