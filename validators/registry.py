"""Validators by name: registration, thresholds with documented defaults, and running them.

A module in this package registers its check with a decorator that names it and gives the
default of every threshold it reads::

    @static("ecn_thresholds", rtt_us=10.0)
    def ecn_thresholds(lab: Lab, params: Params) -> list[Result]: ...

Static checks read only the lab directory: `f(lab, params) -> list[Result]`. Dynamic checks
(kind "dynamic", added with the observations) are `f(lab, observations, params)` and declare
what they need the backend to observe (`@dynamic("failover", needs={"flows"}, ...)`): on a run
whose backend lacks one of those capabilities (`run.json`), the check is not run and reports
not-observable, naming what is missing. `params`
always holds every threshold: the defaults, overridden by what a scenario or the command line
gives; an unknown threshold is an input error. Each validator's docstring says what its
thresholds mean.

Some scopes are invariants (`INVARIANTS`): a dead daemon, a lossless drop or loss outside
faults, FIBs that disagree with the routing model, a twin that had not converged at the
start, unexplained BGP flaps. A run is judged on
them whatever its scenario's `validate:` selects (`run_invariants`): a scenario that names
their validator sets its thresholds, one that does not gets them with their defaults.

>>> v = get("ecn_thresholds")
>>> v.kind, v.params({"rtt_us": 8})["rtt_us"]
('static', 8)
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import validators
from labs.registry import how_to_observe
from twin.errors import InputError, InternalError, TwinError
from twin.lab.directory import Lab
from twin.scenario.observations import Observations
from validators.result import Result, Status

Params = Mapping[str, Any]
StaticCheck = Callable[[Lab, Params], list[Result]]
DynamicCheck = Callable[[Lab, Observations, Params], list[Result]]


@dataclass(frozen=True)
class Validator:
    """A registered check: its name, kind, function and threshold defaults."""

    name: str
    kind: str
    check: Callable[..., list[Result]]
    defaults: Mapping[str, Any]
    needs: frozenset[str] = frozenset()

    @property
    def summary(self) -> str:
        """The first line of the check's docstring."""
        return (self.check.__doc__ or "").strip().splitlines()[0]

    def params(self, given: Params, source: str = "--set") -> dict[str, Any]:
        """The defaults overridden by `given`; an unknown key is an `InputError`."""
        for key in given:
            if key not in self.defaults:
                known = ", ".join(self.defaults) or "none"
                raise InputError(
                    source, f"{self.name}.{key}", f"unknown threshold (known: {known})"
                )
        return {**self.defaults, **given}


_REGISTRY: dict[str, Validator] = {}


def _guarded(v: Validator, *args: Any) -> list[Result]:
    """A validator's results; a crash of its code is an `InternalError` naming it (one line,
    exit 3), never a verdict. Errors about the user's files pass through."""
    try:
        return v.check(*args)
    except TwinError:
        raise
    except Exception as exc:
        raise InternalError(f"validator {v.name}", exc) from exc


def dynamic(
    name: str, *, needs: Iterable[str], **defaults: Any
) -> Callable[[DynamicCheck], DynamicCheck]:
    """Register a dynamic check (it reads a run's observations) under `name`, with the
    capabilities (`labs.backend.Capability`) it needs a backend to have observed."""

    def register(check: DynamicCheck) -> DynamicCheck:
        _REGISTRY[name] = Validator(name, "dynamic", check, defaults, frozenset(needs))
        return check

    return register


def static(name: str, **defaults: Any) -> Callable[[StaticCheck], StaticCheck]:
    """Register a static check under `name`, with the defaults of its thresholds."""

    def register(check: StaticCheck) -> StaticCheck:
        _REGISTRY[name] = Validator(name, "static", check, defaults)
        return check

    return register


@functools.cache
def _load() -> None:
    """Import every module of the package, so that every check is registered."""
    for info in pkgutil.walk_packages(validators.__path__, f"{validators.__name__}."):
        importlib.import_module(info.name)


def available(kind: str) -> list[Validator]:
    """Every registered validator of a kind, by name."""
    _load()
    return sorted((v for v in _REGISTRY.values() if v.kind == kind), key=lambda v: v.name)


def get(name: str) -> Validator:
    """A validator by name."""
    _load()
    return _REGISTRY[name]


def select(kind: str, names: Iterable[str] | None = None) -> list[Validator]:
    """The validators of a kind named in `names` (all when None); unknown names are refused."""
    every = {v.name: v for v in available(kind)}
    if names is None:
        return list(every.values())
    chosen = []
    for name in names:
        if name not in every:
            raise InputError(
                "--only", "", f"no {kind} validator {name!r} (known: {', '.join(every)})"
            )
        chosen.append(every[name])
    return chosen


def run_static(lab: Lab, chosen: Iterable[Validator], given: Mapping[str, Params]) -> list[Result]:
    """Run static validators on a lab, each with its thresholds (`given` by validator name),
    sharing what they read alike (`twin.lab.diff.sharing`)."""
    from twin.lab.diff import sharing

    results: list[Result] = []
    with sharing():
        for v in chosen:
            results += _guarded(v, lab, v.params(given.get(v.name, {})))
    return results


INVARIANTS: dict[str, tuple[str, ...]] = {
    "daemons": (),
    "fib_agreement": (),
    "bgp_health": ("routes", "flaps"),
    "lossless_isolation": ("loss",),
    "pfc_behaviour": ("lossless drops",),
}
"""Dynamic validators judged on every run, and which of their scopes are invariants (none
listed: all of them; `loss` stands for `loss CLASS`, one per class)."""


def invariant(name: str, scope: str) -> str | None:
    """The invariant (as `INVARIANTS` lists it) that a validator's scope judges, or None.

    >>> invariant("lossless_isolation", "loss roce"), invariant("bgp_health", "sessions")
    ('loss', None)
    """
    if name not in INVARIANTS:
        return None
    scopes = INVARIANTS[name]
    if not scopes:
        return scope
    return next((s for s in scopes if scope == s or scope.startswith(f"{s} ")), None)


def run_invariants(lab: Lab, obs: Observations, named: Iterable[str]) -> list[Result]:
    """The invariants of the validators not `named` (a scenario's selection), with their
    defaults: only their invariant scopes; an invariant scope the validator could not judge
    (the backend does not observe it, the run sent nothing) is not-observable, with the
    validator's reason."""
    results: list[Result] = []
    skipped = set(named)
    for name, scopes in INVARIANTS.items():
        if name in skipped:
            continue
        found = run_dynamic(lab, obs, [get(name)], {})
        kept = [r for r in found if invariant(name, r.scope)]
        results += kept
        unjudged = [r for r in found if r.status is Status.NOT_OBSERVABLE and r not in kept]
        if unjudged:
            judged = {invariant(name, r.scope) for r in kept}
            results += [
                Result(name, scope, Status.NOT_OBSERVABLE, unjudged[0].reason)
                for scope in scopes
                if scope not in judged
            ]
    return results


def run_dynamic(
    lab: Lab, obs: Observations, chosen: Iterable[Validator], given: Mapping[str, Params]
) -> list[Result]:
    """Run dynamic validators on a run's observations, each with its thresholds; those
    needing what the run's backend cannot observe are not-observable."""
    results: list[Result] = []
    for v in chosen:
        params = v.params(given.get(v.name, {}), "scenario.yaml")
        missing = sorted(v.needs - obs.capabilities)
        if missing:
            backend = obs.run.get("backend", "unknown")
            how = how_to_observe(set(missing), backend)
            reason = f"the {backend} backend does not observe {', '.join(missing)}: {how}"
            results.append(Result(v.name, "run", Status.NOT_OBSERVABLE, reason))
        else:
            results += _guarded(v, lab, obs, params)
    return results
