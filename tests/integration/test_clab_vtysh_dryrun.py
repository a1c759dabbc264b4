"""The containerlab form's FRR configurations pass `vtysh --dryrun` (a new process)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.unit import test_clab_render
from twin.lab.directory import Lab

lab = test_clab_render.lab
"""The lab of tests/unit/test_clab_render.py (its fixture)."""


def test_container_frr_confs_pass_vtysh_dryrun(lab: Lab) -> None:
    vtysh = shutil.which("vtysh")
    if vtysh is None:
        pytest.skip("vtysh (FRR) is not installed")
    for switch in lab.switches():
        conf = lab.path / "clab" / switch / "frr.conf"
        run = subprocess.run([vtysh, "--dryrun", "-f", str(conf)], capture_output=True, text=True)
        assert run.returncode == 0, f"{conf}: {run.stdout}{run.stderr}"
