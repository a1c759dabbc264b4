"""Generated FRR configurations pass FRR's own parser (`vtysh --dryrun`, a new process)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.unit import test_generate
from tests.unit.test_generate import (
    _vtysh,
)
from twin.lab.directory import Lab

lab = test_generate.lab
"""The lab of tests/unit/test_generate.py (its fixture)."""


def test_every_frr_conf_passes_vtysh_dryrun(lab: Lab) -> None:
    vtysh = _vtysh()
    for switch in lab.switches():
        conf = lab.path / "configs" / switch / "frr.conf"
        run = subprocess.run(
            [vtysh, "--dryrun", "-f", str(conf)], capture_output=True, text=True, check=False
        )
        assert run.returncode == 0, f"{conf}: {run.stdout}{run.stderr}"


def test_vtysh_dryrun_catches_a_broken_config(tmp_path: Path) -> None:
    vtysh = _vtysh()
    conf = tmp_path / "frr.conf"
    conf.write_text("router bgp 65000\n neighbor 10.0.0.1 remote-az 65001\nexit\n")
    run = subprocess.run([vtysh, "--dryrun", "-f", str(conf)], capture_output=True, check=False)
    assert run.returncode != 0
