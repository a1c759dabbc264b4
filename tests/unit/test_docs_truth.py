"""The README and docs/ say only what is true of this repository: every `twin VERB` they name
is a verb (with the options they give it), every repository path, module and link they name
exists, and the README's example that needs no root runs and passes."""

from __future__ import annotations

import argparse
import importlib
import re
import shlex
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO
from twin.cli import main

DOCS = [
    REPO / "README.md",
    *sorted((REPO / "docs").glob("*.md")),
    *sorted(REPO.glob("examples/*/README.md")),
]
PREFIXES = ("twin", "labs", "traffic", "validators", "docs", "examples", "bench", "tests")
PATH = re.compile(
    rf"(?<![\w./-])((?:{'|'.join(PREFIXES)}|scripts|\.ci)/[\w./*{{}}-]*[\w*}}])(?![\w(])"
)
MODULE = re.compile(r"`((?:twin|labs|traffic|validators)(?:\.\w+)+)`")
FILE_SUFFIXES = {"py", "json", "jsonl", "yaml", "yml", "md", "txt", "png", "svg", "c", "h"}
LINK = re.compile(r"\]\(([^)\s]+)\)")
EXTERNAL = {
    "docs/manual/network.md": "containerlab's documentation, cited with its commit",
}
"""Paths of other projects that the docs cite (not this repository's)."""


def _without_fences(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def commands(text: str) -> Iterator[str]:
    """Every `twin ...` command line: in code blocks (after a prompt, sudo or .venv/bin/) and
    in inline code; continued lines joined, pipelines and `&&` chains split into their
    commands, comments dropped."""
    lines = [
        line
        for block in re.findall(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M)
        for line in re.sub(r"\\\n\s*", " ", block).splitlines()
    ]
    lines += re.findall(r"`([^`\n]+)`", _without_fences(text))
    for line in lines:
        line = line.replace("\\|", "|").split(" # ")[0]
        for part in re.split(r"&&|\|\||;|\s\|\s", line):
            found = re.match(r"\s*(?:\$ |sudo |\.venv/bin/)*twin(\s.*)?$", part)
            if found:
                yield "twin" + (found.group(1) or "")


def _named(doc: Path) -> list[str]:
    return list(commands(doc.read_text()))


def _positionals(p: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in p._actions if not a.option_strings]


def _problems(command: str, top: argparse.ArgumentParser) -> list[str]:
    """What is wrong with a command the docs name: an unknown verb or subverb (a word where
    the parser takes one of its sub-commands; a placeholder in capitals stands for any of
    them), an option its parser does not take."""
    words = shlex.split(command.replace("[", " ").replace("]", " "))[1:]
    options, positionals = top._option_string_actions, _positionals(top)
    problems = []
    while words:
        word = words.pop(0)
        if word == "--":
            break  # what follows is a command run in a node
        if word.startswith("-"):
            action = options.get(word.split("=")[0])
            if action is None:
                problems.append(f"{command}: no option {word.split('=')[0]}")
            elif action.nargs != 0 and "=" not in word:
                words[:1] = []  # its value
            continue
        if not positionals:
            continue
        here = positionals.pop(0)
        if not isinstance(here, argparse._SubParsersAction):
            if here.nargs not in (None, 1):
                positionals = []  # the words that follow may be its own
            continue
        placeholder = re.fullmatch(r"[A-Z][A-Z_0-9]*|\.\.\.", word)
        names = list(here.choices) if placeholder else word.split("/")  # `deploy/inspect`
        unknown = [n for n in names if n not in here.choices]
        if unknown:
            return [*problems, f"{command}: no verb {', '.join(unknown)}"]
        chosen = [here.choices[n] for n in names]
        options = {o: a for p in chosen for o, a in p._option_string_actions.items()}
        positionals = _positionals(chosen[0]) if len(chosen) == 1 else []
    return problems


@pytest.fixture(scope="module")
def top() -> argparse.ArgumentParser:
    return main.parser(main.VERBS)


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(REPO)))
def test_every_twin_command_in_the_docs_is_a_real_verb(
    doc: Path, top: argparse.ArgumentParser
) -> None:
    named = _named(doc)
    problems = [p for c in named for p in _problems(c, top)]
    assert problems == [], problems


def test_the_docs_name_the_verbs() -> None:
    """The command finder finds them (a check that finds nothing proves nothing)."""
    named = {c.split()[1] for doc in DOCS for c in _named(doc) if len(c.split()) > 1}
    assert {"generate", "deploy", "run", "sim", "diff", "destroy"} <= named


def test_a_wrong_verb_or_option_is_found(top: argparse.ArgumentParser) -> None:
    assert _problems("twin sim run X.yaml --seed 3", top) == []
    assert _problems("twin --debug deploy DIR [--backend NAME]", top) == []
    assert _problems("twin exec DIR leaf1 -- ip -br link", top) == []
    assert _problems("twin wiring DIR", top) == ["twin wiring DIR: no verb wiring"]
    assert _problems("twin sim play X.yaml", top) == ["twin sim play X.yaml: no verb play"]
    assert _problems("twin run DIR --before-fault", top) == [
        "twin run DIR --before-fault: no option --before-fault"
    ]


def _exists(path: str) -> bool:
    """A path, a glob (`tests/sim/test_sim_*.py`) or a path with placeholders in capitals
    (`examples/incidents/NAME/scenario.yaml`) that names something in the repository."""
    pattern = "/".join(
        "*" if re.fullmatch(r"[A-Z][A-Z_0-9]*", part) else part
        for part in path.rstrip("/").split("/")
    )
    return any(REPO.glob(pattern)) if "*" in pattern else (REPO / pattern).exists()


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(REPO)))
def test_every_repository_path_in_the_docs_exists(doc: Path) -> None:
    named = set(PATH.findall(doc.read_text()))
    missing = sorted(p for p in named if p not in EXTERNAL and not _exists(p))
    assert missing == [], f"{doc.name} names paths that do not exist: {missing}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(REPO)))
def test_every_module_in_the_docs_exists(doc: Path) -> None:
    missing = []
    for name in set(MODULE.findall(doc.read_text())):
        if name.rsplit(".", 1)[1] in FILE_SUFFIXES:
            continue  # a file name (`traffic.py`), not a module
        if not _resolves(name):
            missing.append(name)
    assert missing == [], f"{doc.name} names modules or attributes that do not exist: {missing}"


def _resolves(dotted: str) -> bool:
    """Whether `a.b.c` is a module, or an attribute of the longest module it starts with."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(obj, attribute):
                return False
            obj = getattr(obj, attribute)
        return True
    return False


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(REPO)))
def test_every_relative_link_in_the_docs_exists(doc: Path) -> None:
    links = [
        link.split("#")[0]
        for link in LINK.findall(doc.read_text())
        if not re.match(r"[a-z]+:", link) and not link.startswith("#")
    ]
    missing = sorted({link for link in links if not (doc.parent / link).exists()})
    assert missing == [], f"{doc.name} links to files that do not exist: {missing}"


def test_the_path_checks_catch_a_stale_path() -> None:
    assert PATH.findall("see `twin/report.py` and tests/sim/test_sim_*.py.") == [
        "twin/report.py",
        "tests/sim/test_sim_*.py",
    ]
    assert not _exists("twin/report.py") and _exists("tests/sim/test_sim_*.py")
    assert _exists("examples/incidents/NAME/fix.yaml") and not _exists("examples/NAME/x.md")
    assert not _resolves("twin.wiring") and _resolves("twin.model.wiring.Wiring")


def _readme_no_root_example() -> str:
    """The README's example that needs no root: the one on the fake backend."""
    found: list[str] = [
        line
        for block in re.findall(r"^```sh\n(.*?)^```", (REPO / "README.md").read_text(), re.S | re.M)
        for line in block.splitlines()
        if "--backend fake" in line
    ]
    assert len(found) == 1, found
    return found[0]


def test_the_changelogs_last_release_is_the_packages_version() -> None:
    """The version is written once, in pyproject.toml; a release adds its section to
    CHANGELOG.md (above it, what is not released yet)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    headings = re.findall(r"^## \[([^\]]+)\]", (REPO / "CHANGELOG.md").read_text(), re.M)
    assert headings[0] == "Unreleased" and headings[1] == project["version"], headings
    assert "version" not in project.get("dynamic", [])
