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


@pytest.mark.parametrize(("change", "code"), [("configs/nosuch/x.json:\n  - {delete: A}\n", 2)])
def test_a_change_that_does_not_apply_is_bad_input(tmp_path: Path, change: str, code: int) -> None:
    done = review(layout(tmp_path, change))
    assert done.returncode == code
    assert "matches no file of the lab" in done.stderr
