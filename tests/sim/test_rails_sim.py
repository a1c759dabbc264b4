"""A rail-optimized fabric under the main job's verdict (`twin run LAB --backend sim` with the
default scenario): the healthy one passes with its All-Reduce on its rails, and one rail's
leaf with PFC on the wrong priority fails naming that leaf."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import lab_name
from tests.sim.test_broken_labs import edit_db, failing, run_sim
from tests.unit.test_rails import NICS, RAIL_SERVERS, SERVERS, SMALL, _leaf_of
from twin.intent import fabric as intent
from twin.lab import directory as labdir
from twin.lab.directory import Lab

BROKEN_RAIL = 2
BROKEN_LEAF = _leaf_of(1, BROKEN_RAIL)
"""Rail 2's leaf of the first scalable unit (from the intent: unit 0, rail 2)."""


@pytest.fixture(scope="module")
def rail_lab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rails") / "lab"
    labdir.generate(intent.parse({**SMALL, "name": lab_name("rail")}, "f.yaml"), out, "f.yaml")
    return out


def test_the_healthy_rail_fabric_passes_the_default_scenario(
    rail_lab: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, rows = run_sim(rail_lab, capsys)
    assert code == 0, failing(rows)
    by = {(r[0], r[1]): r for r in rows}
    ranks = SERVERS * NICS - 1  # but the incast's target
    # NCCL's choice (the default scenario's `auto`) for 8 MB over 4 nodes: the tree (its
    # model's latency wins at this size; docs/traffic.md), one per rail
    assert by[("collective_efficiency", f"allreduce (tree, {ranks} ranks)")][2] == "pass"
    assert by[("lossless_isolation", "loss roce")][3].startswith("lossless 0 of ")


def test_one_rail_leaf_with_pfc_on_the_wrong_priority_fails_naming_it(
    rail_lab: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lab = Path(shutil.copytree(rail_lab, tmp_path / "broken"))

    def pfc_on_4(db: dict[str, dict[str, dict[str, str]]]) -> None:
        for entry in db["PORT_QOS_MAP"].values():
            if entry.get("pfc_enable") == "3":
                entry["pfc_enable"] = "4"

    edit_db(lab, BROKEN_LEAF, pfc_on_4)
    code, rows = run_sim(lab, capsys)
    assert code == 1, rows
    named = [r for r in failing(rows) if re.search(rf"\b{BROKEN_LEAF}\b", r[3])]
    assert named, failing(rows)
    others = {f"leaf{i}" for i in range(1, 9)} - {BROKEN_LEAF}
    assert not [r for r in failing(rows) if any(re.search(rf"\b{o}\b", r[3]) for o in others)]


@pytest.mark.parametrize(
    "shape",
    [
        {  # 16 leaves: more than 8-port spines reach, so pods under super-spines
            "spines": {"count": 2, "ports": 8},
            "superspines": {"ports": 16},
            "servers": {**RAIL_SERVERS, "count": 8},
        },
        {  # each rail a leaf pair: MLAG, NICs with two ports
            "leaves": {"ports": 8, "uplinks_per_spine": 1, "peer_link_ports": 1},
            "servers": {"count": 8, "nics": 2, "dual_homed": True, "rails": True},
        },
    ],
    ids=["three-tiers", "dual-homed-rails"],
)
def test_three_tier_and_dual_homed_rails_pass_the_default_scenario(
    shape: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = {**SMALL, "name": lab_name("rail"), **shape}
    labdir.generate(intent.parse(data, "f.yaml"), tmp_path / "lab", "f.yaml")
    tiers = 3 if "superspines" in shape else 2
    assert Lab.open(tmp_path / "lab").figures["tiers"] == tiers
    code, rows = run_sim(tmp_path / "lab", capsys)
    assert code == 0, failing(rows)
    assert any(r[0] == "collective_efficiency" and r[2] == "pass" for r in rows)
