"""`production_agreement`: the run's pauses, ECN marks and drops where production's were.

Given a production run (`production`: a run directory `twin import` wrote), compares the two
as `twin.telemetry.compare` says: per category the overlap of the (port, priority) sets
against `threshold`, pause frames per port by rank against `rank`, watermarks as figures.
Without a production run it is not observable. `twin compare RUN PRODUCTION` runs the same.
"""

from __future__ import annotations

from pathlib import Path

from twin.errors import InputError
from twin.lab.directory import Lab
from twin.scenario.observations import Observations
from twin.telemetry.compare import NAME, compare
from validators.registry import Params, dynamic
from validators.result import Result, Status


def production_run(path: str) -> Observations:
    """A production run directory, or one line saying why it is not one."""
    obs = Observations.open(Path(path))
    if obs.run.get("kind") != "production":
        raise InputError(f"{path}/run.json", "kind", "not a production run (twin import)")
    return obs


@dynamic(NAME, needs={"pfc"}, production="", threshold=0.8, rank=0.5)
def check(lab: Lab, obs: Observations, params: Params) -> list[Result]:
    """The run against the production run `params["production"]`."""
    if not params["production"]:
        why = f"no production run given ({NAME}.production: a directory twin import wrote)"
        return [Result(NAME, "agreement", Status.NOT_OBSERVABLE, why)]
    production = production_run(str(params["production"]))
    return compare(obs, production, float(params["threshold"]), float(params["rank"]))
