"""Dynamic change review (`twin diff BASE CAND SCENARIO`): the same scenario played on both
labs, and what moved between the two runs: each dynamic verdict that changed, and the figures
a network engineer reads (docs/review.md).

Figures, from each run's observations and its validators' figures:

    iteration_mean, iteration_p99   collective iteration time per collective phase (ms)
    pause                           time a port's priority was paused (ms, per port)
    ecn_marks                       ECN marks the switches made (the run's total)
    lossless_drops                  packets of a lossless priority dropped (the run's total)
    loss_window                     worst loss window of each fault `failover` judged (ms)
    ecmp_max_over_mean              busiest uplink over the mean, per leaf (`ecmp_spread`)

A figure is a regression when the candidate's is worse than the base's by more than its
threshold: more than `KIND_pct` percent of the base's value *and* more than `KIND_min` in
absolute terms (both must be exceeded, so a 3 us change of a 5 us figure is not news); an
improvement when better by as much. `THRESHOLDS` holds the defaults; `twin diff --threshold
KEY=VALUE` sets one. Higher is worse for every figure.
"""

from __future__ import annotations

import json
import statistics
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from twin.errors import InputError
from twin.outputs import report
from validators.result import Finding, Result

KINDS = {
    "iteration_mean": ("collective iteration mean", "ms"),
    "iteration_p99": ("collective iteration p99", "ms"),
    "pause": ("pause time", "ms"),
    "ecn_marks": ("ECN marks", ""),
    "lossless_drops": ("lossless drops", ""),
    "loss_window": ("failover loss window", "ms"),
    "ecmp_max_over_mean": ("ECMP max/mean", ""),
}
"""Figure kind -> (label, unit)."""
COUNTED = {"pause", "ecn_marks", "lossless_drops"}
"""Kinds absent from a run where there was none (a port never paused): 0 there."""

THRESHOLDS: dict[str, float] = {
    "iteration_mean_pct": 10.0,
    "iteration_mean_min": 0.001,
    "iteration_p99_pct": 20.0,
    "iteration_p99_min": 0.001,
    "pause_pct": 20.0,
    "pause_min": 0.1,
    "ecn_marks_pct": 50.0,
    "ecn_marks_min": 100.0,
    "lossless_drops_pct": 0.0,
    "lossless_drops_min": 0.0,
    "loss_window_pct": 20.0,
    "loss_window_min": 10.0,
    "ecmp_max_over_mean_pct": 0.0,
    "ecmp_max_over_mean_min": 0.1,
}
"""Default regression thresholds: KIND_pct (percent of the base's value) and KIND_min
(absolute, in the figure's unit); a change must exceed both."""


def thresholds(given: Iterable[str]) -> dict[str, float]:
    """The defaults with `KEY=VALUE` overrides (`--threshold`); one line for a bad one."""
    out = dict(THRESHOLDS)
    for text in given:
        key, eq, value = text.partition("=")
        if not eq or key not in THRESHOLDS:
            raise InputError(
                "--threshold", text, f"write KEY=VALUE, KEY one of {', '.join(THRESHOLDS)}"
            )
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if not 0 <= number < 1e12:
            raise InputError("--threshold", key, f"must be a number, not {value!r}")
        out[key] = number
    return out


@dataclass(frozen=True)
class Moved:
    """One figure in both runs (None: absent from that run)."""

    kind: str
    scope: str
    base: float | None
    candidate: float | None
    verdict: str
    """'regression', 'improvement' or 'moved' (changed, within the thresholds)."""

    @property
    def label(self) -> str:
        name, unit = KINDS[self.kind]
        return f"{name} ({unit})" if unit else name

    def describe(self) -> str:
        """'collective iteration mean (ms) allreduce: 0.651 -> 0.444 (-31.8 %)'."""
        return (
            f"{self.label} {self.scope}: {_show(self.base)} -> {_show(self.candidate)}{_pct(self)}"
        )


def _show(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def _pct(m: Moved) -> str:
    if m.base and m.candidate is not None:
        return f" ({100 * (m.candidate - m.base) / m.base:+.1f} %)"
    return ""


def figures(run_dir: Path, results: Sequence[Result]) -> dict[tuple[str, str], float]:
    """(kind, scope) -> value of one run."""
    out: dict[tuple[str, str], float] = {}
    iterations = run_dir / "iterations.json"
    if iterations.is_file():
        for phase, record in json.loads(iterations.read_text()).items():
            times = [t * 1e3 for t in record.get("times_s", []) if t is not None]
            if times:
                out["iteration_mean", phase] = statistics.fmean(times)
                out["iteration_p99", phase] = _p99(times)
    pfc = run_dir / "pfc.json"
    if pfc.is_file():
        rows = json.loads(pfc.read_text())
        for row in rows:
            if row.get("paused_s"):
                key = ("pause", f"{row['port']} priority {row['priority']}")
                out[key] = out.get(key, 0.0) + row["paused_s"] * 1e3
        out["ecn_marks", "run"] = float(sum(r.get("ecn_marks", 0) for r in rows))
        out["lossless_drops", "run"] = float(sum(r["drops"]["lossless"] for r in rows))
    for r in results:
        f = r.figures
        if r.validator == "collective_efficiency" and "mean_ms" in f:
            phase = r.scope.split(" (")[0]
            out.setdefault(("iteration_mean", phase), float(f["mean_ms"]))
            out.setdefault(("iteration_p99", phase), float(f["p99_ms"]))
        elif r.validator == "failover" and "loss_window_ms" in f:
            out["loss_window", r.scope] = float(f["loss_window_ms"])
        elif r.validator == "ecmp_spread" and "max_over_mean" in f:
            out["ecmp_max_over_mean", r.scope] = float(f["max_over_mean"])
        elif r.validator == "pfc_behaviour" and "lossless_drops" in f:
            out.setdefault(("lossless_drops", "run"), float(f["lossless_drops"]))
    return out


def _p99(values: list[float]) -> float:
    """The 99th percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, -(-99 * len(ordered) // 100) - 1))]


def compare(
    base: dict[tuple[str, str], float],
    candidate: dict[tuple[str, str], float],
    limits: dict[str, float],
) -> list[Moved]:
    """Every figure that changed, judged against the thresholds; regressions first.

    >>> moved = compare({("pause", "p"): 5.0}, {("pause", "p"): 0.0}, THRESHOLDS)
    >>> moved[0].verdict, moved[0].describe()
    ('improvement', 'pause time (ms) p: 5 -> 0 (-100.0 %)')
    """
    found = []
    for key in sorted({*base, *candidate}):
        kind, scope = key
        zero = 0.0 if kind in COUNTED else None
        was, now = base.get(key, zero), candidate.get(key, zero)
        if was == now:
            continue
        verdict = "moved"
        if was is not None and now is not None:
            limit = max(limits[f"{kind}_min"], abs(was) * limits[f"{kind}_pct"] / 100)
            if abs(now - was) > limit:
                verdict = "regression" if now > was else "improvement"
        found.append(Moved(kind, scope, was, now, verdict))
    order = {"regression": 0, "improvement": 1, "moved": 2}
    return sorted(found, key=lambda m: order[m.verdict])


SHOWN = 40
"""Config differences listed in the Markdown (a pull request comment stays readable)."""


@dataclass(frozen=True)
class Review:
    """A change review: config differences (removed, renamed and added devices first) and
    static verdict changes, and with a scenario the dynamic ones and the figures that moved."""

    title: str
    configs: list[Finding]
    static: list[report.Change]
    dynamic: list[report.Change]
    moved: list[Moved]
    played: bool

    @property
    def cases(self) -> list[tuple[str, str]]:
        """(name, line) per regression: a verdict that now fails, a figure past its threshold.
        The name is what regressed and where (stable from run to run), the line also says
        how."""
        out = [
            (f"{side} {c.validator} {c.scope}", f"{side} {c.validator} {c.scope}: {_was(c)}")
            for side, changes in (("static", self.static), ("dynamic", self.dynamic))
            for c in changes
            if c.regression
        ]
        out += [
            (f"{m.label} {m.scope}", m.describe()) for m in self.moved if m.verdict == "regression"
        ]
        return out

    @property
    def regressions(self) -> list[str]:
        """One line per regression (`cases`' lines)."""
        return [line for _, line in self.cases]

    def config_list(self) -> str:
        """The config differences as a Markdown list (the first `SHOWN`)."""
        if not self.configs:
            return "no config changed"
        many = "s" if len(self.configs) > 1 else ""
        shown = [f"- {f}" for f in self.configs[:SHOWN]]
        if len(self.configs) > SHOWN:
            shown.append(f"- … and {len(self.configs) - SHOWN} more")
        return "\n".join([f"{len(self.configs)} config difference{many}:", *shown])

    @property
    def exit_code(self) -> int:
        return 1 if self.regressions else 0

    def markdown(self) -> str:
        """The summary, fit for a pull request comment."""
        mark = "**regression**" if self.regressions else "no regression"
        out = [f"## {self.title}", "", f"Verdict: {mark}."]
        if self.regressions:
            out += ["", *(f"- :x: {line}" for line in self.regressions)]
        out += ["", "### Configs", "", self.config_list(), "", "### Static verdicts", ""]
        out.append(report.change_table(self.static))
        if self.played:
            out += ["", "### Dynamic verdicts (the scenario on both)", ""]
            out.append(report.change_table(self.dynamic))
            out += ["", "### Figures that moved", "", self.figure_table()]
        return "\n".join(out) + "\n"

    def figure_table(self) -> str:
        if not self.moved:
            return "no figure moved"
        shown = [m for m in self.moved if m.verdict != "moved"] or self.moved
        rows = [
            "| figure | scope | base | candidate | change | verdict |",
            "|---|---|---|---|---|---|",
        ]
        rows += [
            f"| {m.label} | {m.scope} | {_show(m.base)} | {_show(m.candidate)} "
            f"| {_pct(m).strip(' ()') or '—'} | {m.verdict} |"
            for m in shown
        ]
        hidden = len(self.moved) - len(shown)
        if hidden:
            rows.append(f"\n{hidden} more moved within their thresholds (review.json)")
        return "\n".join(rows)

    def junit(self) -> str:
        """JUnit XML: one failing test case per regression, nothing else; a case is named by
        what regressed and where, its failure says how."""
        cases = self.cases
        suite = ET.Element(
            "testsuite", name=self.title, tests=str(len(cases)), failures=str(len(cases))
        )
        for name, line in cases:
            case = ET.SubElement(suite, "testcase", classname="twin.diff", name=name)
            ET.SubElement(case, "failure", message=line).text = line
        root = ET.Element("testsuites")
        root.append(suite)
        ET.indent(root)
        return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"

    def to_json(self) -> dict[str, Any]:
        def change(c: report.Change) -> dict[str, Any]:
            return {
                "validator": c.validator,
                "scope": c.scope,
                "base": c.before.value if c.before else None,
                "candidate": c.after.value if c.after else None,
                "regression": c.regression,
                "reason": c.reason,
            }

        return {
            "title": self.title,
            "exit_code": self.exit_code,
            "regressions": self.regressions,
            "configs": [asdict(f) for f in self.configs],
            "static": [change(c) for c in self.static],
            "dynamic": [change(c) for c in self.dynamic],
            "figures": [
                {
                    "kind": m.kind,
                    "scope": m.scope,
                    "base": m.base,
                    "candidate": m.candidate,
                    "verdict": m.verdict,
                }
                for m in self.moved
            ],
        }


def _was(c: report.Change) -> str:
    was = c.before.value if c.before else "absent"
    now = c.after.value if c.after else "absent"
    return f"{was} -> {now} ({c.reason})"
