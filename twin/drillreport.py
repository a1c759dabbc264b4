"""A drill's report: the fault x validator matrix ranked worst first, with each fault's worst
loss window and collective slowdown, as Markdown, JSON, JUnit (one case per fault and
failing validator) and a heat map (`heatmap.png`)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from twin.drill import Outcome
from twin.verdict.plots import pyplot

LEVEL = {"pass": 0, "info": 0, "—": 0, "not-observable": 1, "fail": 2}
"""Heat map shade of a status."""


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
        """The case's collective iteration mean over the baseline's."""
        if o.iteration_mean_ms is None or not self.baseline.iteration_mean_ms:
            return None
        return round(o.iteration_mean_ms / self.baseline.iteration_mean_ms, 3)

    def ranked(self) -> list[Outcome]:
        """Worst first: most failing validators, then slowest collective, then longest loss."""
        return sorted(
            self.outcomes,
            key=lambda o: (
                -len(o.failing),
                -(self.slowdown(o) or 0.0),
                -(o.loss_window_ms or 0.0),
                o.label,
            ),
        )

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.failing]

    @property
    def exit_code(self) -> int:
        """1 when a fault fails a validator (or the baseline does), else 0."""
        return 1 if self.failed or self.baseline.failing else 0

    def markdown(self, shown: int = 100) -> str:
        names = self.validators
        out = [
            f"# {self.title}",
            "",
            f"{len(self.outcomes)} faults, {len(self.failed)} failing a validator; baseline "
            f"(no fault): iteration mean {_num(self.baseline.iteration_mean_ms)} ms, "
            f"{_fails(self.baseline)}.",
            "",
            "| fault | verdict | worst loss window (ms) | collective slowdown | "
            + " | ".join(names)
            + " |",
            "|---|---|---|---|" + "---|" * len(names),
        ]
        for o in self.ranked()[:shown]:
            cells = [o.status(v) for v in names]
            verdict = "fail" if o.failing else "pass"
            out.append(
                f"| {o.label} | {verdict} | {_num(o.loss_window_ms)} | "
                f"{_num(self.slowdown(o), 'x')} | " + " | ".join(cells) + " |"
            )
        if len(self.outcomes) > shown:
            out.append(f"\n… and {len(self.outcomes) - shown} more (drill.json)")
        failing = [(o, v, why) for o in self.ranked() for v, why in o.failing.items()]
        if failing:
            out += ["", "## Failures", ""]
            out += [f"- **{o.label}** {v}: {'; '.join(why)[:400]}" for o, v, why in failing]
        return "\n".join(out) + "\n"

    def junit(self) -> str:
        """One test case per fault and failing validator, nothing else."""
        cases = [(o, v, why) for o in self.ranked() for v, why in o.failing.items()]
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
                "verdict": "fail" if o.failing else "pass",
            }

        return {
            "title": self.title,
            "exit_code": self.exit_code,
            "validators": self.validators,
            "baseline": one(self.baseline),
            "faults": [one(o) for o in self.ranked()],
        }

    def heatmap(self, path: Path, shown: int = 60) -> None:
        """Faults (worst first, the first `shown`) x validators, shaded by status, and each
        fault's slowdown and loss window beside."""
        plt = pyplot()
        rows = self.ranked()[:shown]
        names = self.validators
        grid = [[LEVEL.get(o.status(v), 0) for v in names] for o in rows] or [[0] * len(names)]
        height = max(3.0, 0.22 * len(rows) + 1.5)
        fig, (left, right) = plt.subplots(
            1,
            2,
            figsize=(3 + 0.7 * len(names), height),
            width_ratios=[len(names) or 1, 2],
        )
        left.imshow(grid, cmap="RdYlGn_r", vmin=0, vmax=2, aspect="auto")
        left.set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize=7)
        left.set_yticks(range(len(rows)), [o.label for o in rows], fontsize=6)
        left.set_title("green pass, yellow not observable, red fail", fontsize=8)
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
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)

    def write(self, out: Path) -> None:
        """drill.md, drill.json, junit.xml and heatmap.png into `out`."""
        (out / "drill.md").write_text(self.markdown() + "\n![heat map](heatmap.png)\n")
        (out / "drill.json").write_text(json.dumps(self.to_json(), indent=1) + "\n")
        (out / "junit.xml").write_text(self.junit())
        self.heatmap(out / "heatmap.png")


def _fails(o: Outcome) -> str:
    return f"fails {', '.join(o.failing)}" if o.failing else "passes"


def _num(value: float | None, unit: str = "") -> str:
    return "—" if value is None else f"{value:g}{unit}"


def summary(drill: Drill, shown: int = 10) -> str:
    """What the terminal shows: the matrix's worst faults (the reasons are in drill.md)."""
    return drill.markdown(shown).split("\n## Failures")[0].rstrip()
