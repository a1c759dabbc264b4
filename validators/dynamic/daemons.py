"""`daemons`: no routing daemon of a switch died during the run unless a fault killed it.

A live backend that observes "daemons" polls every daemon its twin started (netns: FRR's
zebra, bgpd and bfdd per switch, every 0.25 s) and logs a `daemon` event for each one found
dead, and at the end one `daemons` event saying how many it watched. A death is explained by a fault
that kills daemons of that switch (`daemon-kill` of that daemon, `node-down`, or a
`daemon-restart`, which restarts them all) fired at most `grace_s` before it was seen. A
switch whose zebra died keeps forwarding on the routes it had and passes every other check
for a while: this one fails, naming the switch, the daemon and when.
"""

from __future__ import annotations

from twin.lab.directory import Lab
from twin.scenario.observations import Observations
from twin.scenario.records import Event, FaultRecord
from validators.dynamic.failover import fault_began
from validators.registry import Params, dynamic
from validators.result import Figure, Finding, Result, Status, verdict

NAME = "daemons"
KILLS = ("daemon-kill", "daemon-restart", "node-down")


def _explained(death: Event, faults: list[FaultRecord], grace_s: float) -> bool:
    """Whether a fault on the timeline killed this daemon."""
    return any(
        f.get("fault") in KILLS
        and f.get("node") == death["node"]
        and (f["fault"] != "daemon-kill" or f.get("daemon") == death["daemon"])
        and fault_began(f) - 1.0 <= death["t"] <= float(f["t"]) + grace_s
        for f in faults
    )


@dynamic(NAME, needs={"daemons"}, grace_s=5.0)
def check(lab: Lab, obs: Observations, params: Params) -> list[Result]:
    """Every switch's routing daemons lived through the run, but those a fault killed."""
    watched = [e for e in obs.events if e["event"] == "daemons"]
    if not watched:
        reason = "the run logged no watch of the daemons (no `daemons` event)"
        return [Result(NAME, "switches", Status.NOT_OBSERVABLE, reason)]
    count = watched[0].get("watched", 0)
    started = float(obs.run.get("started", 0.0))
    faults = obs.run.get("faults", [])
    died = [e for e in obs.events if e["event"] == "daemon" and e.get("state") == "died"]
    findings = [
        Finding(
            str(e["node"]),
            f"{e['daemon']} (pid {e.get('pid')}) died at +{float(e['t']) - started:.1f} s "
            "with no fault to explain it",
            where="FRR",
        )
        for e in died
        if not _explained(e, faults, float(params["grace_s"]))
    ]
    figures: dict[str, Figure] = {"watched": count, "died": len(died), "unexplained": len(findings)}
    if count == 0:
        return [Result(NAME, "switches", Status.NOT_OBSERVABLE, "no daemon was watched", figures)]
    ok = f"all {count} daemons lived through the run ({len(died)} killed by faults)"
    return [verdict(NAME, "switches", findings, ok, figures)]
