"""Reports of validator results: JSON for machines, JUnit XML for CI, Markdown for people.

`write(results, out)` writes `report.json`, `junit.xml` and `report.md` into `out` and
returns the exit code. One JUnit testcase per validator and scope: a failure is a
`<failure>`, not-observable a `<skipped>`; an informational result (config drift) passes,
its findings in `<system-out>`.

Exit code: 0 when no selected validator failed, 1 otherwise. A not-observable verdict does
not fail the run (the backend could not see it, the configs are not wrong), but it is never a
pass either: it is counted apart in the summary line, listed in every report, and skipped in
JUnit so CI shows it.

>>> from validators.result import Finding, Result, Status
>>> rs = [Result("headroom", "fabric", Status.PASS, "ok"),
...       Result("deadlock", "priority 3", Status.FAIL, "1 cycle", {}, [Finding("spine1", "x")]),
...       Result("ecmp_spread", "fabric", Status.NOT_OBSERVABLE, "no counters")]
>>> exit_code(rs), counts(rs)
(1, '1 passed, 1 failed, 1 not observable')
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from twin import safeio
from twin.version import stamp
from validators.result import Result, Status

FINDINGS_SHOWN = 50
"""Findings listed per result in the Markdown report (all are in the JSON)."""


def exit_code(results: Sequence[Result]) -> int:
    """0 unless some result failed."""
    return 1 if any(r.status is Status.FAIL for r in results) else 0


def counts(results: Sequence[Result]) -> str:
    """'N passed, N failed, N not observable' and, when there are any, ', N informational'."""
    n = Counter(r.status for r in results)
    info = f", {n[Status.INFO]} informational" if n[Status.INFO] else ""
    return (
        f"{n[Status.PASS]} passed, {n[Status.FAIL]} failed, "
        f"{n[Status.NOT_OBSERVABLE]} not observable{info}"
    )


def table(results: Sequence[Result]) -> str:
    """The summary as a Markdown table: validator, scope, status, reason.

    >>> print(table([Result("mtu_consistency", "fabric", Status.PASS, "ok")]))
    | validator | scope | status | reason |
    |---|---|---|---|
    | mtu_consistency | fabric | pass | ok |
    """
    rows = ["| validator | scope | status | reason |", "|---|---|---|---|"]
    rows += [
        f"| {r.validator} | {r.scope} | {r.status.value} | {_cell(r.reason)} |" for r in results
    ]
    return "\n".join(rows)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(results: Sequence[Result], title: str) -> str:
    """The Markdown report: counts, summary table, then figures and findings per result."""
    out = [f"# {title}", "", counts(results), "", table(results)]
    for r in results:
        if not r.findings and not r.figures:
            continue
        out += ["", f"## {r.validator} — {r.scope}: {r.status.value}", "", r.reason]
        if r.figures:
            out += ["", ", ".join(f"{k} {v}" for k, v in r.figures.items())]
        if r.findings:
            out.append("")
            out += [f"- {f}" for f in r.findings[:FINDINGS_SHOWN]]
            if len(r.findings) > FINDINGS_SHOWN:
                out.append(f"- … and {len(r.findings) - FINDINGS_SHOWN} more (see report.json)")
    return "\n".join(out) + "\n"


def junit(results: Sequence[Result], title: str) -> str:
    """JUnit XML: one testcase per validator and scope."""
    n = Counter(r.status for r in results)
    suite = ET.Element(
        "testsuite",
        name=title,
        tests=str(len(results)),
        failures=str(n[Status.FAIL]),
        skipped=str(n[Status.NOT_OBSERVABLE]),
        errors="0",
    )
    for r in results:
        case = ET.SubElement(suite, "testcase", classname=r.validator, name=r.scope)
        if r.status is Status.FAIL:
            failure = ET.SubElement(case, "failure", message=r.reason)
            failure.text = "\n".join(str(f) for f in r.findings)
        elif r.status is Status.NOT_OBSERVABLE:
            ET.SubElement(case, "skipped", message=r.reason)
        listed = [str(f) for f in r.findings] if r.status is Status.INFO else []
        if r.figures or listed:
            ET.SubElement(case, "system-out").text = "\n".join([json.dumps(r.figures), *listed])
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write(
    results: Sequence[Result], out: Path, title: str, backend: str | None = None
) -> dict[str, Any]:
    """Write report.json, junit.xml and report.md into `out`; return what report.json holds
    (its `exit_code` the verb's). report.json is stamped with the twin's version and the
    backend (`twin.version.stamp`)."""
    safeio.mkdir(out)
    data = {
        "title": title,
        "stamp": stamp(backend),
        "exit_code": exit_code(results),
        "results": [r.to_json() for r in results],
    }
    safeio.write(out / "report.json", json.dumps(data, indent=2) + "\n")
    safeio.write(out / "junit.xml", junit(results, title))
    safeio.write(out / "report.md", markdown(results, title))
    return data


@dataclass(frozen=True)
class Change:
    """A verdict that differs between two runs (None: no such validator and scope)."""

    validator: str
    scope: str
    before: Status | None
    after: Status | None
    reason: str

    @property
    def regression(self) -> bool:
        """The candidate fails what the base did not."""
        return self.after is Status.FAIL and self.before is not Status.FAIL


def changes(base: Sequence[Result], candidate: Sequence[Result]) -> list[Change]:
    """Every (validator, scope) whose verdict differs, with the candidate's reason.

    >>> base = [Result("a", "s", Status.PASS, "fine")]
    >>> [c.regression for c in changes(base, [Result("a", "s", Status.FAIL, "no")])]
    [True]
    """
    before = {(r.validator, r.scope): r for r in base}
    after = {(r.validator, r.scope): r for r in candidate}
    found = []
    for key in [*after, *(k for k in before if k not in after)]:
        old, new = before.get(key), after.get(key)
        shown = new or old
        assert shown is not None
        was, now = (old.status if old else None), (new.status if new else None)
        if was is not now:
            found.append(Change(*key, was, now, shown.reason))
    return found


def change_table(found: Sequence[Change]) -> str:
    """Changed verdicts as a Markdown table (regressions marked)."""
    if not found:
        return "no verdict changed"
    rows = ["| validator | scope | base | candidate | reason |", "|---|---|---|---|---|"]
    for c in found:
        was = c.before.value if c.before else "—"
        now = c.after.value if c.after else "—"
        mark = " **(regression)**" if c.regression else ""
        rows.append(f"| {c.validator} | {c.scope} | {was} | {now}{mark} | {_cell(c.reason)} |")
    return "\n".join(rows)
