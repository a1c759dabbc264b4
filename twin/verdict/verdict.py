"""The verdict on a run: the scenario's validators on its observations, then the reports.

Everything is rebuilt from the run directory alone (`twin report RUN_DIR`): the scenario
saved with it says which validators to run with which thresholds; static validators among
them read the lab's configs. The invariants (`validators.registry.INVARIANTS`: dead
daemons, lossless loss, FIB agreement, BGP flaps) are judged whatever it selects, after its
own. With `static` (what `twin run` and `twin report` do unless `--no-static`), every other
static validator runs too, after those, with its defaults: a static finding fails the run's
one verdict and its JUnit. What the scenario's `sim:` options imply for a static validator
(`implied`: `headroom` counts the frames it sends) lies under its own thresholds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from twin import safeio
from twin.design.headroom import ROCE_HEADERS, ROCE_PAYLOAD
from twin.errors import InputError, LabError
from twin.intent.inputs import strict_yaml
from twin.lab import diff
from twin.lab.directory import Lab, refuse_links
from twin.outputs import plots, report
from twin.scenario.observations import Observations
from validators import registry
from validators.result import Result


def check_names(wanted: dict[str, dict[str, Any]], file: str) -> None:
    """Refuse unknown validators and thresholds before a run starts."""
    known = {v.name: v for kind in ("static", "dynamic") for v in registry.available(kind)}
    for name, given in wanted.items():
        if name not in known:
            raise InputError(file, f"validate.{name}", f"no validator (known: {', '.join(known)})")
        known[name].params(given or {}, file)


Thresholds = dict[str, dict[str, Any]]
"""Per validator, its thresholds."""


def implied(sim: dict[str, Any]) -> Thresholds:
    """What a scenario's `sim:` options imply for the static validators where its `validate:`
    sets nothing: the frames it sends (`packet_bytes` and the simulator's headers) are the
    RoCE frames `headroom` counts in buffer cells.

    >>> implied({"packet_bytes": 256}), implied({})
    ({'headroom': {'frame_bytes': 318}}, {'headroom': {'frame_bytes': 4158}})
    """
    packet = int(sim.get("packet_bytes", ROCE_PAYLOAD))
    return {"headroom": {"frame_bytes": packet + ROCE_HEADERS}}


def _given(wanted: Thresholds, defaults: Thresholds | None) -> Thresholds:
    """The wanted validators' thresholds over what `defaults` gives them."""
    under = defaults or {}
    return {name: {**under.get(name, {}), **(given or {})} for name, given in wanted.items()}


def evaluate(
    lab: Lab,
    obs: Observations,
    wanted: Thresholds,
    judged: dict[str, list[Result]] | None = None,
    static: bool = False,
    defaults: Thresholds | None = None,
) -> list[Result]:
    """Run the wanted validators (static and dynamic) in the order given, then the
    invariants they do not name (`registry.INVARIANTS`: judged on every run) and, with
    `static`, every other static validator; a static one's results may come `judged`
    already (`judge_static`). `defaults`: thresholds under the wanted ones (`implied`)."""
    results: list[Result] = []
    for name, given in _given(wanted, defaults).items():
        results += _judged(lab, obs, name, given, judged)
    results += registry.run_invariants(lab, obs, wanted)
    rest = with_static(wanted, defaults) if static else wanted
    for name, given in rest.items():
        if name not in wanted:
            results += _judged(lab, obs, name, given, judged)
    return results


def _judged(
    lab: Lab,
    obs: Observations,
    name: str,
    given: dict[str, Any],
    judged: dict[str, list[Result]] | None,
) -> list[Result]:
    """One validator's results, static ones taken from `judged` when there."""
    v = registry.get(name)
    if v.kind == "dynamic":
        return registry.run_dynamic(lab, obs, [v], {name: given})
    if judged is not None and name in judged:
        return judged[name]
    return registry.run_static(lab, [v], {name: given})


def judge_static(
    lab: Lab, wanted: Thresholds, static: bool = False, defaults: Thresholds | None = None
) -> dict[str, list[Result]]:
    """The results of the static validators `report_run` would run (the wanted ones; with
    `static`, every one), by name: they read only the lab's configs, so they can be judged
    while the twin plays and handed to `report_run` as `judged`."""
    chosen = with_static(_given(wanted, defaults), defaults) if static else _given(wanted, defaults)
    with diff.sharing():
        return {
            name: registry.run_static(lab, [registry.get(name)], {name: given or {}})
            for name, given in chosen.items()
            if registry.get(name).kind == "static"
        }


def lab_of(run_dir: Path, obs: Observations) -> Lab:
    """The lab a run was played on, from any working directory: the directory holding
    LAB/runs/RUN, else the lab where the run recorded it relative to itself (the two copied
    or downloaded together), else at the absolute path it recorded (a run saved before
    `lab_from_run`: its `lab_dir` as written, relative to where it was played)."""
    home = run_dir.resolve().parent.parent
    beside = obs.run.get("lab_from_run")
    if not isinstance(beside, str | None):
        raise InputError(str(run_dir / "run.json"), "lab_from_run", "not a string")
    recorded = obs.run["lab_dir"]
    places = [home, *([run_dir / beside] if beside else []), Path(recorded)]
    for place in places:
        if (place / "fabric.yaml").is_file():
            return Lab.open(place)
    where = f", nor at {run_dir / beside} (lab_from_run)" if beside else ""
    raise LabError(
        f"{run_dir}: its lab directory is not at {recorded} (run.json lab_dir){where}: "
        "copy the lab with the run"
    )


def with_static(wanted: Thresholds, defaults: Thresholds | None = None) -> Thresholds:
    """The wanted validators, then every static validator they do not name (its defaults,
    under `defaults`' thresholds for it)."""
    rest: Thresholds = {
        v.name: dict((defaults or {}).get(v.name, {}))
        for v in registry.available("static")
        if v.name not in wanted
    }
    return {**wanted, **rest}


def report_run(
    run_dir: Path,
    static: bool = False,
    judged: dict[str, list[Result]] | None = None,
    lab: Lab | None = None,
) -> tuple[int, list[Result]]:
    """Validate a run from its saved observations (and, with `static`, the lab's configs by
    every static validator; those `judged` already, by `judge_static` on the same lab, are
    not run again) and write its reports into it; `lab`: the lab the run was played on, as
    the command that played it opened it (else found from the run: `lab_of`)."""
    obs = Observations.open(run_dir)
    refuse_links(run_dir, ("",))
    lab = lab or lab_of(run_dir, obs)
    saved = run_dir / "scenario.yaml"
    scenario = strict_yaml(saved)
    wanted: Thresholds = scenario.get("validate") or {}
    check_names(wanted, str(saved))
    results = evaluate(lab, obs, wanted, judged, static, implied(scenario.get("sim") or {}))
    title = f"{obs.run['scenario']} on {obs.run['lab']} ({obs.run['backend']})"
    code = int(report.write(results, run_dir, title, str(obs.run["backend"]))["exit_code"])
    params = {name: registry.get(name).params(given or {}) for name, given in wanted.items()}
    images = plots.write(obs, run_dir, results, params, lab)
    if images:
        listed = "".join(f"![{p.stem}]({p.name})\n\n" for p in images)
        safeio.append(run_dir / "report.md", "\n## Plots\n\n" + listed)
    return code, results
