"""Failure drills (`twin drill LAB [SCENARIO] --faults SET`): the scenario played once per
fault of a fault set, that fault injected, and a report ranking the faults worst first
(docs/drills.md).

Fault sets:

    links            every link, one at a time (link-down)
    links:KIND       every link of a kind: fabric (leaf-spine), server, peerlink, ...
    server-links     every server link (links:server)
    switches         every switch, one at a time (node-down)
    random:K[xN]     N draws (default 10) of K links failed at once, from `--seed`
    FILE.yaml        a list of {name: ..., faults: [FAULT, ...]} (scenario faults without
                     `at`, selectors allowed: `uplink of leaf1`)

Each drill case is independent: the scenario's own faults are replaced by the case's, all at
`at` seconds. On the simulator every case is a task of its own, spread over a Dask cluster
(`twin.drill.run`): a delta on the lab its worker built unfaulted once, judged in memory
(`twin.drill.worker`); on a live backend they run one after the other on one twin, restored
after each.
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from twin.errors import InputError
from twin.lab.directory import Lab
from twin.scenario.observations import Observations
from validators.result import Result, Status

DRAWS = 10
"""Draws of `random:K` without `xN` (fewer when the lab has fewer sets of K links)."""
ENUMERATED = 100_000
"""Sets of K links listed and sampled from up to this many; beyond, drawn and redrawn."""
MAX_CASES = 20_000


@dataclass(frozen=True)
class Case:
    """One drill case: a label and the faults injected together."""

    label: str
    faults: tuple[dict[str, Any], ...]

    def restores(self) -> list[dict[str, Any]]:
        """The faults that give back what this case took (link-up, node-up)."""
        return [{**f, "fault": RESTORES[f["fault"]]} for f in self.faults if f["fault"] in RESTORES]


def _links(lab: Lab, kinds: set[str] | None) -> list[Case]:
    cases = []
    for _, _, e in lab.graph.edges(data=True):
        if kinds is None or e["kind"] in kinds:
            label = f"link {e['a']}:{e['a_port']} - {e['b']}:{e['b_port']}"
            cases.append(Case(label, ({"fault": "link-down", "link": f"{e['a']}:{e['a_port']}"},)))
    return cases


def fault_sets(lab: Lab, spec: str, seed: int = 0) -> list[Case]:
    """The drill cases a `--faults` value names."""
    kinds = sorted({e["kind"] for _, _, e in lab.graph.edges(data=True)})
    if spec == "links":
        cases = _links(lab, None)
    elif spec == "server-links":
        cases = _links(lab, {"server"})
    elif spec.startswith("links:"):
        kind = spec.partition(":")[2]
        if kind not in kinds:
            raise InputError(
                "--faults", spec, f"no link kind {kind!r} (lab has {', '.join(kinds)})"
            )
        cases = _links(lab, {kind})
    elif spec == "switches":
        cases = [Case(f"switch {s}", ({"fault": "node-down", "node": s},)) for s in lab.switches()]
    elif spec.startswith("random:"):
        cases = _random(lab, spec, seed)
    elif spec.endswith((".yaml", ".yml")):
        cases = _from_file(Path(spec))
    else:
        raise InputError(
            "--faults",
            spec,
            "one of links, links:KIND, server-links, switches, random:K[xN], FILE.yaml",
        )
    if not cases:
        raise InputError("--faults", spec, f"names no fault in lab {lab.name}")
    if len(cases) > MAX_CASES:
        raise InputError("--faults", spec, f"{len(cases)} cases: at most {MAX_CASES}")
    return cases


def _random(lab: Lab, spec: str, seed: int) -> list[Case]:
    """N draws of K links failed together, no two draws the same set of links."""
    k_text, _, n_text = spec.partition(":")[2].partition("x")
    try:
        k, asked = int(k_text), int(n_text) if n_text else None
    except ValueError:
        raise InputError("--faults", spec, "write random:K or random:KxN (whole numbers)") from None
    links = _links(lab, None)
    if not (1 <= k <= len(links) and 1 <= (asked or 1) <= MAX_CASES):
        raise InputError("--faults", spec, f"K from 1 to {len(links)} links, N from 1")
    sets = math.comb(len(links), k)
    if asked is not None and asked > sets:
        raise InputError(
            "--faults", spec, f"{asked} draws, but {len(links)} links make {sets} sets of {k}"
        )
    n = min(DRAWS, sets) if asked is None else asked
    rng = random.Random(seed)
    if sets <= ENUMERATED:
        drawn = rng.sample(list(itertools.combinations(range(len(links)), k)), n)
    else:  # far more sets than draws: draw again on the rare repeat
        seen: dict[tuple[int, ...], None] = {}
        while len(seen) < n:
            seen.setdefault(tuple(sorted(rng.sample(range(len(links)), k))), None)
        drawn = list(seen)
    cases = []
    for i, chosen in enumerate(drawn):
        faults = tuple(f for c in chosen for f in links[c].faults)
        cases.append(Case(f"random {i + 1}: " + ", ".join(f["link"] for f in faults), faults))
    return cases


def _from_file(path: Path) -> list[Case]:
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, list):
        raise InputError(str(path), "", "must be a list of {name: ..., faults: [...]}")
    cases = []
    for i, entry in enumerate(data):
        faults = entry.get("faults") if isinstance(entry, dict) else None
        if not isinstance(faults, list) or not all(isinstance(f, dict) for f in faults):
            raise InputError(str(path), str(i), "needs faults: a list of faults")
        if any("at" in f for f in faults):
            raise InputError(str(path), f"{i}.faults", "no `at`: the drill sets it (--at)")
        cases.append(Case(str(entry.get("name") or f"case {i + 1}"), tuple(faults)))
    return cases


@dataclass(frozen=True)
class When:
    """When a case's faults fire (`at`, s) and when what they took is given back (`back`,
    s; None: held to the end)."""

    at: float
    back: float | None = None


def with_faults(scenario: dict[str, Any], case: Case, when: When) -> dict[str, Any]:
    """The scenario's data with its faults replaced by the case's, at `when.at`, and their
    restores (link-up, node-up) at `when.back`."""
    faults = [{**f, "at": when.at} for f in case.faults]
    if when.back is not None:
        faults += [{**f, "at": when.back} for f in case.restores()]
    return {**scenario, "faults": faults}


def default_at(scenario: dict[str, Any]) -> float:
    """A quarter into the first traffic phase: traffic flowing, most of it still to come."""
    phases = scenario.get("traffic") or [{}]
    first = phases[0] if isinstance(phases[0], dict) else {}
    return float(first.get("at", 0.0)) + float(first.get("duration", 10.0)) / 4


RESTORES = {"link-down": "link-up", "node-down": "node-up"}
"""A fault -> the fault that gives back what it took."""


def timing(scenario: dict[str, Any], at: float, live: bool) -> When:
    """When a case's faults fire and are given back: after the scenario's own recovery (the
    time from its first link-down or node-down to the link-up or node-up of the same link or
    node); on a live twin, whose protocols judged after the traffic must find the fabric
    whole, half-way from `at` to the end of the traffic when the scenario has none; on the
    simulator without one, never (the fault held to the end, its whole effect measured)."""
    faults = [f for f in scenario.get("faults") or [] if isinstance(f, dict)]
    for down in faults:
        for up in faults:
            if (
                RESTORES.get(str(down.get("fault"))) == up.get("fault")
                and (down.get("link"), down.get("node")) == (up.get("link"), up.get("node"))
                and float(up.get("at", 0)) > float(down.get("at", 0))
            ):
                return When(at, at + float(up["at"]) - float(down["at"]))
    if not live:
        return When(at)
    phases = [p for p in scenario.get("traffic") or [] if isinstance(p, dict)]
    end = max((float(p.get("at", 0)) + float(p.get("duration", 10)) for p in phases), default=at)
    return When(at, at + max(end - at, 0.0) / 2)


@dataclass
class Outcome:
    """What one drill case did, small enough to travel back from a worker."""

    label: str
    results: list[tuple[str, str, str, str]] = field(default_factory=list)
    loss_window_ms: float | None = None
    iteration_mean_ms: float | None = None
    error: str | None = None
    seconds: float = 0.0
    unfinished: int = 0
    """Iterations of the collectives that never finished (the mean is of the others)."""
    cpu: float = 0.0
    """CPU seconds the case took where it ran (0 when not measured)."""

    @property
    def failing(self) -> dict[str, list[str]]:
        """Validator -> the reasons of its failing scopes."""
        out: dict[str, list[str]] = {}
        for validator, scope, status, reason in self.results:
            if status == Status.FAIL.value:
                out.setdefault(validator, []).append(f"{scope}: {reason}")
        if self.error:
            out.setdefault("drill", []).append(self.error)
        return out

    def status(self, validator: str) -> str:
        """The worst status of a validator's scopes (fail > not-observable > pass)."""
        seen = {s for v, _, s, _ in self.results if v == validator}
        for status in (Status.FAIL, Status.NOT_OBSERVABLE, Status.PASS, Status.INFO):
            if status.value in seen:
                return status.value
        return "—"


def outcome(label: str, obs: Observations, results: Sequence[Result], seconds: float) -> Outcome:
    """A case's compact outcome from its observations and verdicts."""
    windows = [
        gap[1] / flow["pps"] * 1e3
        for flow in obs.flows
        if flow.get("pps")
        for gap in flow.get("gaps", [])
    ]
    windows += [
        float(r.figures["loss_window_ms"])
        for r in results
        if r.validator == "failover" and "loss_window_ms" in r.figures
    ]
    means = []
    unfinished = 0
    iterations = obs.extra("iterations")
    if isinstance(iterations, dict):
        for record in iterations.values():
            finished = [t for t in record.get("times_s", []) if t is not None]
            unfinished += len(record.get("times_s", [])) - len(finished)
            if finished:
                means.append(statistics.fmean(finished) * 1e3)
    means += [
        float(r.figures["mean_ms"])
        for r in results
        if r.validator == "collective_efficiency" and "mean_ms" in r.figures and not means
    ]
    return Outcome(
        label,
        [(r.validator, r.scope, r.status.value, r.reason) for r in results],
        round(max(windows), 3) if windows else None,
        round(max(means), 4) if means else None,
        seconds=round(seconds, 2),
        unfinished=unfinished,
    )
