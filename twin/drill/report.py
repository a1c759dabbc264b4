"""A drill's report: the fault x validator matrix ranked worst first, with each fault's worst
loss window and collective slowdown, as Markdown, JSON, JUnit (one case per fault and
failing validator) and a heat map (`heatmap.png`), written through `twin.safeio`.

Each fault is judged against the baseline (the scenario played without a fault): it fails
where it makes things worse: a validator's scope failing that passes without the fault
(for the collective's speed, `collective_efficiency`, only with the collective slower than
the baseline's by more than `TOLERANCE`), a scope the baseline fails too with the collective
that much slower, or its case ending in an error. What the baseline itself fails is the fabric's
or the scenario's, said once at the top, not blamed on every fault."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from twin import safeio
from twin.drill.cases import Outcome
from twin.outputs.plots import pyplot

TOLERANCE = 0.10
"""A collective's speed, or a validator's scope that the baseline fails too, is the fault's
only when the fault makes the collective slower than the baseline by more than this share
(its iteration mean over the baseline's): faults that cost the collective little (1.00-1.06x
on a fabric of 16 servers whose baseline is at or over `collective_efficiency`'s bound) are
not blamed for where the baseline stands."""
LEVEL = {"pass": 0, "info": 0, "—": 0, "not-observable": 1, "fail": 2}
"""Heat map shade of a status: fails no worse than the baseline's are 2, worse ones 3."""
COLOURS = ["#1a9850", "#fee08b", "#bdbdbd", "#d73027"]
"""Heat map: pass, not observable, fails but no worse than the baseline, worse."""
AS_BASELINE = "fail (not worse)"
"""A cell that fails, but no worse than the baseline beyond the tolerance."""
SPEED = {"collective_efficiency"}
"""Validators of a collective's speed: a fault fails them only when it makes the collective
slower than the baseline's beyond the tolerance, whatever their own bound says (a baseline
at 3.9x its bound passes, a fault that costs 1.03x then fails it)."""


@dataclass(frozen=True)
class Drill:
    """A finished drill: the baseline (no fault) and the cases' outcomes."""

    title: str
    baseline: Outcome
    outcomes: list[Outcome]

    @property
    def validators(self) -> list[str]:
        seen: dict[str, None] = {}
        for o in [self.baseline, *self.outcomes]:
            seen.update((v, None) for v, _, _, _ in o.results)
        return list(seen)

    def slowdown(self, o: Outcome) -> float | None:
        """The case's collective iteration mean over the baseline's (None when an iteration
        of the case never finished: the mean of the others says nothing of it)."""
        if o.iteration_mean_ms is None or not self.baseline.iteration_mean_ms or o.unfinished:
            return None
        return round(o.iteration_mean_ms / self.baseline.iteration_mean_ms, 3)

    def worse(self, o: Outcome) -> dict[str, list[str]]:
        """Validator -> how the case is worse than the baseline: its failing scopes that the
        baseline passes, but a collective's speed (`SPEED`) only when the case's collective
        is slower than the baseline's beyond the tolerance; those the baseline fails too
        likewise; its error (`drill`)."""
        inherited = {(v, s) for v, s, status, _ in self.baseline.results if status == "fail"}
        factor = self.slowdown(o)
        slower = factor is not None and factor > 1 + TOLERANCE
        out: dict[str, list[str]] = {}
        for validator, scope, status, reason in o.results:
            if status != "fail":
                continue
            timed = validator in SPEED and factor is not None
            if (validator, scope) not in inherited and not timed:
                out.setdefault(validator, []).append(f"{scope}: {reason}")
            elif slower:
                out.setdefault(validator, []).append(
                    f"{scope}: {reason} (the collective {factor:g}x slower than without the "
                    f"fault: over the tolerance of {1 + TOLERANCE:g}x)"
                )
        if o.error:
            out.setdefault("drill", []).append(o.error)
        return out

    def cell(self, o: Outcome, validator: str) -> str:
        """A validator's worst status in a case, a fail not worse than the baseline's told
        apart."""
        status = o.status(validator)
        if status == "fail" and validator not in self.worse(o):
            return AS_BASELINE
        return status

    def ranked(self) -> list[Outcome]:
        """Worst first: most validators worse than the baseline, then slowest collective,
        then longest loss."""
        return sorted(
            self.outcomes,
            key=lambda o: (
                -len(self.worse(o)),
                -(self.slowdown(o) or 0.0),
                -(o.loss_window_ms or 0.0),
                o.label,
            ),
        )

    @property
    def failed(self) -> list[Outcome]:
        """The faults that make things worse than the baseline."""
        return [o for o in self.outcomes if self.worse(o)]

    @property
    def exit_code(self) -> int:
        """1 when a fault makes things worse than the baseline, or the baseline fails; else 0."""
        return 1 if self.failed or self.baseline.failing else 0

    def _baseline_line(self) -> list[str]:
        if not self.baseline.failing:
            return []
        why = "; ".join(f"{v}: {'; '.join(r)}" for v, r in self.baseline.failing.items())
        return [
            f"**The baseline (no fault) fails**: {why[:600]}. That is the fabric's or the "
            "scenario's, not the faults': each fault is judged against the baseline and fails "
            "only where it is worse (a scope the baseline passes fails, the collective's speed "
            f"or a scope the baseline fails with the collective over {1 + TOLERANCE:g}x "
            "slower).",
            "",
        ]

    def markdown(self, shown: int = 100) -> str:
        names = self.validators
        out = [
            f"# {self.title}",
            "",
            *self._baseline_line(),
            f"{len(self.outcomes)} faults, {len(self.failed)} worse than the baseline; baseline "
            f"(no fault): iteration mean {_num(self.baseline.iteration_mean_ms)} ms"
            + ("." if self.baseline.failing else ", passes."),
            "",
            "| fault | verdict | worst loss window (ms) | collective slowdown | "
            + " | ".join(names)
            + " |",
            "|---|---|---|---|" + "---|" * len(names),
        ]
        for o in self.ranked()[:shown]:
            cells = [self.cell(o, v) for v in names]
            verdict = "fail" if self.worse(o) else "pass"
            out.append(
                f"| {o.label} | {verdict} | {_num(o.loss_window_ms)} | "
                f"{_num(self.slowdown(o), 'x')} | " + " | ".join(cells) + " |"
            )
        if len(self.outcomes) > shown:
            out.append(f"\n… and {len(self.outcomes) - shown} more (drill.json)")
        failing = [(o, v, why) for o in self.ranked() for v, why in self.worse(o).items()]
        if failing:
            out += ["", "## Failures", ""]
            out += [f"- **{o.label}** {v}: {'; '.join(why)[:400]}" for o, v, why in failing]
        return "\n".join(out) + "\n"

    def junit(self) -> str:
        """One test case per fault and validator it makes worse than the baseline (and one
        per validator the baseline fails), nothing else."""
        cases = [(o, v, why) for o in self.ranked() for v, why in self.worse(o).items()]
        cases = [(self.baseline, v, why) for v, why in self.baseline.failing.items()] + cases
        suite = ET.Element(
            "testsuite", name=self.title, tests=str(len(cases)), failures=str(len(cases))
        )
        for o, validator, why in cases:
            case = ET.SubElement(suite, "testcase", classname=validator, name=o.label)
            ET.SubElement(case, "failure", message=why[0][:500]).text = "\n".join(why)
        root = ET.Element("testsuites")
        root.append(suite)
        ET.indent(root)
        return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"

    def to_json(self) -> dict[str, Any]:
        def one(o: Outcome) -> dict[str, Any]:
            return {
                **asdict(o),
                "slowdown": self.slowdown(o),
                "worse": self.worse(o),
                "verdict": "fail" if self.worse(o) else "pass",
            }

        return {
            "title": self.title,
            "exit_code": self.exit_code,
            "tolerance": TOLERANCE,
            "validators": self.validators,
            "baseline": {
                **asdict(self.baseline),
                "failing": self.baseline.failing,
                "verdict": "fail" if self.baseline.failing else "pass",
            },
            "faults": [one(o) for o in self.ranked()],
        }

    def heatmap(self, path: Path, shown: int = 60) -> None:
        """Faults (worst first, the first `shown`) x validators, shaded by their status
        compared with the baseline's, and each fault's slowdown and loss window beside."""
        from matplotlib.colors import ListedColormap

        plt = pyplot()
        rows = self.ranked()[:shown]
        names = self.validators
        grid = [[self._level(o, v) for v in names] for o in rows] or [[0] * len(names)]
        height = max(3.0, 0.22 * len(rows) + 1.5)
        fig, (left, right) = plt.subplots(
            1,
            2,
            figsize=(3 + 0.7 * len(names), height),
            width_ratios=[len(names) or 1, 2],
        )
        left.imshow(grid, cmap=ListedColormap(COLOURS), vmin=0, vmax=3, aspect="auto")
        left.set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize=7)
        left.set_yticks(range(len(rows)), [o.label for o in rows], fontsize=6)
        left.set_title(
            "green pass, yellow not observable, grey fails but no worse than the baseline, "
            "red worse than the baseline",
            fontsize=7,
        )
        slow = [[self.slowdown(o) or 1.0, (o.loss_window_ms or 0.0)] for o in rows] or [[1, 0]]
        factors = [s[0] for s in slow]
        low = min(1.0, *factors)
        right.imshow(
            [[f] for f in factors],
            cmap="Oranges",
            aspect="auto",
            vmin=low,
            vmax=max(low + 0.01, *factors),
        )
        for i, (factor, loss) in enumerate(slow):
            right.text(0, i, f"{factor:.2f}x  {loss:.2f} ms", ha="center", va="center", fontsize=6)
        right.set_xticks([0], ["slowdown, loss window"], fontsize=7)
        right.set_yticks([])
        fig.suptitle(self.title, fontsize=9)
        fig.tight_layout()
        with safeio.create(path) as file:
            fig.savefig(file, format="png", dpi=110, bbox_inches="tight")
        plt.close(fig)

    def _level(self, o: Outcome, validator: str) -> int:
        if validator in self.worse(o):
            return 3
        return LEVEL.get(o.status(validator), 0)

    def write(self, out: Path) -> None:
        """drill.md, drill.json, junit.xml and heatmap.png into `out` (`twin.safeio`)."""
        safeio.write(out / "drill.md", self.markdown() + "\n![heat map](heatmap.png)\n")
        safeio.write(out / "drill.json", json.dumps(self.to_json(), indent=1) + "\n")
        safeio.write(out / "junit.xml", self.junit())
        self.heatmap(out / "heatmap.png")


def _num(value: float | None, unit: str = "") -> str:
    return "—" if value is None else f"{value:g}{unit}"


def summary(drill: Drill, shown: int = 10) -> str:
    """What the terminal shows: the matrix's worst faults (the reasons are in drill.md)."""
    return drill.markdown(shown).split("\n## Failures")[0].rstrip()
