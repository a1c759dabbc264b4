"""A drill's faults judged against its baseline, and the timing of a case's faults and of
their restores (pure Python: made-up outcomes and scenarios)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from twin.drill.cases import Case, Outcome, When, timing, with_faults
from twin.drill.report import AS_BASELINE, Drill

SLOW = ("collective_efficiency", "allreduce", "fail", "p99/p50 6.0 > 1.5")
BGP = ("bgp_health", "leaf1", "pass", "")


def _outcome(label: str, mean: float, *results: tuple[str, str, str, str]) -> Outcome:
    return Outcome(label, list(results), iteration_mean_ms=mean)


def _drill() -> Drill:
    """A baseline that fails collective_efficiency; a fault that costs nothing, one that
    makes the collective much slower, one that breaks BGP, one whose case died."""
    return Drill(
        "drill",
        _outcome("no fault", 1.0, SLOW, BGP),
        [
            _outcome("cheap", 1.02, SLOW, BGP),
            _outcome("slow", 1.5, SLOW, BGP),
            _outcome("bgp", 1.0, SLOW, ("bgp_health", "leaf1", "fail", "2/4 sessions")),
            Outcome("lost", error="lost with its worker: KilledWorker()"),
        ],
    )


def test_each_fault_is_judged_against_the_baseline() -> None:
    drill = _drill()
    verdicts = {f["label"]: f["verdict"] for f in drill.to_json()["faults"]}
    assert verdicts == {"cheap": "pass", "slow": "fail", "bgp": "fail", "lost": "fail"}
    worse = {f["label"]: f["worse"] for f in drill.to_json()["faults"]}
    assert list(worse["slow"]) == ["collective_efficiency"] and "1.5x" in str(worse["slow"])
    assert list(worse["bgp"]) == ["bgp_health"] and list(worse["lost"]) == ["drill"]
    assert drill.exit_code == 1
    cheap = drill.outcomes[0]
    assert drill.cell(cheap, "collective_efficiency") == AS_BASELINE
    assert drill.cell(cheap, "bgp_health") == "pass"


def test_a_failing_baseline_is_reported_once_at_the_top() -> None:
    drill = _drill()
    text = drill.markdown()
    top = text.split("| fault |")[0]
    assert "**The baseline (no fault) fails**: collective_efficiency: allreduce: p99/p50" in top
    assert text.count("p99/p50 6.0") == 2  # the top line, and "slow"'s own failure (blamed)
    assert "- **cheap**" not in text
    junit = ET.fromstring(drill.junit())
    names = sorted((c.get("name"), c.get("classname")) for c in junit.iter("testcase"))
    assert names == [
        ("bgp", "bgp_health"),
        ("lost", "drill"),
        ("no fault", "collective_efficiency"),
        ("slow", "collective_efficiency"),
    ]


def test_the_heat_map_shades_by_comparison_with_the_baseline() -> None:
    drill = _drill()
    cheap, slow, bgp, _ = drill.outcomes
    assert drill._level(cheap, "collective_efficiency") == 2  # grey: as the baseline
    assert drill._level(slow, "collective_efficiency") == 3  # red: worse
    assert drill._level(bgp, "bgp_health") == 3
    assert drill._level(cheap, "bgp_health") == 0


def test_a_collectives_speed_is_judged_by_its_slowdown() -> None:
    """A baseline at 3.9x collective_efficiency's bound passes it; a fault that costs the
    collective 1.05x crosses 4x and fails it, but is not worse than the baseline beyond the
    tolerance; one that costs 1.3x is, as is one whose collective never finished, and a
    validator the baseline passes that fails under a fault."""
    ok = ("collective_efficiency", "allreduce", "pass", "mean 3.90x the bound")
    over = ("collective_efficiency", "allreduce", "fail", "mean 4.1x the bound")
    drill = Drill(
        "d",
        _outcome("no fault", 1.0, ok, BGP),
        [
            _outcome("edge", 1.05, over, BGP),
            _outcome("slow", 1.3, over, BGP),
            Outcome("stuck", [over, BGP], iteration_mean_ms=0.9, unfinished=2),
            _outcome("bgp", 1.0, ok, ("bgp_health", "leaf1", "fail", "2/4 sessions")),
        ],
    )
    verdicts = {f["label"]: f["verdict"] for f in drill.to_json()["faults"]}
    assert verdicts == {"edge": "pass", "slow": "fail", "stuck": "fail", "bgp": "fail"}
    assert drill.cell(drill.outcomes[0], "collective_efficiency") == AS_BASELINE
    assert "The baseline" not in drill.markdown()


SCENARIO = {
    "traffic": [{"at": 0, "duration": 10, "kind": "all_reduce"}],
    "faults": [
        {"at": 3, "fault": "link-down", "link": "uplink of leaf1"},
        {"at": 6, "fault": "link-up", "link": "uplink of leaf1"},
    ],
}


def test_a_case_is_given_back_with_the_scenarios_recovery() -> None:
    """The scenario restores its link after 3 s: so does each case, on any backend; without
    a recovery, a live twin gets its faults back half-way to the end of the traffic, the
    simulator holds them."""
    case = Case("spine1 down", ({"fault": "node-down", "node": "spine1"},))
    when = timing(SCENARIO, 2.5, live=True)
    assert when == timing(SCENARIO, 2.5, live=False) == When(2.5, 5.5)
    assert with_faults(SCENARIO, case, when)["faults"] == [
        {"fault": "node-down", "node": "spine1", "at": 2.5},
        {"fault": "node-up", "node": "spine1", "at": 5.5},
    ]
    bare = {"traffic": SCENARIO["traffic"]}
    assert timing(bare, 2.0, live=True) == When(2.0, 6.0)
    assert timing(bare, 2.0, live=False) == When(2.0)
    assert with_faults(bare, case, When(2.0))["faults"] == [
        {"fault": "node-down", "node": "spine1", "at": 2.0}
    ]
