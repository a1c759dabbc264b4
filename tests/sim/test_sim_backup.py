"""The article's incident: a backup burst in the lossless class pauses links that training
flows share and slows them (head-of-line blocking); in a best-effort class it is dropped and
the training flows keep their rate."""

from __future__ import annotations

from pathlib import Path

from labs.sim import Result, load, simulate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"
TRAINING = ("train0", "train1")


def run(name: str) -> Result:
    exp, seed = load(EXAMPLES / f"{name}.yaml")
    return simulate(exp, seed or 1)


def test_backup_in_the_lossless_class_slows_training() -> None:
    result = run("backup_in_lossless")
    for flow in TRAINING:
        before = result.mean_rate(flow, 1e-3, 2e-3)
        during = result.mean_rate(flow, 2.5e-3, 3.5e-3)
        assert before > 29e9 and during < 0.75 * before, (flow, before, during)
    assert result.port("spine0:Ethernet4").priorities[3].pause_received > 0
    assert result.total("drops_lossless") == 0
    assert all(result.flow(f"backup{i}").bytes_dropped == 0 for i in range(3))


def test_backup_in_a_best_effort_class_is_dropped_instead() -> None:
    result = run("backup_in_lossy")
    for flow in TRAINING:
        assert result.mean_rate(flow, 2.5e-3, 3.5e-3) > 0.97 * result.mean_rate(flow, 1e-3, 2e-3)
    assert result.total("pause_sent") == 0
    assert result.total("drops_lossy") > 0 and result.total("drops_lossless") == 0
