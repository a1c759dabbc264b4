"""The mutation campaign's `--sim` verdict on a fixed sample (`bench/bench_mutations.py --sim`:
`twin run LAB --backend sim` with the default scenario, on examples/small.yaml): spine1's
TC_TO_QUEUE_MAP entry of the CNP class (TC 6), which the campaign's `--sim --limit 10` sample
lost (exit 2 naming no file: the simulator's own check of a queue 12), and its neighbours.
A queue the port has (0-7) is judged, naming spine1; one it has not is bad input, one line
naming spine1's config_db.json and the entry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.mutations import Campaign
from tests.simlab import copy, small_lab
from twin.cli import main as cli

SIM_SAMPLE = [
    ("spine1", "TC_TO_QUEUE_MAP|RDMA.6", "value", "caught"),
    ("spine1", "TC_TO_QUEUE_MAP|RDMA.6", "removed", "caught"),
    ("spine1", "TC_TO_QUEUE_MAP|RDMA.6", "invalid", "refused"),
    ("spine1", "TC_TO_PRIORITY_GROUP_MAP|RDMA.3", "invalid", "refused"),
    ("leaf1", "MAP_PFC_PRIORITY_TO_QUEUE|RDMA.3", "value", "caught"),
]
"""(device, where, kind, what `twin run --backend sim` must do)."""


@pytest.mark.parametrize(("device", "where", "kind", "does"), SIM_SAMPLE)
def test_a_sampled_mutation_is_judged_on_the_simulator_as_its_impact_says(
    campaign: Campaign, tmp_path: Path, device: str, where: str, kind: str, does: str
) -> None:
    assert campaign.judge(device, where, kind, tmp_path, sim=True) == ("harmful", does)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_lab(tmp_path_factory.mktemp("small") / "lab")


def _spine1(lab: Path, out: Path, table: str, key: str, field: str, value: str | None) -> Path:
    """A copy of the lab whose spine1 config_db has `table`'s `key` `field` set to `value`
    (None: removed)."""
    edited = copy(lab, out)
    path = edited / "configs" / "spine1" / "config_db.json"
    db = json.loads(path.read_text())
    entry = db[table][key]
    if value is None:
        entry.pop(field)
    else:
        entry[field] = value
    path.write_text(json.dumps(db, indent=2))
    return edited


def _queue(lab: Path, out: Path, tc: str, queue: str | None) -> Path:
    """A copy of the lab whose spine1 sends `tc` to `queue` (None: the entry removed)."""
    return _spine1(lab, out, "TC_TO_QUEUE_MAP", "RDMA", tc, queue)


def _refused(lab: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """The one line `twin run LAB --backend sim` refused the lab with (exit 2, nothing written)."""
    assert cli.main(["run", str(lab), "--backend", "sim", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert not out.exists()
    return err


@pytest.mark.parametrize("queue", ["7", "0", "3", "5", None])
def test_the_cnp_class_on_another_queue_fails_naming_spine1(
    small: Path, tmp_path: Path, queue: str | None
) -> None:
    lab = _queue(small, tmp_path / "lab", "6", queue)
    out = tmp_path / "out"
    assert cli.main(["run", str(lab), "--backend", "sim", "--out", str(out)]) == 1
    report = json.loads((out / "report.json").read_text())
    failed = {
        r["validator"]
        for r in report["results"]
        if r["status"] == "fail" and any(f["device"] == "spine1" for f in r["findings"])
    }
    assert "intent_values" in failed, failed


def test_a_tc_no_class_uses_on_another_queue_passes(small: Path, tmp_path: Path) -> None:
    lab = _queue(small, tmp_path / "lab", "5", "4")
    assert cli.main(["run", str(lab), "--backend", "sim", "--out", str(tmp_path / "out")]) == 0


@pytest.mark.parametrize("queue", ["8", "12", "x", ""])
def test_a_value_naming_no_queue_is_refused_in_one_line_naming_the_file_and_entry(
    small: Path, tmp_path: Path, queue: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _refused(_queue(small, tmp_path / "lab", "6", queue), tmp_path / "out", capsys)
    assert "spine1/config_db.json: TC_TO_QUEUE_MAP.RDMA.6: must be a " in err, err


@pytest.mark.parametrize(
    ("table", "key", "field", "value"),
    [
        ("BUFFER_PROFILE", "pg_lossless_400000_40m_profile", "xoff", "-1"),
        ("BUFFER_PROFILE", "egress_lossy_profile", "static_th", "-1"),
        ("WRED_PROFILE", "RDMA_ECN", "green_min_threshold", "-1"),
        ("WRED_PROFILE", "RDMA_ECN", "green_drop_probability", "200"),
        ("PORT_QOS_MAP", "Ethernet0", "pfc_enable", "x"),
    ],
)
def test_a_number_sonics_yang_refuses_is_refused_naming_the_file_and_key(
    small: Path,
    tmp_path: Path,
    table: str,
    key: str,
    field: str,
    value: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # the simulator stopped on these with a line naming no file, or (pfc_enable) crashed, exit 3
    lab = _spine1(small, tmp_path / "lab", table, key, field, value)
    err = _refused(lab, tmp_path / "out", capsys)
    assert f"spine1/config_db.json: {table}.{key}.{field}: must be " in err, err
