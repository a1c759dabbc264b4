"""A netns deploy of an edited lab refuses before creating anything (root)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import leftovers, twin_cli
from tests.unit import test_lab_inputs
from tests.unit.test_lab_inputs import CASES, DEPLOY_CASES, Edit
from twin.cli import main as cli
from twin.lab.directory import Lab

edited = test_lab_inputs.edited
pristine = test_lab_inputs.pristine
"""The fixtures of tests/unit/test_lab_inputs.py: an edited copy of a generated lab."""


@pytest.mark.parametrize("case", DEPLOY_CASES)
def test_deploy_refuses_before_creating_anything(
    edited: Callable[[Edit], Path], case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if os.geteuid() != 0:
        pytest.skip("deploy needs root (the root check comes first)")
    edit, expected = CASES[case]
    path = edited(edit)
    name = Lab.open(path).name
    try:
        assert cli.main(["deploy", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and expected in err, err
        assert leftovers(name) == [] and not (path / "state.json").exists()
    finally:
        if leftovers(name):
            twin_cli("cleanup", name)
