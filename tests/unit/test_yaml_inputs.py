"""YAML the tools read (fabrics, scenarios) is refused with one line when it cannot be meant.

Empty files, NUL bytes, alias bombs and nesting deeper than any fabric needs are refused
before any model sees the data: before, an empty fabric silently became the default one, a
NUL byte or a newline in a key gave a two-line error, eight levels of anchors took 20 s and
126 MB, and a 5,000-deep list raised RecursionError. A file that is not a regular file (a FIFO
would block the reader for ever, a device never end) or is larger than any fabric or scenario
needs is refused before it is read.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from twin.cli import main as cli


def _bomb(levels: int) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels + 1):
        refs = ", ".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines) + "\n"


CASES = {
    "empty": ("", "empty"),
    "white space only": ("  \n\n\t\n", "empty"),
    "a comment only": ("# nothing\n", "empty"),
    "a NUL byte": ("name: small\nspines:\n  count: 2\0\n", "line 3"),
    "a billion laughs": (_bomb(8), "alias"),
    "deep nesting": ("x: " + "[" * 5000 + "]" * 5000 + "\n", "nested"),
    "deep mappings": (
        "".join(f"{' ' * i}k{i}:\n" for i in range(400)) + " " * 400 + "v\n",
        "nested",
    ),
    "a key that is a newline": ('"\\n": 1\n', "\\n: unknown key"),
    "too large": ("x: [" + "1, " * 100_000 + "]\n", "larger than 256 KiB"),
    "many values, no alias": ("x: [" + "1," * 100_001 + "]\n", "100,000 values (aliases expanded)"),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_generate_refuses_with_one_line(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, expected = CASES[case]
    source = tmp_path / "fabric.yaml"
    source.write_text(text)
    out = tmp_path / "lab"
    assert cli.main(["generate", str(source), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"twin: {source}: ") and expected in err, err
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["fabric.yaml"]


SPECIAL: dict[str, Callable[[Path], object]] = {
    "a FIFO": os.mkfifo,
    "a directory": lambda path: path.mkdir(),
    "a link to a device": lambda path: path.symlink_to("/dev/zero"),
}


@pytest.mark.parametrize("case", SPECIAL, ids=list(SPECIAL))
def test_what_is_not_a_regular_file_is_refused_unread(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "fabric.yaml"
    SPECIAL[case](source)
    assert cli.main(["generate", str(source), "-o", str(tmp_path / "lab")]) == 2
    assert capsys.readouterr().err == f"twin: {source}: not a regular file\n"
    assert not (tmp_path / "lab").exists()
