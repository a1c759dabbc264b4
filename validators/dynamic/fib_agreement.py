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
keeping those both have) is counted as converging, and anything else fails as above. A route
still converging at one fault's snapshot may still be on its way at the next one's: a
session a link-up brought back is re-opened by FRR's connect retry (every 5 s) when its
first attempt failed, so it can come up after the next fault's snapshot (3.5 s later in the
default scenario); such a route is judged between the model's FIBs from where it last agreed
to now. At the end every route must have arrived.

Only a backend whose FIBs come from a control plane it runs (one that observes BGP) has
anything to compare; the fake and sim backends' FIBs are the model's own, so there the check
is not-observable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from ipaddress import IPv4Network
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


Route = tuple[str, IPv4Network]
"""A switch's route to a prefix."""


def differences(lab: Lab, live: Fib, model: Fib) -> list[Finding]:
    """One finding per switch and prefix whose next hops differ from the model's (servers are
    not compared: their routes are the host files', set by the twin, not by a control
    plane)."""
    return compare(lab, live, model)[0]


def compare(
    lab: Lab, live: Fib, model: Fib, spans: Callable[[Route], list[Hops | None]] | None = None
) -> tuple[list[Finding], list[Route]]:
    """`differences`, and the routes that differ but are on their way: with `spans` (a
    route's next hops in the model's FIBs it may still be moving from, oldest first), one
    between those and the model's (`in_transition`) is no finding but such a route."""
    found, converging = [], []
    for switch in lab.switches():
        mine, theirs = live.get(switch, {}), model.get(switch, {})
        for prefix in sorted(mine.keys() | theirs.keys()):
            here, there = mine.get(prefix), theirs.get(prefix)
            if here is not None and there is not None and set(here) == set(there):
                continue
            if spans is not None and in_transition(here, [*spans((switch, prefix)), there]):
                converging.append((switch, prefix))
            else:
                message = f"{prefix}: live {_hops(here)}, model {_hops(there)}"
                found.append(Finding(switch, message, where="FIB"))
    return found, converging


def in_transition(live: Hops | None, states: Sequence[Hops | None]) -> bool:
    """Whether a route is between states of the model it has been through (before a fault,
    after it, after the next...): every next hop it has is one of theirs, and it keeps those
    all of them have (None: no route; () drops, and is only in transition where one of them
    drops too).

    >>> from twin.model.fib import NextHop
    >>> a, b = NextHop("spine1", "Ethernet0"), NextHop("spine2", "Ethernet8")
    >>> in_transition((a, b), [(a, b), (a,)]), in_transition(None, [None, (a,)])
    (True, True)
    >>> in_transition((b,), [(a,), (a, b)]), in_transition((), [None, (a,)])
    (False, False)
    >>> in_transition(None, [None, (a,), (a,)]), in_transition(None, [(a,), (a,)])
    (True, False)
    """
    if live == ():
        return () in states
    have = set(live or ())
    seen = [set(state or ()) for state in states]
    return have <= set().union(*seen) and set.intersection(*seen) <= have


def _fault(record: FaultRecord) -> Fault | None:
    """The fault a run recorded, as the routing model fires it (None: it changes no route)."""
    if record.get("fault") not in CHANGES_ROUTING:
        return None
    kind = cast(FaultKind, record["fault"])  # one of CHANGES_ROUTING
    return Fault(kind, record.get("link"), record.get("node"), record.get("daemon"))


def _models(lab: Lab, obs: Observations) -> list[Fib]:
    """The model's FIB before any fault and after each of the run's faults in turn."""
    net = Network(lab, Failures(), Routing(shared(lab)))
    after = [net]
    for record in sorted(obs.run.get("faults", []), key=lambda r: int(r["index"])):
        fault = _fault(record)
        after.append(after[-1].after(fault) if fault else after[-1])
    return [n.fib for n in after]


def _spans(
    states: list[Fib], since: dict[Route, int], last: int
) -> Callable[[Route], list[Hops | None]]:
    """A route's next hops in the model's `states` from the one it is on its way from (`since`,
    else `last`: the state at the snapshot before) on."""

    def span(route: Route) -> list[Hops | None]:
        switch, prefix = route
        start = since.get(route, last)
        return [state.get(switch, {}).get(prefix) for state in states[start:]]

    return span


def _fired(label: str, faults: int) -> int:
    """How many faults had fired at a snapshot: none at `start`, N at `fault<N>-...`, all at
    `end`."""
    if label.startswith("fault"):
        return int(label[5:].split("-")[0])
    return 0 if label == "start" else faults


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
    states = _models(lab, obs)
    results = []
    last, since = 0, dict[Route, int]()  # the state each converging route is on its way from
    for label in labels:
        fired = _fired(label, len(states) - 1)
        live = obs.fib(label)
        routes = sum(len(live.get(s, {})) for s in lab.switches())
        transit = _spans(states[:fired], since, last) if label.startswith("fault") else None
        findings, late = compare(lab, live, states[fired], transit)
        since = {route: since.get(route, last) for route in late}
        last = fired
        figures: dict[str, Figure] = {
            "switches": len(lab.switches()),
            "routes": routes,
            "converging": len(late),
        }
        ok = f"{routes} routes on {len(lab.switches())} switches, as the routing model has them"
        if late:
            ok += f" ({len(late)} still on their way from the FIB before a fault)"
        results.append(verdict(NAME, f"FIB {label}", findings, ok, figures))
    return results
