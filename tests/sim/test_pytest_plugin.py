"""The pytest plugin works for users: the example test passes against a real twin."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import BACKENDS

ROOT = Path(__file__).resolve().parents[2]
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
    assert "5 skipped" in done.stdout


@pytest.mark.parametrize("backend", BACKENDS)
def test_example_passes_against_a_small_fabric(tmp_path: Path, backend: str) -> None:
    fabric = yaml.safe_load((ROOT / "examples" / "small.yaml").read_text())
    fabric["name"] = f"plug{os.getpid() % 100000}"
    path = tmp_path / "fabric.yaml"
    path.write_text(yaml.safe_dump(fabric))
    done = example(tmp_path, "--twin-fabric", str(path), "--twin-backend", backend, "-rs")
    assert done.returncode == 0, done.stdout[-3000:]
    # What the backend cannot observe (BGP on fake and sim, failover probes on sim) is
    # skipped, naming who observes it.
    expected = {"netns": "5 passed", "fake": "4 passed, 1 skipped", "sim": "3 passed, 2 skipped"}
    assert expected[backend] in done.stdout
    if backend != "netns":
        assert f"the {backend} backend cannot observe bgp: run on netns" in done.stdout
    if backend == "sim":
        assert "the sim backend cannot pin probe flows through a fault" in done.stdout


CHECKS = """
import pytest

def test_sessions_need_bgp(twin):
    assert twin.established()

def test_headroom(twin):
    assert twin.verdict("headroom")

def test_a_verdict_before_any_run(twin):
    with pytest.raises(LookupError):
        twin.verdict("failover")

TWO_FAULTS = {
    "name": "two-faults",
    "settle": 1,
    "traffic": [{"kind": "all_reduce", "duration": 4, "qps": 2, "pps": 100,
                 "order": "interleaved"}],
    "faults": [
        {"at": 1, "fault": "link-down", "link": "leaf1:spine1"},
        {"at": 1.5, "fault": "link-up", "link": "leaf1:spine1"},
        {"at": 2, "fault": "link-down", "link": "leaf1:leaf2"},
        {"at": 2.5, "fault": "link-up", "link": "leaf1:leaf2"},
    ],
    "validate": {"failover": {}},  # the backend pins probe flows through each fault
}

def test_failover_when_one_fault_crossed_nothing(twin, twin_play):
    twin_play(TWO_FAULTS)
    assert twin.verdict("failover")  # fault1 passes; the peer-link crossed nothing: skipped
"""


def test_the_plugin_skips_the_unobservable_and_a_verdict_flips_with_the_configs(
    tmp_path: Path,
) -> None:
    from tests.simlab import copy, edit_switches, small_lab, small_xoff

    lab = small_lab(tmp_path / "lab")
    checks = tmp_path / "test_checks.py"
    checks.write_text(CHECKS)
    run = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-rs",
        str(checks),
        "--twin-backend",
        "fake",
    ]
    done = subprocess.run([*run, "--twin-lab", str(lab)], capture_output=True, text=True)
    assert "2 passed, 2 skipped" in done.stdout, done.stdout[-2000:]
    assert "the fake backend cannot observe bgp: run on netns or clab" in done.stdout
    # A verdict that could judge only part of what it covers is no pass: it skips, naming
    # what it could not judge.
    assert "failover: 2 of 5 scopes not observable on the fake backend: fault3 link-down" in (
        done.stdout
    )
    broken = copy(lab, tmp_path / "broken")
    edit_switches(broken, small_xoff)  # headroom below what the cables need
    done = subprocess.run([*run, "--twin-lab", str(broken)], capture_output=True, text=True)
    assert "1 failed, 1 passed, 2 skipped" in done.stdout, done.stdout[-2000:]
    assert "<headroom: " in done.stdout and ": fail (" in done.stdout
