"""Figures the README and docs quote from a bench, as marked blocks the bench rewrites.

A block is ``<!-- figures:NAME by bench/BENCH.py -->`` ... ``<!-- /figures:NAME -->`` in
Markdown (``# <figures:NAME>`` ... ``# </figures:NAME>`` in YAML, whose bench is
bench/bench_figures.py). A bench run with `--write` records the text of each block it makes
in `bench/recorded/NAME.txt` (its last recorded output, kept in the repository) and puts it
into every block of that name (`write`). The simulator's figures are computed in CI (the
engine is deterministic: tests/sim/test_sim_figures.py compares them whole); every other
block is compared with its recorded output in kind (`kind`: the names and how many lines,
figures aside) by tests/unit/test_doc_figures.py, since its bench needs root, FRR or
minutes of an idle machine.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RECORDED = REPO / "bench" / "recorded"
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
"""The files whose blocks `write` rewrites."""

_START = re.compile(r"(?:<!-- figures:([\w-]+)(?: by (\S+))? -->|# <figures:([\w-]+)>)\n")


def _end(path: Path, name: str) -> str:
    return f"<!-- /figures:{name} -->" if path.suffix == ".md" else f"# </figures:{name}>"


def _pattern(path: Path, name: str) -> re.Pattern[str]:
    start = (
        rf"<!-- figures:{name}(?: by \S+)? -->\n"
        if path.suffix == ".md"
        else re.escape(f"# <figures:{name}>\n")
    )
    return re.compile(f"({start})(.*?){re.escape(_end(path, name))}", re.S)


def blocks_in(path: Path) -> list[str]:
    """The names of the marked blocks of a file."""
    return [m.group(1) or m.group(3) for m in _START.finditer(path.read_text())]


def bench_of(path: Path, name: str) -> str | None:
    """The bench a Markdown block names as its maker (`by bench/...`), if it names one."""
    for m in _START.finditer(path.read_text()):
        if m.group(1) == name:
            return m.group(2)
    return None


def current(path: Path, name: str) -> str:
    """A marked block's text as the file has it (without the YAML comment marks)."""
    found = _pattern(path, name).search(path.read_text())
    if found is None:
        raise KeyError(f"{path}: no block {name}")
    body = found.group(2)
    if path.suffix != ".md":
        body = "\n".join(line[2:] for line in body.splitlines()) + "\n"
    return body.removesuffix("\n")


def rewrite(path: Path, name: str, text: str) -> bool:
    """Put `text` into the marked block `name` of `path` (its marks kept); whether the file
    changed."""
    lines = text if path.suffix == ".md" else "\n".join(f"# {line}" for line in text.splitlines())
    old = path.read_text()
    end = _end(path, name)
    new = _pattern(path, name).sub(lambda m: m.group(1) + lines + "\n" + end, old)
    if new != old:
        path.write_text(new)
    return new != old


def recorded(name: str) -> str:
    """The text a bench last recorded for block `name`."""
    return (RECORDED / f"{name}.txt").read_text().removesuffix("\n")


def write(name: str, text: str) -> list[Path]:
    """Record `text` as block `name`'s last output and put it into every block of that name
    in the README and docs; the files it changed."""
    RECORDED.mkdir(exist_ok=True)
    (RECORDED / f"{name}.txt").write_text(text + "\n")
    return [path for path in DOCS if name in blocks_in(path) and rewrite(path, name, text)]


def kind(text: str) -> list[tuple[str, ...]]:
    """What a block says, its figures aside: per line, its words that hold no digit (the
    names: validators and scopes, phases, cases, units, verdicts, in every column of a
    table), a rule of dashes or a table's `|---|` as one dash; one entry per line (the
    counts: rows, figures).

    >>> kind("| case | time |\\n|---|---|\\n| ref, 236 links | 0.1 s |")
    [('|', 'case', '|', 'time', '|'), ('-',), ('|', 'ref,', 'links', '|', 's', '|')]
    """
    out = []
    for line in text.splitlines():
        words = [w for w in line.split() if not re.search(r"\d", w)]
        out.append(tuple("-" if set(w) <= set("-|:") and "-" in w else w for w in words))
    return out


def write_row(name: str, header: list[str], row: str) -> list[Path]:
    """Record block `name` as a table of one row per bench command: `row` replaces the row of
    the same first cell (the command that made it) or is added after the others; `header`
    opens the table when nothing is recorded yet. Then `write` it."""
    path = RECORDED / f"{name}.txt"
    rows = recorded(name).splitlines() if path.exists() else list(header)
    key = row.split(" | ")[0] + " |"
    same = [i for i, line in enumerate(rows) if line.startswith(key)]
    if same:
        rows[same[0]] = row
    else:
        rows.append(row)
    return write(name, "\n".join(rows))


def command() -> str:
    """The bench's command line as run, `--write` left out, to say in a block what made it."""
    bench = Path(sys.argv[0]).resolve()
    where = bench.relative_to(REPO) if bench.is_relative_to(REPO) else bench
    return " ".join(["`" + str(where), *(a for a in sys.argv[1:] if a != "--write")]) + "`"


def load() -> str:
    """What else ran, to say beside wall times: the 1-minute load average now, and the bench's
    niceness when it yielded to other work (`nice -n 19`)."""
    nice = os.nice(0)
    return f"load average {os.getloadavg()[0]:.1f}" + (f", niceness {nice}" if nice else "")
