"""A fixed sample of `bench/bench_fabrics.py`: healthy fabrics of shapes other than the
reference, generated as drawn, pass `twin validate` and the default and uplink-failure
scenarios on the simulator with no failing row (a failing row on a healthy fabric is a false
red)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, lab_name
from twin import labdir
from twin.cli.main import main
from twin.intent import fabric as intent

SHAPES: dict[str, dict[str, Any]] = {
    "8-single-homed-100g": {
        "spines": {"count": 2, "speed": "100G"},
        "leaves": {"count": 4, "speed": "100G"},
        "servers": {
            "count": 8, "nics": 1, "dual_homed": False, "nic_speed": "100G", "name_prefix": "gpu",
        },
    },
    "3-tier-200g": {
        "spines": {"count": 2, "ports": 8, "speed": "200G"},
        "leaves": {"count": 4, "ports": 8, "peer_link_ports": 1, "speed": "200G"},
        "superspines": {"count": 2, "speed": "200G"},
        "servers": {"count": 6, "nic_speed": "200G", "name_prefix": "node"},
    },
}  # fmt: skip
SCENARIOS = [
    REPO / "twin" / "defaults" / "default-scenario.yaml",
    REPO / "examples" / "scenarios" / "uplink-failure.yaml",
]


def failing(argv: list[str], capsys: pytest.CaptureFixture[str]) -> list[tuple[str, str, str]]:
    """The failing rows of a command's JSON report (it exits 0 or 1)."""
    code = main([*argv, "--json"])
    results = json.loads(capsys.readouterr().out)["results"]
    assert code in (0, 1)
    return [(r["validator"], r["scope"], r["reason"]) for r in results if r["status"] == "fail"]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_healthy_fabric_of_another_shape_has_no_false_red(
    shape: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = {"name": lab_name("fs"), **SHAPES[shape]}
    lab = tmp_path / "lab"
    labdir.generate(intent.parse(data, f"{shape}.yaml"), lab, f"{shape}.yaml")
    assert failing(["validate", str(lab)], capsys) == []
    for scenario in SCENARIOS:
        argv = ["run", str(lab), str(scenario), "--backend", "sim", "--no-static"]
        assert failing(argv, capsys) == [], scenario.name
