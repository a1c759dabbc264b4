"""The verdict on a run: `twin report` rebuilds every report from a saved run, exit codes, and
scenarios refused before anything starts (no root needed: nothing is deployed).

Runs are synthetic (`test_validators_dynamic.SyntheticRun`), saved under a generated lab.
"""

from __future__ import annotations

import json
import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.synthetic import (
    NETNS,
    T0,
    SyntheticRun,
    flow,
    generate_lab,
    model_fib,
    probe_all,
    probed,
)
from twin.cli import main as cli
from twin.errors import InputError
from twin.lab.directory import Lab
from twin.outputs import plots
from twin.scenario import model as scenarios
from twin.verdict import verdict
from validators.result import Result, Status

TWIN = Path(sys.executable).with_name("twin")
REPORTS = ("report.json", "junit.xml", "report.md")
PLOTS = ("uplinks.png", "throughput.png", "loss.png")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    return generate_lab(tmp_path_factory.mktemp("lab") / "lab", "vverd")


def twin_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """`twin ARGV...` in this process: exit code, stdout, stderr."""
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def failing_run(lab: Lab, name: str = "failing") -> SyntheticRun:
    """All-Reduce with a link down that costs 3 s of one flow; ECMP even (after the failover
    probes, from server2 behind leaf1 and leaf2, until the link-up and a counter interval);
    probes all pass."""
    run = SyntheticRun(lab, name=name)
    run.fault(1.0, "link-down", link="leaf1:spine1", ends=["leaf1:Ethernet24", "spine1:Ethernet0"])
    run.fault(3.0, "link-up", link="leaf1:spine1")
    run.flows = [
        flow("server2", "server3", qp, gaps=[(4.1, 300)] if qp == 0 else None) for qp in range(16)
    ]
    gap = (1.0, 3000, 4.0)
    run.failover_probes = [probed(0, "leaf1:spine1", "leaf1:Ethernet24", gap, until=3.0)]
    run.uplink_tx = {"leaf2": [2000, 2000]}
    run.probes = probe_all(lab)
    run.validate = {
        "failover": {"max_loss_ms": 1000},
        "ecmp_spread": {"max_over_mean": 1.5},
        "dscp_preserved": {},
        "reachability": {},
    }
    return run


def passing_run(lab: Lab, name: str = "passing") -> SyntheticRun:
    """Traffic without faults; one validator cannot see anything (a backend without probes)."""
    run = SyntheticRun(lab, name=name)
    run.capabilities = ["bgp", "counters", "fib", "flows"]
    run.flows = [flow("server1", "server3", qp) for qp in range(4)]
    run.uplink_tx = {"leaf1": [1000, 1000]}
    run.validate = {"dscp_preserved": {}, "bgp_health": {}, "mtu": {}}
    return run


def statuses(run_dir: Path) -> dict[tuple[str, str], str]:
    data = json.loads((run_dir / "report.json").read_text())
    return {(r["validator"], r["scope"]): r["status"] for r in data["results"]}


# -- twin report ------------------------------------------------------------------------------


def test_report_rebuilds_every_report_and_plot_from_a_saved_run(
    lab: Lab, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = failing_run(lab).write().path
    code, out, _ = twin_main(capsys, "report", str(run_dir))
    assert code == 1
    assert "failed" in out and str(run_dir) in out
    first = {name: (run_dir / name).read_text() for name in REPORTS}
    assert all((run_dir / p).stat().st_size > 0 for p in PLOTS)

    data = json.loads(first["report.json"])
    assert data["exit_code"] == 1
    assert statuses(run_dir)[("failover", "fault1 link-down leaf1:spine1")] == "fail"
    assert statuses(run_dir)[("reachability", "servers")] == "pass"
    failed = [r for r in data["results"] if r["status"] == "fail"]
    suite = ET.fromstring(first["junit.xml"]).find("testsuite")
    assert suite is not None
    assert int(suite.get("failures", -1)) == len(failed) >= 1
    assert int(suite.get("tests", -1)) == len(data["results"])
    assert "loss window 3000 ms > 1000 ms" in first["report.md"]
    assert all(f"]({p})" in first["report.md"] for p in PLOTS)

    # Everything removed, then rebuilt from the observations alone: the same reports.
    for name in (*REPORTS, *PLOTS):
        (run_dir / name).unlink()
    code, _, _ = twin_main(capsys, "report", str(run_dir))
    assert code == 1
    assert {name: (run_dir / name).read_text() for name in REPORTS} == first
    assert all((run_dir / p).exists() for p in PLOTS)


def test_report_exits_0_when_nothing_failed_even_if_something_was_not_observable(
    lab: Lab, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = passing_run(lab).write().path
    code, out, _ = twin_main(capsys, "report", str(run_dir))
    assert code == 0
    # mtu, and two invariants the scenario does not name that this backend cannot observe
    assert "0 failed, 3 not observable" in out
    assert statuses(run_dir)[("mtu", "run")] == "not-observable"
    assert statuses(run_dir)[("daemons", "run")] == "not-observable"
    assert statuses(run_dir)[("pfc_behaviour", "lossless drops")] == "not-observable"
    suite = ET.fromstring((run_dir / "junit.xml").read_text()).find("testsuite")
    assert suite is not None and suite.get("skipped") == "3" and suite.get("failures") == "0"
    # No faults: no loss plot, and report.md links only the plots that exist.
    assert not (run_dir / "loss.png").exists()
    assert "loss.png" not in (run_dir / "report.md").read_text()


def broken_run(lab: Lab, validate: dict[str, dict[str, Any]]) -> SyntheticRun:
    """A run that broke every invariant while its scenario selected `validate`: zebra of leaf1
    died with no fault to explain it, a BGP session flapped, a lossless flow lost packets
    outside any fault, and spine1 lost its route to a server subnet."""
    run = SyntheticRun(lab, name="broken")
    run.capabilities = sorted(NETNS | {"daemons"})
    run.flows = [flow("server1", "server3", gaps=[(2.0, 5)]), flow("server3", "server1")]
    run.events = [
        {"t": T0, "event": "daemons", "watched": 18, "interval": 0.25},
        {"t": T0 + 2, "event": "daemon", "node": "leaf1", "daemon": "zebra", "state": "died"},
    ]
    run.bgp_down(3.0, "leaf3", "spine2", "hold timer expired")
    fib = model_fib(lab)
    fib["spine1"] = dict(list(fib["spine1"].items())[1:])
    run.fib_end = fib
    run.validate = validate
    return run


def test_invariants_fail_the_run_whatever_the_scenario_selects(
    lab: Lab, capsys: pytest.CaptureFixture[str]
) -> None:
    """A scenario that selects only dscp_preserved still gets the invariants judged: the dead
    zebra, the flap, the lossless loss and the FIB that disagrees with the model each fail,
    naming the device; the other scopes of those validators are not run."""
    run_dir = broken_run(lab, {"dscp_preserved": {}}).write().path
    code, _, _ = twin_main(capsys, "report", str(run_dir))
    assert code == 1
    rows = statuses(run_dir)
    assert {k: v for k, v in rows.items() if v == "fail"} == {
        ("daemons", "switches"): "fail",
        ("bgp_health", "flaps"): "fail",
        ("lossless_isolation", "loss roce"): "fail",
        ("fib_agreement", "FIB end"): "fail",
    }
    assert ("bgp_health", "sessions") not in rows and ("lossless_isolation", "bulk") not in rows
    assert rows[("pfc_behaviour", "lossless drops")] == "not-observable"  # netns: no PFC
    report = json.loads((run_dir / "report.json").read_text())["results"]
    (daemons,) = [r["reason"] for r in report if r["validator"] == "daemons"]
    assert "leaf1" in daemons and "zebra" in daemons
    # A scenario sets an invariant's thresholds (one flap allowed); it cannot drop it.
    code, results = verdict.report_run(
        broken_run(lab, {"bgp_health": {"max_flaps": 1}}).write().path
    )
    flaps = [r for r in results if (r.validator, r.scope) == ("bgp_health", "flaps")]
    assert [r.status for r in flaps] == [Status.PASS]
    assert code == 1 and {r.validator for r in results if r.status is Status.FAIL} == {
        "daemons",
        "lossless_isolation",
        "fib_agreement",
    }


def test_report_of_a_run_directory_copied_elsewhere_finds_its_lab(
    lab: Lab, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = failing_run(lab, "copied").write().path
    copy = tmp_path / "artifacts" / "run"
    shutil.copytree(saved, copy)
    code, results = verdict.report_run(copy)
    assert code == 1
    assert (copy / "report.json").exists()
    assert {r.validator for r in results if r.status is Status.FAIL} == {"failover"}


def test_report_refuses_what_is_not_a_run_directory_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = twin_main(capsys, "report", str(tmp_path))
    assert code == 2
    assert err.count("\n") == 1
    assert "not a run directory (run.json missing)" in err


@pytest.mark.parametrize(
    ("validate", "key"),
    [
        ({"no_such_check": {}}, "validate.no_such_check: no validator"),
        ({"failover": {"max_loss": 1}}, "failover.max_loss: unknown threshold"),
    ],
)
def test_report_refuses_a_saved_scenario_naming_an_unknown_validator_or_threshold(
    lab: Lab, capsys: pytest.CaptureFixture[str], validate: dict[str, Any], key: str
) -> None:
    run = passing_run(lab, "unknown")
    run.validate = validate
    run_dir = run.write().path
    code, _, err = twin_main(capsys, "report", str(run_dir))
    assert code == 2
    assert err.count("\n") == 1 and key in err
    assert not (run_dir / "report.json").exists()


# -- scenarios refused before anything starts -------------------------------------------------


GOOD = {
    "name": "good",
    "traffic": [
        {"at": 0, "duration": 3, "kind": "all_reduce", "servers": "all", "qps": 2},
        {
            "at": 1,
            "duration": 1,
            "kind": "backup",
            "src": "server1",
            "dst": "server3",
            "class": "storage",
        },
    ],
    "faults": [{"at": 1, "fault": "link-down", "link": "leaf1:spine1"}],
    "validate": {"failover": {"max_loss_ms": 2000}, "bgp_health": {}},
}


def bad(path: str, value: Any) -> dict[str, Any]:
    """GOOD with one value replaced (`path` like "traffic.1.dst"); None deletes the key."""
    data: dict[str, Any] = json.loads(json.dumps(GOOD))
    *parents, last = path.split(".")
    node: Any = data
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node[p]
    if value is None:
        del node[int(last) if isinstance(node, list) else last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return data


CASES = {
    "unknown key": (bad("repeat", 3), "repeat: unknown key"),
    "unknown key in a phase": (bad("traffic.0.speed", 10), "traffic.0.speed: unknown key"),
    "unknown server": (bad("traffic.1.dst", "server99"), "traffic.1: no server 'server99'"),
    "unknown class": (bad("traffic.1.class", "gold"), "traffic.1.class: no class 'gold'"),
    "link-down without link": (
        bad("faults.0.link", None),
        "faults.0: link-down needs link: NODE:PORT or NODE:PEER",
    ),
    "unknown node": (bad("faults.0.link", "leaf9:spine1"), "faults.0: no node 'leaf9'"),
    "negative detection delay": (
        bad("faults.0.delay_ms", -1),
        "faults.0.delay_ms: Input should be greater than or equal to 0",
    ),
    "unknown validator": (
        bad("validate.ecmp", {}),
        "validate.ecmp: no validator (known: ",
    ),
    "unknown threshold": (
        bad("validate.failover", {"max_loss_ms": 1, "loss_ms": 2}),
        "failover.loss_ms: unknown threshold "
        "(known: max_loss_ms, margin_ms, recovery_s, blackhole_s)",
    ),
    "negative time": (bad("faults.0.at", -1), "faults.0.at: "),
    "backup without dst": (bad("traffic.1.dst", None), "backup needs src: SERVER and dst: SERVER"),
}


def test_the_good_scenario_loads(lab: Lab, tmp_path: Path) -> None:
    path = tmp_path / "good.yaml"
    path.write_text(yaml.safe_dump(GOOD))
    scenario = scenarios.load(path, lab)
    assert scenario.duration == 5.0  # 3 s of traffic, then the 2 s settle
    assert scenario.validate_["failover"] == {"max_loss_ms": 2000}


@pytest.mark.parametrize("case", CASES)
def test_a_bad_scenario_is_refused_naming_file_and_key(lab: Lab, tmp_path: Path, case: str) -> None:
    data, message = CASES[case]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError) as refused:
        scenarios.load(path, lab)
    assert str(refused.value).startswith(f"{path}: ")
    assert message in str(refused.value)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("case", ["unknown validator", "unknown threshold", "unknown server"])
def test_twin_run_refuses_a_bad_scenario_with_exit_2_before_anything_starts(
    lab: Lab, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    data, message = CASES[case]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    events = lab.path / "events.jsonl"
    before = events.read_text() if events.exists() else None
    runs = sorted((lab.path / "runs").glob("*")) if (lab.path / "runs").exists() else []
    code, out, err = twin_main(capsys, "run", str(lab.path), str(path))
    assert code == 2
    assert err.count("\n") == 1 and message in err and str(path) in err
    assert out == ""  # nothing deployed, nothing played
    assert (events.read_text() if events.exists() else None) == before
    now = sorted((lab.path / "runs").glob("*")) if (lab.path / "runs").exists() else []
    assert now == runs
    assert not Path(f"/var/run/netns/{lab.name}.leaf1").exists()


def test_plots_name_what_they_show(lab: Lab) -> None:
    import matplotlib.pyplot as plt

    run = failing_run(lab, "plotted")
    run.uplink_tx = {"leaf1": [1000, 900], "leaf2": [2000, 2000]}
    obs = run.write()
    verdict.report_run(obs.path)
    results = [
        Result.from_json(r) for r in json.loads((obs.path / "report.json").read_text())["results"]
    ]
    drawn = dict(plots.draw(obs, results, {"ecmp_spread": {"max_over_mean": 1.5}}))
    try:
        marks = [t.get_text() for t in drawn["throughput.png"].axes[0].texts]
        assert " fault1 link-down leaf1:spine1" in marks and " fault2 link-up leaf1:spine1" in marks
        titles = [ax.get_title() for ax in drawn["uplinks.png"].axes if ax.patches]
        assert titles == ["leaf1: pass (max/mean 1.05)", "leaf2: pass (max/mean 1.00)"]
        loss = drawn["loss.png"].axes[0]
        assert [t.get_text() for t in loss.get_yticklabels()] == ["fault1 link-down leaf1:spine1"]
    finally:
        for fig in drawn.values():
            plt.close(fig)
