"""Figures the README and docs quote from a bench cannot go stale silently: each is a marked
block naming the bench that rewrites it (`--write`, bench/blocks.py), and a block whose bench
cannot run in CI (root, FRR, an idle machine) says what its bench last recorded
(bench/recorded/NAME.txt) in kind: the same names, as many lines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench import blocks
from labs.sim import figures
from tests.conftest import REPO

MARKED = [(path, name) for path in blocks.DOCS for name in blocks.blocks_in(path)]
RECORDED = [(p, n) for p, n in MARKED if n not in figures.BLOCKS]
"""Blocks compared with their recorded output (the simulator's are computed again:
tests/sim/test_sim_figures.py)."""


def _id(path: Path, name: str) -> str:
    return f"{path.name}:{name}"


def test_the_benches_figures_are_marked() -> None:
    """The figures issue 37 names, each in the block of the bench that makes it."""
    wanted = {
        "main-job": "README.md",
        "main-job-phases": "README.md",
        "main-job-phases-load-2": "README.md",
        "deploy": "netns-backend.md",
        "deploy-200-servers": "netns-backend.md",
        "metrics-scrapes": "metrics.md",
        "sim-speed": "simulator.md",
        "sim-scale": "simulator.md",
        "sim-ring": "simulator.md",
        "sim-incast": "simulator.md",
        "incidents": "simulator.md",
        "dcqcn-noise": "simulator.md",
        "fib-reachability": "validators.md",
        "deadlock": "validators.md",
        "deadlock-policy": "validators.md",
        "mutations": "validators.md",
        "fabrics": "validators.md",
        "drill-throughput": "drills.md",
        "drill-every-link": "drills.md",
        "qos-tests": "qos-tests.md",
        "rails": "rails.md",
    }
    assert {name: path.name for path, name in RECORDED if name in wanted} == wanted


@pytest.mark.parametrize(("path", "name"), MARKED, ids=[_id(*m) for m in MARKED])
def test_each_block_names_a_bench_that_rewrites_it(path: Path, name: str) -> None:
    bench = blocks.bench_of(path, name)
    assert bench is not None, f"{_id(path, name)}: name its bench (<!-- figures:{name} by ...)"
    source = (REPO / bench).read_text()
    assert "--write" in source and "blocks." in source, f"{bench} cannot rewrite {name}"
    stem = re.sub(r"-\d.*", "", name)  # deploy-8-servers: deploy-{n}-servers in its bench
    named = name in figures.BLOCKS or f'"{stem}' in source or f"{stem}-" in source
    assert named, f"{bench} makes no block {name}"


@pytest.mark.parametrize(("path", "name"), RECORDED, ids=[_id(*m) for m in RECORDED])
def test_each_block_says_what_its_bench_recorded(path: Path, name: str) -> None:
    said, recorded = blocks.kind(blocks.current(path, name)), blocks.kind(blocks.recorded(name))
    assert said == recorded, (
        f"{_id(path, name)} and bench/recorded/{name}.txt differ in kind: "
        f"run {blocks.bench_of(path, name)} --write"
    )


def test_every_recorded_output_is_quoted() -> None:
    quoted = {name for _, name in RECORDED}
    assert {p.stem for p in blocks.RECORDED.glob("*.txt")} == quoted


def test_a_row_more_or_a_renamed_figure_differs_in_kind() -> None:
    """What the comparison catches: a figure renamed (in any column) or a row added; not a
    value changed."""
    text = blocks.recorded("deploy")
    assert blocks.kind(text.replace("6", "7").replace("9", "1")) == blocks.kind(text)
    assert blocks.kind(text.replace("destroyed", "removed")) != blocks.kind(text)
    assert blocks.kind(text + "\n| started | 1 s | 2 s | |") != blocks.kind(text)
    assert blocks.kind(text.replace("MB |", "GB |")) != blocks.kind(text)  # a unit, far right


@pytest.fixture
def doc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The only document `blocks.write` rewrites, its recordings beside it."""
    monkeypatch.setattr(blocks, "DOCS", [tmp_path / "doc.md"])
    monkeypatch.setattr(blocks, "RECORDED", tmp_path / "recorded")
    return tmp_path / "doc.md"


def test_write_rewrites_a_block_and_records_it(doc: Path) -> None:
    doc.write_text("a\n<!-- figures:x by bench/b.py -->\nold\n<!-- /figures:x -->\nb\n")
    assert blocks.write("x", "new 1\nnew 2") == [doc]
    assert blocks.current(doc, "x") == "new 1\nnew 2" == blocks.recorded("x")
    assert doc.read_text().startswith("a\n<!-- figures:x by bench/b.py -->\nnew 1\n")
    assert blocks.write("x", "new 1\nnew 2") == []


def test_write_row_replaces_the_row_of_its_command(doc: Path) -> None:
    doc.write_text("<!-- figures:t by bench/b.py -->\n<!-- /figures:t -->\n")
    header = ["| command | figure |", "|---|---|"]
    blocks.write_row("t", header, "| `b --a` | 1 |")
    blocks.write_row("t", header, "| `b --b` | 2 |")
    blocks.write_row("t", header, "| `b --a` | 3 |")
    assert blocks.current(doc, "t").splitlines() == [*header, "| `b --a` | 3 |", "| `b --b` | 2 |"]
