"""`fib_agreement`: every switch's live FIB is the one the routing model computes from the
configs, at each snapshot of the run.

The routing model (`twin.model.routing`) is what the static validators, the fake backend and
the simulator route by; a live twin routes by what its daemons really installed. This check
reads the FIB snapshots a run took (`fib/LABEL.json`: at the start, half a second after each
fault, at the end) and compares each switch's routes with the model's under the faults fired
so far (`labs.failures.Network`): the same prefixes, each with the same next hops (neighbour
and egress port). At the start and the end any difference fails, naming the switch, the
prefix and both sets of next hops: a config line the twin does not run (a static route
without staticd), a route the model does not know, a next hop it would not use. Half a second
after a fault the control plane may still be on its way (sessions a restore brought back
still coming up; on a loaded machine, the kernel not yet done with a carrier it lost): there
a route between the model's before the fault and after it (every next hop one of either,
keeping those both have) is counted as converging, and anything else fails as above.

Only a backend whose FIBs come from a control plane it runs (one that observes BGP) has
anything to compare; the fake and sim backends' FIBs are the model's own, so there the check
is not-observable.
"""

from __future__ import annotations

from typing import cast

from labs.backend import Fault, FaultKind
from labs.failures import CHANGES_ROUTING, Failures, Network
from twin.lab.directory import Lab
from twin.model.fib import Fib, Hops
from twin.model.routing import Routing
from twin.model.wiring import shared
from twin.scenario.observations import Observations
from twin.scenario.records import FaultRecord
from validators.registry import Params, dynamic
from validators.result import Figure, Finding, Result, Status, verdict

NAME = "fib_agreement"


def _hops(hops: Hops | None) -> str:
    if hops is None:
        return "no route"
    if not hops:
        return "drop"
    return ", ".join(f"{h.node}:{h.port}" for h in sorted(hops))


def differences(lab: Lab, live: Fib, model: Fib, before: Fib | None = None) -> list[Finding]:
    """One finding per switch and prefix whose next hops differ from the model's (servers are
    not compared: their routes are the host files', set by the twin, not by a control plane).
    With `before` (the model's FIB before the fault the snapshot follows), a route on its way
    from `before` to `model` (`in_transition`) is no finding."""
    found = []
    for switch in lab.switches():
        mine, theirs = live.get(switch, {}), model.get(switch, {})
        old = (before or model).get(switch, {})
        for prefix in sorted(mine.keys() | theirs.keys()):
            here, there = mine.get(prefix), theirs.get(prefix)
            if here is not None and there is not None and set(here) == set(there):
                continue
            if before is None or not in_transition(here, old.get(prefix), there):
                message = f"{prefix}: live {_hops(here)}, model {_hops(there)}"
                found.append(Finding(switch, message, where="FIB"))
    return found


def in_transition(live: Hops | None, before: Hops | None, after: Hops | None) -> bool:
    """Whether a route is between its state before a fault and after it: every next hop it
    has is one of either, and it keeps those both have (None: no route; () drops, and is
    only in transition where one of them drops too).

    >>> from twin.model.fib import NextHop
    >>> a, b = NextHop("spine1", "Ethernet0"), NextHop("spine2", "Ethernet8")
    >>> in_transition((a, b), (a, b), (a,)), in_transition(None, None, (a,))
    (True, True)
    >>> in_transition((b,), (a,), (a, b)), in_transition((), None, (a,))
    (False, False)
    """
    if live == ():
        return () in (before, after)
    have, old, new = set(live or ()), set(before or ()), set(after or ())
    return have <= old | new and old & new <= have


def _fault(record: FaultRecord) -> Fault | None:
    """The fault a run recorded, as the routing model fires it (None: it changes no route)."""
    if record.get("fault") not in CHANGES_ROUTING:
        return None
    kind = cast(FaultKind, record["fault"])  # one of CHANGES_ROUTING
    return Fault(kind, record.get("link"), record.get("node"), record.get("daemon"))


def _models(lab: Lab, obs: Observations, labels: list[str]) -> dict[str, tuple[Fib, Fib]]:
    """The model's FIB at each snapshot, and before the fault it follows: `start` before any
    fault, `fault<N>-...` after the first N faults (and before it, after N - 1), `end` after
    all of them."""
    net = Network(lab, Failures(), Routing(shared(lab)))
    after = [net]
    for record in sorted(obs.run.get("faults", []), key=lambda r: int(r["index"])):
        fault = _fault(record)
        after.append(after[-1].after(fault) if fault else after[-1])
    out = {}
    for label in labels:
        if label.startswith("fault"):
            fired = int(label[5:].split("-")[0])
        else:
            fired = 0 if label == "start" else len(after) - 1
        out[label] = (after[fired].fib, after[max(0, fired - 1)].fib)
    return out


@dynamic(NAME, needs={"fib"})
def check(lab: Lab, obs: Observations, params: Params) -> list[Result]:
    """One result per FIB snapshot: each switch's live routes are the routing model's."""
    backend = obs.run.get("backend", "unknown")
    if "bgp" not in obs.capabilities:
        reason = f"the {backend} backend's FIBs are the routing model's own: nothing to compare"
        return [Result(NAME, "run", Status.NOT_OBSERVABLE, reason)]
    labels = obs.fib_labels()
    if not labels:
        return [Result(NAME, "run", Status.NOT_OBSERVABLE, "the run took no FIB snapshot")]
    results = []
    for label, (model, before) in _models(lab, obs, labels).items():
        live = obs.fib(label)
        routes = sum(len(live.get(s, {})) for s in lab.switches())
        findings = differences(lab, live, model, before if label.startswith("fault") else None)
        late = len(differences(lab, live, model)) - len(findings)
        figures: dict[str, Figure] = {
            "switches": len(lab.switches()),
            "routes": routes,
            "converging": late,
        }
        ok = f"{routes} routes on {len(lab.switches())} switches, as the routing model has them"
        if late:
            ok += f" ({late} still on their way from the FIB before the fault)"
        results.append(verdict(NAME, f"FIB {label}", findings, ok, figures))
    return results
