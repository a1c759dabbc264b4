"""A leaf reboot on the reference twin (examples/scenarios/leaf-reboot.yaml: node-down and
node-up of leaf2 beside ring All-Reduce): with its MLAG member ports held until its BGP has
converged no probe flow is black-holed; without MLAG members to hold (MCLAG_INTERFACE taken
out of leaf2's config_db), its servers send through it before it has routes, and the
node-up fails."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from labs.netns.faults import mlag_members
from tests.conftest import lab_name, root_and_frr, running_twin
from twin.lab.directory import Lab
from twin.pytest_plugin import Twin
from validators.examples import edit_json, generate
from validators.registry import run_dynamic, select
from validators.result import Result, Status

REPO = Path(__file__).resolve().parents[2]
SCENARIO = REPO / "examples" / "scenarios" / "leaf-reboot.yaml"


def reference(out: Path) -> Lab:
    return generate(out, REPO / "examples" / "reference.yaml", name=lab_name())


def without_mlag_members(lab: Lab) -> None:
    """leaf2's MCLAG_INTERFACE removed, as a person would edit it out."""
    edit_json(lab, "leaf2", lambda db: db.pop("MCLAG_INTERFACE"))


def test_a_leaf_holds_the_members_of_its_mclag_interfaces(tmp_path: Path) -> None:
    lab = reference(tmp_path / "lab")
    held = mlag_members(lab, "leaf2")
    servers = {n["peer_port"] for s in lab.nodes("server") for n in lab.host(s)["interfaces"]}
    assert held and held <= {lab.ifmap["leaf2"][p]["netns"] for p in servers}
    assert mlag_members(lab, "spine1") == set()
    without_mlag_members(lab)
    assert mlag_members(lab, "leaf2") == set()


@pytest.fixture(params=["held", "not held"])
def rebooted(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Twin]]:
    reason = root_and_frr()
    if reason:
        pytest.skip(reason)
    lab = reference(tmp_path / "lab")
    if request.param == "not held":
        without_mlag_members(lab)
    with running_twin(lab.path) as twin:
        yield request.param, twin


def judged(twin: Twin, tmp: Path) -> dict[str, Result]:
    obs = twin.play(SCENARIO, tmp)
    chosen = select("dynamic", ["failover", "fib_agreement"])
    return {f"{r.validator} {r.scope}": r for r in run_dynamic(twin.lab, obs, chosen, {})}


def test_a_leaf_reboot_black_holes_nothing_only_with_the_members_held(
    rebooted: tuple[str, Twin], tmp_path: Path
) -> None:
    kind, twin = rebooted
    results = judged(twin, tmp_path)
    down = results["failover fault1 node-down leaf2"]
    assert down.status is Status.PASS, down.reason
    up = results["failover fault2 node-up leaf2"]
    if kind == "held":
        assert up.status is Status.PASS, up.reason
        assert "routed back through leaf2" in up.reason
        snapshots = [r for name, r in results.items() if name.startswith("fib_agreement")]
        assert len(snapshots) == 4
        assert {r.status for r in snapshots} == {Status.PASS}, [r.reason for r in snapshots]
        event = next(e for e in twin.events() if e.get("fault") == "node-up")
        assert event["held"] and "unrouted" not in event
    else:
        assert up.status is Status.FAIL
        assert "loss window" in up.reason
