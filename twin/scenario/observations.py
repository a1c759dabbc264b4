"""Observations: what a scenario run recorded, backend-neutral, saved with the run.

    RUN/scenario.yaml     the scenario with its defaults
    RUN/run.json          lab, backend, capabilities, start/end, phases (with flows), faults
    RUN/counters.json     interface counters sampled over time: {"interval", "fields",
                          "samples": [{"t", "c": {"node:ifname": [rx_bytes, rx_packets,
                          rx_dropped, tx_bytes, tx_packets, tx_dropped]}}]}
    RUN/flows.json        per flow: phase, src, dst, qp, DSCP sent, pps, sent and received
                          packets, loss, reordering, latency, DSCP and ECN as received
    RUN/events.jsonl      faults and state changes seen during the run (BGP, routes)
    RUN/fib/LABEL.json    each switch's kernel FIB (`ip -j route`) at start, faults, end
    RUN/bgp.json          BGP sessions at the start and at the end
    RUN/probes.json       every server pair pinged small and jumbo with DF (when reachability
                          or mtu is validated): reachable, jumbo_ok, frag_from, mtu

A report can be rebuilt from these files alone, and two runs compared.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from twin.errors import LabError


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
    def bgp(self) -> dict[str, list[dict[str, Any]]]:
        """BGP sessions at `start` and `end`."""
        data: dict[str, list[dict[str, Any]]] = self._json("bgp.json")
        return data

    @cached_property
    def probes(self) -> list[dict[str, Any]] | None:
        """Pairwise probe results, or None when the run did not probe."""
        path = self.path / "probes.json"
        data: list[dict[str, Any]] | None = json.loads(path.read_text()) if path.exists() else None
        return data

    def fib(self, label: str) -> dict[str, list[dict[str, Any]]]:
        """Each switch's `ip -j route` at a snapshot (`start`, `end`, `fault1-link-down`...)."""
        data: dict[str, list[dict[str, Any]]] = self._json(f"fib/{label}.json")
        return data

    def fib_labels(self) -> list[str]:
        """Snapshot labels in time order."""
        return [label for label, _ in sorted(self.run.get("fibs", {}).items(), key=lambda i: i[1])]

    def series(self, key: str, field: str) -> list[tuple[float, int]]:
        """(time, counter) samples of one `node:ifname` counter field."""
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
