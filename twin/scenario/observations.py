"""Observations: what a scenario run recorded, backend-neutral, saved with the run.

Every file of a run directory and its schema is in docs/observations.md. Nodes are design
names and ports SONiC names (`Ethernet8`, `PortChannel101`) whichever backend ran; a report
can be rebuilt from these files alone, and two runs compared.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from labs.backend import Session
from twin.errors import LabError
from twin.model.fib import Fib, from_json


@dataclass
class Observations:
    """A run directory, read lazily."""

    path: Path

    @classmethod
    def open(cls, path: Path) -> Observations:
        """Open a run directory or say what is missing."""
        if not (path / "run.json").is_file():
            raise LabError(f"{path}: not a run directory (run.json missing)")
        return cls(path)

    def _json(self, name: str) -> Any:
        return json.loads((self.path / name).read_text())

    @cached_property
    def run(self) -> dict[str, Any]:
        """Lab, backend, capabilities, times, phases and faults."""
        data: dict[str, Any] = self._json("run.json")
        return data

    @cached_property
    def counters(self) -> dict[str, Any]:
        """Counter samples over time."""
        data: dict[str, Any] = self._json("counters.json")
        return data

    @cached_property
    def flows(self) -> list[dict[str, Any]]:
        """Per-flow results."""
        data: list[dict[str, Any]] = self._json("flows.json")
        return data

    @cached_property
    def events(self) -> list[dict[str, Any]]:
        """Faults and state changes, in time order."""
        path = self.path / "events.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        return [json.loads(line) for line in lines if line.strip()]

    @cached_property
    def bgp(self) -> dict[str, list[Session]]:
        """BGP sessions at `start` and `end`."""
        data: dict[str, list[dict[str, Any]]] = self._json("bgp.json")
        return {when: [Session(**s) for s in sessions] for when, sessions in data.items()}

    @property
    def capabilities(self) -> set[str]:
        """What the backend that played the run can observe."""
        return set(self.run.get("capabilities", []))

    @cached_property
    def probes(self) -> list[dict[str, Any]] | None:
        """Pairwise probe results, or None when the run did not probe."""
        path = self.path / "probes.json"
        data: list[dict[str, Any]] | None = json.loads(path.read_text()) if path.exists() else None
        return data

    def extra(self, key: str) -> Any:
        """What only some backends observe (`KEY.json`: pfc, queues, iterations, sim), None
        when the run has no such file."""
        path = self.path / f"{key}.json"
        return json.loads(path.read_text()) if path.exists() else None

    @property
    def duration(self) -> float:
        """Seconds the run lasted."""
        return float(self.run["ended"]) - float(self.run["started"])

    def fib(self, label: str) -> Fib:
        """Every node's FIB at a snapshot (`start`, `end`, `fault1-link-down`...)."""
        return from_json(self._json(f"fib/{label}.json"))

    def fib_labels(self) -> list[str]:
        """Snapshot labels in time order."""
        return [label for label, _ in sorted(self.run.get("fibs", {}).items(), key=lambda i: i[1])]

    def series(self, key: str, field: str) -> list[tuple[float, int]]:
        """(time, counter) samples of one `node:port` counter field."""
        column = self.counters["fields"].index(field)
        return [(s["t"], s["c"][key][column]) for s in self.counters["samples"] if key in s["c"]]

    def delta(self, key: str, field: str, start: float, end: float) -> int:
        """How much a counter grew between two times (nearest samples inside the window)."""
        points = [(t, v) for t, v in self.series(key, field) if start <= t <= end]
        return points[-1][1] - points[0][1] if len(points) > 1 else 0

    def phase(self, label: str) -> dict[str, Any]:
        """A traffic phase by label."""
        for phase in self.run["phases"]:
            if phase["label"] == label:
                found: dict[str, Any] = phase
                return found
        raise LabError(f"{self.path}: no phase {label!r}")
