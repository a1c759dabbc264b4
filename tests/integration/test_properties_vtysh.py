"""Sampled intents' FRR configurations pass `vtysh --dryrun` (a new process)."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest
from hypothesis import example, given

from tests.unit.test_properties import REFERENCE, SETTINGS, SMALL, _lab, _sample, intents


@SETTINGS
@given(intents())
@example(REFERENCE)
@example(SMALL)
def test_sampled_frr_confs_pass_vtysh_dryrun(data: dict[str, Any]) -> None:
    vtysh = shutil.which("vtysh")
    if vtysh is None:
        pytest.skip("vtysh (FRR) is not installed")
    with _lab(data) as lab:
        for switch in _sample(lab):
            conf = lab.path / "configs" / switch / "frr.conf"
            run = subprocess.run(
                [vtysh, "--dryrun", "-f", str(conf)], capture_output=True, text=True, check=False
            )
            assert run.returncode == 0, f"{switch}: {run.stdout}{run.stderr}"
