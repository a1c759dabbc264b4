"""The README's commands run in new processes: the no-root example and `twin --help`."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import REPO, lab_name, twin_cli
from tests.unit.test_docs_truth import _readme_no_root_example
from twin.cli import main


def test_the_readmes_no_root_example_runs_and_passes(tmp_path: Path) -> None:
    """Run as written, from a scratch directory, with one change: the example fabric's name
    is made unique, so that a twin of the same example running elsewhere is not this one."""
    fabric = yaml.safe_load((REPO / "examples" / "small.yaml").read_text())
    fabric["name"] = lab_name("rdme")
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "small.yaml").write_text(yaml.safe_dump(fabric))
    (tmp_path / "examples" / "scenarios").symlink_to(REPO / "examples" / "scenarios")
    steps = _readme_no_root_example().split("&&")
    assert [shlex.split(s)[:2] for s in steps] == [["twin", "generate"], ["twin", "run"]]
    for step in steps:
        argv = shlex.split(step)[1:]
        done = twin_cli(*argv, cwd=tmp_path, timeout=300)
        assert done.returncode == 0, f"{step.strip()}: exit {done.returncode}\n{done.stderr}"
    assert re.search(r"\d+ passed, 0 failed", done.stdout), done.stdout
    assert not list((tmp_path / "small").glob("state.json"))  # `twin run` destroyed its twin


def test_twin_help_names_every_verb() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "twin.cli.main", "--help"], capture_output=True, text=True
    )
    assert all(re.search(rf"^\s+{verb}\s", done.stdout, re.M) for verb in main.VERBS)
