"""The pytest plugin works for users: the example test passes against a real twin."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import BACKENDS

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "test_my_fabric.py"


def example(cwd: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """Run the example test file in a pytest of its own."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", str(EXAMPLE), *options],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
        timeout=300,
    )


def test_without_options_the_fixtures_skip(tmp_path: Path) -> None:
    done = example(tmp_path)
    assert done.returncode == 0, done.stdout
    assert "2 skipped" in done.stdout


@pytest.mark.parametrize("backend", BACKENDS)
def test_example_passes_against_a_small_fabric(tmp_path: Path, backend: str) -> None:
    fabric = yaml.safe_load((ROOT / "examples" / "small.yaml").read_text())
    fabric["name"] = f"plug{os.getpid() % 100000}"
    path = tmp_path / "fabric.yaml"
    path.write_text(yaml.safe_dump(fabric))
    done = example(tmp_path, "--twin-fabric", str(path), "--twin-backend", backend)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "2 passed" in done.stdout
