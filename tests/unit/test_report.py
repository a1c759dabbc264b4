"""Reports (JSON, JUnit, Markdown), exit codes, the registry's checks of names and thresholds,
and the `twin validate` and `twin diff` verbs."""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from twin.cli import main as cli
from twin.errors import InputError
from twin.lab.directory import Lab
from twin.outputs import report
from validators import registry
from validators.examples import edit_json, generate
from validators.result import Finding, Result, Status

SMALL = Path(__file__).resolve().parents[2] / "examples" / "small.yaml"
RESULTS = [
    Result("headroom", "fabric", Status.PASS, "every lossless PG has its headroom", {"pgs": 28}),
    Result(
        "pfc_consistency",
        "fabric",
        Status.FAIL,
        "61 findings: leaf1 Ethernet0 PORT_QOS_MAP: no PFC",
        {"ports": 28},
        [Finding("leaf1", f"no PFC on {i}", f"Ethernet{i}", "PORT_QOS_MAP") for i in range(61)],
    ),
    Result("ecmp_spread", "leaf1", Status.NOT_OBSERVABLE, "the backend has no queue counters"),
]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    return generate(tmp_path_factory.mktemp("report") / "small", SMALL)


@pytest.fixture
def small(pristine: Lab, tmp_path: Path) -> Lab:
    shutil.copytree(pristine.path, tmp_path / "small")
    return Lab.open(tmp_path / "small")


def test_reports_hold_every_result_in_three_forms(tmp_path: Path) -> None:
    written = report.write(RESULTS, tmp_path, "twin validate small")
    data = json.loads((tmp_path / "report.json").read_text())
    assert data == written  # what the verbs print with --json is what report.json holds
    assert data["exit_code"] == 1
    assert [Result.from_json(r) for r in data["results"]] == RESULTS
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "1", "1")
    cases = {(c.get("classname"), c.get("name")): c for c in suite.iter("testcase")}
    failure = cases[("pfc_consistency", "fabric")].find("failure")
    assert failure is not None and failure.text is not None
    assert failure.text.splitlines()[60] == "leaf1 Ethernet60 PORT_QOS_MAP: no PFC on 60"
    skipped = cases[("ecmp_spread", "leaf1")].find("skipped")
    assert skipped is not None and skipped.get("message") == "the backend has no queue counters"
    assert cases[("headroom", "fabric")].find("failure") is None
    markdown = (tmp_path / "report.md").read_text()
    assert "1 passed, 1 failed, 1 not observable" in markdown
    assert (
        "| ecmp_spread | leaf1 | not-observable | the backend has no queue counters |" in markdown
    )
    assert "- leaf1 Ethernet49 PORT_QOS_MAP: no PFC on 49" in markdown
    assert "no PFC on 50" not in markdown and "… and 11 more (see report.json)" in markdown


def test_not_observable_does_not_fail_the_run_but_is_counted() -> None:
    unseen = RESULTS[2]
    assert report.exit_code([RESULTS[0], unseen]) == 0
    assert report.counts([RESULTS[0], unseen]) == "1 passed, 0 failed, 1 not observable"
    assert report.exit_code(RESULTS) == 1


def test_changes_between_runs_mark_regressions() -> None:
    fixed = Result("pfc_consistency", "fabric", Status.PASS, "28 ports lossless")
    gone = Result("deadlock", "priority 3", Status.PASS, "no cycle")
    found = report.changes([RESULTS[0], RESULTS[1], gone], [RESULTS[0], fixed, RESULTS[2]])
    assert [(c.validator, c.before, c.after, c.regression) for c in found] == [
        ("pfc_consistency", Status.FAIL, Status.PASS, False),
        ("ecmp_spread", None, Status.NOT_OBSERVABLE, False),
        ("deadlock", Status.PASS, None, False),
    ]
    worse = report.changes([fixed], [RESULTS[1]])
    assert [c.regression for c in worse] == [True]
    assert "fail **(regression)**" in report.change_table(worse)
    assert report.change_table([]) == "no verdict changed"


def test_registry_refuses_unknown_names_and_thresholds() -> None:
    names = [v.name for v in registry.available("static")]
    assert names == sorted(names) and "deadlock" in names and "headroom" in names
    with pytest.raises(InputError, match="no static validator 'pfc'"):
        registry.select("static", ["pfc"])
    with pytest.raises(InputError, match=r"ecn_thresholds\.rtt: unknown threshold"):
        registry.get("ecn_thresholds").params({"rtt": 8})
    assert all(v.summary and v.check.__doc__ for v in registry.available("static"))


def test_validate_verb_prints_the_summary_and_writes_the_reports(
    small: Lab, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["validate", str(small.path), "--failures", "0"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^deadlock +priority 3 +pass +no cyclic buffer dependency$", out, re.M)
    assert "1-link failures" not in out and "|" not in out  # aligned text, as `twin run`
    assert cli.main(["validate", str(small.path), "--failures", "0", "--markdown"]) == 0
    markdown = capsys.readouterr().out
    assert markdown.startswith("| validator | scope | status | reason |\n|---|---|---|---|\n")
    assert "| deadlock | priority 3 | pass | no cyclic buffer dependency |" in markdown
    counted = "17 passed, 0 failed, 0 not observable, 1 informational"
    assert f"{counted}; reports in {small.path / 'validate'}" in out
    assert {p.name for p in (small.path / "validate").iterdir()} == {
        "report.json",
        "junit.xml",
        "report.md",
    }


def test_validate_verb_exits_1_on_a_failure_and_takes_thresholds(
    small: Lab, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "reports"
    args = ["validate", str(small.path), "--only", "ecn_thresholds", "--out", str(out)]
    assert cli.main([*args, "--set", "ecn_thresholds.rtt_us=1000"]) == 1
    assert re.search(r"^ecn_thresholds +fabric +fail ", capsys.readouterr().out, re.M)
    assert json.loads((out / "report.json").read_text())["exit_code"] == 1
    assert cli.main([*args, "--set", "ecn_thresholds.rtt=3"]) == 2
    assert cli.main([*args, "--set", "rtt_us=3"]) == 2
    assert cli.main(["validate", str(small.path), "--only", "nosuch"]) == 2
    errors = capsys.readouterr().err.splitlines()
    assert errors == [
        "twin: --set: ecn_thresholds.rtt: unknown threshold (known: rtt_us, kmin_max_bdp, "
        "kmax_min_bdp)",
        "twin: --set: rtt_us=3: write NAME.KEY=VALUE",
        "twin: --only: no static validator 'nosuch' (known: config_drift, deadlock, "
        "ecn_thresholds, failover_budget, fib_reachability, headroom, host_rdma, "
        "intent_values, mlag_consistency, mtu_consistency, pfc_consistency, pfc_watchdog, "
        "schedulers, sonic_fields, yang)",
    ]


def test_diff_verb_shows_changed_verdicts_and_fails_on_regressions(
    small: Lab, pristine: Lab, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    only = ["--only", "pfc_consistency", "headroom", "config_drift"]
    assert cli.main(["diff", str(pristine.path), str(small.path), *only]) == 0
    shown = capsys.readouterr().out
    assert "Verdict: no regression." in shown
    assert "\nno config changed\n" in shown and "\nno verdict changed\n" in shown
    edit_json(small, "spine2", lambda db: db["CABLE_LENGTH"]["AZURE"].update(Ethernet0="300m"))
    out = tmp_path / "review"
    assert cli.main(["diff", str(pristine.path), str(small.path), *only, "--out", str(out)]) == 1
    text = capsys.readouterr().out
    printed = text.splitlines()
    at = printed.index("1 config difference:")
    assert (
        printed[at + 1]
        == '- spine2 AZURE CABLE_LENGTH: Ethernet0: "40m" in base, "300m" in candidate'
    )
    rows = [line.split(" | ")[:4] for line in printed if line.startswith("| headroom")]
    assert rows == [["| headroom", "fabric", "pass", "fail **(regression)**"]]
    assert (out / "diff.md").read_text() == text
    assert json.loads((out / "review.json").read_text())["exit_code"] == 1
    (case,) = ET.parse(out / "junit.xml").getroot().iter("testcase")  # the regression alone
    assert case.get("name") == "static headroom fabric"  # what and where; how in the failure
    failure = case.find("failure")
    assert failure is not None
    assert str(failure.get("message")).startswith("static headroom fabric: pass -> fail")
    # the other way round the change is a fix, not a regression
    assert cli.main(["diff", str(small.path), str(pristine.path), *only]) == 0


def test_a_config_the_routing_cannot_read_is_one_line(
    small: Lab, capsys: pytest.CaptureFixture[str]
) -> None:
    edit_json(small, "leaf2", lambda db: db["INTERFACE"].update({"Ethernet24|10.1.0.4/33": {}}))
    assert cli.main(["validate", str(small.path), "--only", "deadlock"]) == 2
    assert capsys.readouterr().err == (
        f"twin: {small.path}/configs/leaf2/config_db.json: INTERFACE.Ethernet24|10.1.0.4/33: "
        "'33' is not a valid netmask\n"
    )
