"""The wheel a user installs (`pip install git+URL@REF` builds one): `twin incident NAME`
works from it, away from the source tree (the incidents are its package data), and it holds
every module of the product."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.conftest import REPO


def test_twin_incident_runs_from_an_installed_wheel(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip"]
    subprocess.run([*pip, "wheel", str(REPO), "--no-deps", "-q", "-w", str(wheels)], check=True)
    (wheel,) = wheels.glob("fabric_twin-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "twin/incidents/1-pause-storm/change.yaml" in names
    assert "twin/incidents/fabric.yaml" in names  # the fabric the incidents share
    packages = ("twin", "labs", "traffic", "validators")
    product = {p.relative_to(REPO).as_posix() for d in packages for p in (REPO / d).rglob("*.py")}
    assert len(product) > 200 and product - set(names) == set()  # every module, in its package
    site = tmp_path / "site"  # the wheel installed, its dependencies from this environment
    subprocess.run(
        [*pip, "install", "--no-deps", "-q", "--target", str(site), str(wheel)], check=True
    )
    code = "import sys, twin.cli.main as m; print(m.__file__, file=sys.stderr); sys.exit(m.main())"
    done = subprocess.run(
        [sys.executable, "-c", code, "incident", "pause-storm", str(tmp_path / "ps")],
        cwd="/",
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith(str(site))  # the installed copy ran, not the source tree
    assert (tmp_path / "ps" / "before" / "fabric.yaml").is_file()
    assert (tmp_path / "ps" / "after" / "configs").is_dir()
