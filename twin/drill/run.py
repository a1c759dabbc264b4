"""Running a drill's cases: on the simulator as independent tasks of a Dask cluster, TLS only
(`twin.drill.cluster`: worker processes made for the drill, or the scheduler given), each
outcome kept as it ends; on a live backend one after the other on one twin, restored and
checked after each.

A simulator task gets the lab directory's files and the scenario as data; the worker rebuilds
the lab in its own directory and builds it unfaulted once (`twin.drill.worker.Unfaulted`, kept
by content), plays each case as a delta on it, judged in memory, and returns the case's
compact `Outcome` as a dict (and its run directory's files when asked): workers share no
disk with the client.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from labs.backend import Progress, Status, quiet
from labs.lifecycle import Managed
from twin import safeio
from twin.drill.cases import RESTORES, Case, Outcome, When, outcome, with_faults
from twin.drill.worker import Unfaulted
from twin.errors import LabError, TwinError
from twin.lab.directory import RACY_NS, Lab
from twin.scenario import model as scenarios
from twin.scenario import observations, plan, player
from twin.scenario.observations import Observations
from twin.verdict import verdict

if TYPE_CHECKING:
    from distributed.security import Security

BASELINE = Case("no fault", ())
"""Played first: what the collective takes without a fault (the slowdowns' reference)."""
SKIPPED = ("runs", "logs", "validate", "drills", "state.json", "events.jsonl")
"""Parts of a lab directory a task does not need."""
RESTORE_TIMEOUT = 120.0
"""Seconds a live twin has to come back as it was after a case (links, nodes, sessions)."""


def run_case(
    lab: Lab, scenario: dict[str, Any], case: Case, when: When, backend: Managed
) -> tuple[Outcome, list[scenarios.Fault]]:
    """Play one case on the lab's running twin and judge it; the outcome and the faults it
    injected (selectors resolved)."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="twin-drill-") as tmp:
        path = Path(tmp) / "scenario.yaml"
        path.write_text(yaml.safe_dump(with_faults(scenario, case, when), sort_keys=False))
        loaded = scenarios.load(path, lab)
        obs = Observations.open(player.play(lab, loaded, backend, out=Path(tmp) / "run"))
        results = verdict.evaluate(lab, obs, loaded.validate_)
        done = outcome(case.label, obs, results, time.monotonic() - start)
    return done, loaded.faults


def lab_files(lab: Lab) -> dict[str, bytes]:
    """The lab directory as data: relative path -> content (no runs, no twin state)."""
    files = {}
    for path in sorted(lab.path.rglob("*")):
        relative = path.relative_to(lab.path)
        if path.is_file() and not path.is_symlink() and relative.parts[0] not in SKIPPED:
            files[relative.as_posix()] = path.read_bytes()
    return files


_LABS: dict[str, Path] = {}
"""In a worker: content digest -> the lab rebuilt from it."""


def _materialise(files: dict[str, bytes], key: str) -> Path:
    """The lab directory rebuilt from its files in this worker's own directory, once. Its
    files are dated before `RACY_NS` ago: written once and never again, what is read from
    them is kept (`twin.lab.directory.version`) from the first case on."""
    if key not in _LABS:
        try:
            from distributed import get_worker

            home = Path(get_worker().local_directory)
        except (ImportError, ValueError):
            home = Path(tempfile.gettempdir())
        root = Path(tempfile.mkdtemp(prefix="twin-drill-lab-", dir=home)) / "lab"
        written = time.time_ns() - 2 * RACY_NS
        for name, content in files.items():
            target = root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
            os.utime(target, ns=(written, written))
        _LABS[key] = root
    return _LABS[key]


_UNFAULTED: dict[str, Unfaulted] = {}
"""In a worker: the digest of a lab's files and a scenario -> that lab built unfaulted (the
last drill's only)."""


def _unfaulted(files: dict[str, bytes], scenario: dict[str, Any]) -> Unfaulted:
    lab = _digest(files)
    key = hashlib.sha256(lab.encode() + json.dumps(scenario, sort_keys=True).encode()).hexdigest()
    if key not in _UNFAULTED:
        _UNFAULTED.clear()
        _UNFAULTED[key] = Unfaulted.build(Lab.open(_materialise(files, lab)), scenario)
    return _UNFAULTED[key]


_DIGESTED: list[tuple[dict[str, bytes], str]] = []
"""In a worker: the last lab's files (the object every task of a drill is given: Dask's
scattered data) and their digest."""


def _digest(files: dict[str, bytes]) -> str:
    """The digest of a lab's files (name and content), once per object."""
    if not (_DIGESTED and _DIGESTED[0][0] is files):
        digest = hashlib.sha256()
        for name, content in sorted(files.items()):
            digest.update(name.encode() + b"\0" + hashlib.sha256(content).digest())
        _DIGESTED[:] = [(files, digest.hexdigest())]
    return _DIGESTED[0][1]


def sim_task(
    files: dict[str, bytes],
    scenario: dict[str, Any],
    label: str,
    faults: list[Any],
    when: When,
    keep: bool = False,
) -> dict[str, Any]:
    """One case on the simulator, in whatever process runs it: the outcome as a dict, and
    with `keep` its run directory's files (`run`: name -> content)."""
    content: dict[str, str | bytes] = {}
    try:
        done, content = _unfaulted(files, scenario).play(Case(label, tuple(faults)), when)
    except TwinError as exc:
        done = Outcome(label, error=str(exc))
    except Exception as exc:  # one broken case must not lose the drill's other results
        done = Outcome(label, error=f"internal error: {type(exc).__name__}: {exc}")
    return {"outcome": asdict(done), "run": content if keep else None}


def on_dask(
    lab: Lab,
    scenario: dict[str, Any],
    cases: Sequence[Case],
    when: When,
    workers: int = 2,
    scheduler: tuple[str, Security] | None = None,
    progress: Progress = quiet,
    record: Path | None = None,
    runs: Path | None = None,
) -> list[Outcome]:
    """Every case (the baseline first) as a task of a Dask cluster, TLS only
    (`twin.drill.cluster`: a LocalCluster of `workers` processes made for the drill, or the
    scheduler given with its security); outcomes in case order.

    Each outcome is fetched as soon as its case ends (and appended to `record`, a JSON line
    each; with `runs`, its run directory written to `runs/CASE`): a worker that dies takes
    nothing finished with it. A case whose task dies with its worker
    (`distributed.scheduler.allowed-failures` times), or is cancelled when every worker is
    gone (and the lab's scattered data with them), is an error row."""
    from twin.drill import cluster as drillcluster

    kept = Kept(lab.path, record, runs, progress, len(cases) + 1)
    everything = [BASELINE, *cases]
    if scheduler is not None:
        return _gather(lab, scenario, everything, when, scheduler, kept)
    with drillcluster.local(workers) as (cluster, credentials):
        where = (cluster.scheduler_address, credentials.security())
        return _gather(lab, scenario, everything, when, where, kept)


def _gather(
    lab: Lab,
    scenario: dict[str, Any],
    everything: Sequence[Case],
    when: When,
    scheduler: tuple[str, Security],
    kept: Kept,
) -> list[Outcome]:
    from distributed import Client, as_completed

    address, security = scheduler
    keep = kept.runs is not None
    with Client(address, security=security, timeout=30) as client:
        (data,) = client.scatter([lab_files(lab)], broadcast=True)
        futures = {
            client.submit(
                sim_task, data, scenario, c.label, list(c.faults), when, keep, pure=False
            ): i
            for i, c in enumerate(everything)
        }
        for future, result in as_completed(futures, with_results=True, raise_errors=False):
            i = futures.pop(future)
            if future.status == "finished":
                done, run = Outcome(**_tuples(result["outcome"])), result["run"]
            else:  # its worker died (or every worker, and the lab's data with them)
                done, run = (
                    Outcome(everything[i].label, error=f"lost with its worker: {result!r}"),
                    None,
                )
            future.release()  # a worker dying now takes nothing finished with it
            kept.add(i, done, run)
    return [kept.outcomes[i] for i in range(len(everything))]


@dataclass
class Kept:
    """The cases finished so far: kept, appended to `record` (a JSON line each), their run
    directories written under `runs` when given (`runs/CASE`, pointing at the drill's
    `lab`: `twin report` takes them), counted out of `total`."""

    lab: Path
    record: Path | None
    runs: Path | None
    progress: Progress
    total: int
    outcomes: dict[int, Outcome] = field(default_factory=dict)

    def add(self, i: int, done: Outcome, run: dict[str, str | bytes] | None) -> None:
        self.outcomes[i] = done
        if self.runs is not None and run:
            observations.write(self.runs / f"{i:04d}", run, self.lab)
        if self.record is not None:
            safeio.append(self.record, json.dumps({"case": i, **asdict(done)}) + "\n")
        self.progress(f"{len(self.outcomes)}/{self.total} cases done")


def _tuples(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "results": [tuple(r) for r in data["results"]]}


def serial(
    lab: Lab,
    scenario: dict[str, Any],
    cases: Sequence[Case],
    when: When,
    backend: Managed,
    progress: Progress = quiet,
) -> list[Outcome]:
    """Every case (the baseline first) on one twin, one after the other; after each, what it
    took is given back and the twin checked to be as it was (links, nodes, BGP sessions)."""
    deployed = not backend.running(lab)
    if deployed:
        backend.deploy(lab, progress)
    try:
        before = _health(backend.status(lab))
        outcomes = []
        for n, case in enumerate([BASELINE, *cases]):
            done, injected = run_case(lab, scenario, case, when, backend)
            for fault in injected:
                back = RESTORES.get(fault.fault)
                if back:
                    restore = fault.model_copy(update={"fault": back, "delay_ms": 0.0})
                    backend.fault(lab, plan.fault(restore))
            _wait_until(lambda: _health(backend.status(lab)) == before, case.label)
            outcomes.append(done)
            progress(f"{n + 1}/{len(cases) + 1} cases done ({case.label}, restored)")
        return outcomes
    finally:
        if deployed:
            backend.destroy(lab)


def _health(status: Status) -> tuple[frozenset[tuple[str, str]], frozenset[str], int]:
    """The links up, the nodes up and the BGP sessions established."""
    links = frozenset((f"{s.a}:{s.a_port}", f"{s.b}:{s.b_port}") for s in status.links if s.up)
    nodes = frozenset(n for n, state in status.nodes.items() if state == "up")
    sessions = sum(1 for s in status.sessions if s.state == "Established")
    return links, nodes, sessions


def _wait_until(check: Callable[[], bool], label: str) -> None:
    deadline = time.monotonic() + RESTORE_TIMEOUT
    while not check():
        if time.monotonic() > deadline:
            raise LabError(
                f"after {label}: the twin did not come back as it was within "
                f"{RESTORE_TIMEOUT:.0f} s (links, nodes or BGP sessions); drill stopped"
            )
        time.sleep(1.0)
