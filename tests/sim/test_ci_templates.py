"""The CI templates of examples/ci: the GitHub Actions workflow and the GitLab job are
well-formed (a structural schema check: actionlint is not installable here), both run the
review script with the same arguments, and that script, run here as the workflow runs it,
flags the storage-DSCP change (exit 1, one JUnit case per regression) and passes no change."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.conftest import REPO

CI = REPO / "examples" / "ci"
COMMAND = "bash base/ci/twin-review.sh base head review"
"""What the GitHub workflow runs (its review step), in the directory holding base/ and head/."""

STEP = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "id": {"type": "string"},
        "if": {"type": "string"},
        "uses": {"type": "string", "pattern": r"^[\w.-]+/[\w./-]+@v\d+$"},
        "run": {"type": "string"},
        "with": {
            "type": "object",
            "additionalProperties": {"type": ["string", "number", "boolean"]},
        },
        "env": {"type": "object", "additionalProperties": {"type": "string"}},
        "continue-on-error": {"type": "boolean"},
    },
    "additionalProperties": False,
    "oneOf": [{"required": ["uses"]}, {"required": ["run"]}],
}
WORKFLOW = {
    "type": "object",
    "required": ["name", "jobs"],
    "properties": {
        "name": {"type": "string"},
        "permissions": {
            "type": "object",
            "additionalProperties": {"enum": ["read", "write", "none"]},
        },
        "env": {"type": "object", "additionalProperties": {"type": "string"}},
        "jobs": {
            "type": "object",
            "minProperties": 1,
            "additionalProperties": {
                "type": "object",
                "required": ["runs-on", "steps"],
                "properties": {
                    "if": {"type": "string"},
                    "runs-on": {"type": "string"},
                    "container": {"type": "string"},
                    "timeout-minutes": {"type": "integer"},
                    "steps": {"type": "array", "minItems": 1, "items": STEP},
                },
                "additionalProperties": False,
            },
        },
    },
}
"""The part of GitHub's workflow syntax these templates use (`on` parses as YAML's true)."""


def workflow() -> dict[Any, Any]:
    data: dict[Any, Any] = yaml.safe_load((CI / "github-actions.yml").read_text())
    return data


def test_the_github_workflow_is_well_formed() -> None:
    data = workflow()
    jsonschema.validate(data, WORKFLOW)
    assert set(data[True]) == {"pull_request"}  # `on:` (YAML 1.1 reads it as true)
    steps = data["jobs"]["review"]["steps"]
    ids = [s.get("id") for s in steps]
    review = steps[ids.index("review")]
    assert review["run"] == COMMAND and review["continue-on-error"] is True
    after = steps[ids.index("review") + 1 :]
    assert all(s["if"] in ("always()", "steps.review.outcome == 'failure'") for s in after)
    assert any("review/junit/*.xml" in str(s.get("with")) for s in after)
    assert any("--body-file review/summary.md" in s.get("run", "") for s in after)
    for job in data["jobs"].values():
        for step in job["steps"]:  # every ${{ }} closes
            text = yaml.safe_dump(step)
            assert text.count("${{") == text.count("}}"), step


def test_the_gitlab_job_runs_the_same_script() -> None:
    data = yaml.safe_load((CI / "gitlab-ci.yml").read_text())
    job = data["fabric-review"]
    assert {"image", "rules", "script", "artifacts"} <= set(job)
    assert job["artifacts"]["reports"]["junit"] == "review/junit/*.xml"
    assert job["artifacts"]["when"] == "always"
    assert "bash ../base/ci/twin-review.sh ../base . review || code=$?" in " ".join(job["script"])
    assert job["script"][-1] == "exit $code"
    assert any("body@review/summary.md" in line for line in job["script"])


def layout(tmp: Path, change: str | None) -> Path:
    """A directory as the workflow leaves it: base/ and head/ checkouts of a fabric
    repository (the small fabric, the review scenario, the script in ci/)."""
    for side in ("base", "head"):
        root = tmp / side
        (root / "scenarios").mkdir(parents=True)
        (root / "ci").mkdir()
        shutil.copy(REPO / "examples" / "small.yaml", root / "fabric.yaml")
        shutil.copy(CI / "twin-review.sh", root / "ci" / "twin-review.sh")
        shutil.copy(CI / "scenarios" / "allreduce-backup.yaml", root / "scenarios")
    if change:
        (tmp / "head" / "changes").mkdir()
        (tmp / "head" / "changes" / "10-change.yaml").write_text(change)
    return tmp


def review(where: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    return subprocess.run(
        COMMAND.split(), cwd=where, env=env, capture_output=True, text=True, timeout=600
    )


def test_the_review_flags_storage_marked_lossless(tmp_path: Path) -> None:
    change = (REPO / "examples" / "incidents" / "1-pause-storm" / "change.yaml").read_text()
    done = review(layout(tmp_path, change))
    assert done.returncode == 1, done.stderr
    out = tmp_path / "review"
    summary = (out / "summary.md").read_text()
    assert "## Static validation of the change" in summary and "Verdict: **regression**." in summary
    cases = ET.parse(out / "junit" / "review-allreduce-backup.xml").getroot().iter("testcase")
    names = [c.get("name") or "" for c in cases]
    assert "collective iteration mean (ms) allreduce" in names
    assert "dynamic lossless_isolation bulk" in names
    assert list(ET.parse(out / "junit" / "validate.xml").getroot().iter("testcase"))


def test_no_change_is_no_regression(tmp_path: Path) -> None:
    done = review(layout(tmp_path, None))
    assert done.returncode == 0, done.stdout + done.stderr
    junit = ET.parse(tmp_path / "review" / "junit" / "review-allreduce-backup.xml").getroot()
    assert junit.findall(".//testcase") == []
    assert "Verdict: no regression." in (tmp_path / "review" / "summary.md").read_text()


def test_decommissioned_servers_are_reviewed_not_a_crash(tmp_path: Path) -> None:
    """The change removes two servers from the fabric: the review runs (not exit 3) and the
    comment lists each as removed, with the links it had."""
    where = layout(tmp_path, None)
    fabric = where / "head" / "fabric.yaml"
    fabric.write_text(fabric.read_text().replace("servers:\n  count: 4", "servers:\n  count: 2"))
    done = review(where)
    assert done.returncode in (0, 1), done.stderr
    summary = (where / "review" / "summary.md").read_text()
    assert "- server4: removed (only in base): address 10.2.0.12/29; nic0 to leaf3" in summary


@pytest.mark.parametrize(("change", "code"), [("configs/nosuch/x.json:\n  - {delete: A}\n", 2)])
def test_a_change_that_does_not_apply_is_bad_input(tmp_path: Path, change: str, code: int) -> None:
    """Refused, and still a summary.md and a JUnit case saying what was refused, which the
    comment and the test report show."""
    done = review(layout(tmp_path, change))
    assert done.returncode == code
    assert "matches no file of the lab" in done.stderr
    summary = (tmp_path / "review" / "summary.md").read_text()
    assert "**Not reviewed**: the change's lab failed (exit 2)" in summary
    assert "configs/nosuch/x.json" in summary and "matches no file of the lab" in summary
    (case,) = ET.parse(tmp_path / "review" / "junit" / "review.xml").getroot().iter("testcase")
    failure = case.find("failure")
    assert case.get("name") == "the change's lab" and failure is not None
    assert "matches no file of the lab" in (failure.get("message") or "")


def test_a_scenario_refused_is_a_junit_case_and_a_summary_line(tmp_path: Path) -> None:
    where = layout(tmp_path, None)
    (where / "head" / "scenarios" / "broken.yaml").write_text("name: broken\nnosuch: 1\n")
    done = review(where)
    assert done.returncode == 2
    (case,) = ET.parse(where / "review" / "junit" / "review-broken.xml").getroot().iter("testcase")
    assert case.get("name") == "review of broken" and "nosuch" in done.stderr
    summary = (where / "review" / "summary.md").read_text()
    assert "**review of broken failed** (exit 2)" in summary
    assert "Verdict: no regression." in summary  # the other scenario still reviewed


INSTALL = 'python3 -m pip install "git+${TWIN_REPO}@${TWIN_REF}"'
"""How twin-review.sh installs fabric twin: from its repository at a pinned ref."""


def test_fabric_twin_is_installed_from_its_repository_at_a_pinned_ref() -> None:
    """No template installs a package by a name a package index resolves (an unclaimed name
    anyone can register); each runs twin-review.sh install, whose pip line README.md shows."""
    script = (CI / "twin-review.sh").read_text()
    assert [line.strip() for line in script.splitlines() if "pip install" in line] == [INSTALL]
    assert INSTALL in (CI / "README.md").read_text()
    installs = {
        "github-actions.yml": "bash base/ci/twin-review.sh install",
        "gitlab-ci.yml": "bash ../base/ci/twin-review.sh install",
    }
    for name, install in installs.items():
        text = (CI / name).read_text()
        assert "pip install" not in text and "TWIN_PACKAGE" not in text, name
        assert install in text, name
    env = workflow()["env"]
    assert env == {"TWIN_REPO": "${{ vars.TWIN_REPO }}", "TWIN_REF": "${{ vars.TWIN_REF }}"}


def test_install_without_a_pinned_ref_says_which_variable(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TWIN_")}
    for given, missing in (({}, "TWIN_REPO"), ({"TWIN_REPO": "file:///x"}, "TWIN_REF")):
        done = subprocess.run(
            ["bash", str(CI / "twin-review.sh"), "install"],
            env={**env, **given},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode != 0 and f"{missing}: set {missing} to" in done.stderr


def post_steps(tmp_path: Path, summary: bool, extra: dict[str, str]) -> dict[str, str]:
    """What each template's posting step prints (its own lines, run by bash with `gh` and
    `curl` stand-ins that fail as a refused token would), with or without summary.md."""
    if summary:
        (tmp_path / "review").mkdir()
        (tmp_path / "review" / "summary.md").write_text("# Fabric change review\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("gh", "curl"):
        (bin_dir / tool).write_text(f"#!/bin/sh\necho {tool} called >&2\nexit 1\n")
        (bin_dir / tool).chmod(0o755)
    github = next(
        s["run"]
        for s in workflow()["jobs"]["review"]["steps"]
        if "gh pr comment" in s.get("run", "")
    )
    gitlab = yaml.safe_load((CI / "gitlab-ci.yml").read_text())["fabric-review"]["script"]
    posting = next(line for line in gitlab if "summary.md" in line and "curl" in line)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TWIN_")}
    env.update(PATH=f"{bin_dir}:{os.environ['PATH']}", PR="1", **extra)
    said = {}
    for name, text in (("github", github), ("gitlab", posting)):
        done = subprocess.run(
            ["bash", "-c", text], cwd=tmp_path, env=env, capture_output=True, text=True
        )
        said[name] = done.stdout + done.stderr
    return said


def test_no_summary_is_not_blamed_on_the_token(tmp_path: Path) -> None:
    said = post_steps(tmp_path, False, {"TWIN_REVIEW_TOKEN": "t"})
    for text in said.values():
        assert "the review did not run" in text and "called" not in text
        assert "token" not in text.lower()


def test_a_refused_post_says_so(tmp_path: Path) -> None:
    said = post_steps(tmp_path, True, {"TWIN_REVIEW_TOKEN": "t"})
    assert "gh called" in said["github"] and "not posted" in said["github"]
    assert "curl called" in said["gitlab"] and "GitLab refused it" in said["gitlab"]
    (tmp_path / "no-token").mkdir()
    said = post_steps(tmp_path / "no-token", True, {})
    assert "no TWIN_REVIEW_TOKEN variable" in said["gitlab"] and "curl called" not in said["gitlab"]
