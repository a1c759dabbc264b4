"""The backends by name (`labs.backend.BACKENDS`: each is a class in `labs/<name>/backend.py`,
Clabernetes' in `labs/clab/kube.py`), given wrapped in their lifecycle (`labs.lifecycle.Managed`).

A lab's `state.json` records the backend its twin runs on, so later verbs find it without
being told (`of`); the record of a deploy in its run directory does too, so `twin cleanup`
finds the backend of a lab known by name alone (`left_by`).
"""

from __future__ import annotations

from pathlib import Path

from labs import lifecycle, state
from labs.backend import BACKENDS as BACKENDS  # the names, for the CLI and the plugin
from labs.backend import DEFAULT as DEFAULT
from labs.backend import load
from labs.lifecycle import Managed
from twin.errors import LabError
from twin.lab.directory import Lab

OBSERVES = {
    "netns": frozenset(
        {"bgp", "counters", "daemons", "failover-probes", "fib", "flows", "pcap", "probes"}
    ),
    "clab": frozenset({"bgp", "counters", "fib", "flows"}),
    "clabernetes": frozenset(),
    "fake": frozenset({"counters", "failover-probes", "fib", "flows"}),
    "sim": frozenset(
        {"counters", "deadlock", "ecn", "fib", "flows", "iterations", "pfc", "queues"}
    ),
}
"""What each backend observes: its class's `capabilities`, written here so that saying how to
observe something imports no backend (tests/integration/test_backends.py checks that they agree)."""


def how_to_observe(missing: set[str], backend: str, flag: str = "--backend") -> str:
    """How a user gets what `backend` could not observe: the simulator's data plane (`twin
    run --sim`, or `FLAG sim`), else another backend that observes all of it.

    >>> how_to_observe({"pfc"}, "netns"), how_to_observe({"probes"}, "fake")
    ('run with --sim (the simulator observes pfc)', 'run on netns (--backend netns)')
    """
    what = ", ".join(sorted(missing))
    if backend != "sim" and missing <= OBSERVES["sim"]:
        how = "--sim" if flag == "--backend" else f"{flag} sim"
        return f"run with {how} (the simulator observes {what})"
    able = [n for n, caps in OBSERVES.items() if missing <= caps]
    others = [n for n in able if n != backend] or able
    if others:
        return f"run on {' or '.join(others)} ({flag} {others[0]})"
    return f"no single backend observes {what}"


def get(name: str, force_owner: bool = False) -> Managed:
    """The backend called `name` in its lifecycle (`force_owner`: acting on a twin another
    lab directory deployed); one line naming the known ones otherwise."""
    return Managed(load(name), force_owner)


def of(lab: Lab, name: str | None = None, force_owner: bool = False) -> Managed:
    """The backend `name`, else the one the lab's state records, else the default; refuses a
    name other than the one a recorded twin runs on."""
    recorded = state.load(lab.path)
    if recorded is not None and name is not None and recorded.backend != name:
        raise LabError(
            f"lab {lab.name} runs on the {recorded.backend} backend, not {name} "
            f"(twin destroy {lab.path} first)"
        )
    return get(name or (recorded.backend if recorded else DEFAULT), force_owner)


def left_by(lab: str, lab_dir: Path | None = None) -> Managed:
    """The backend that left lab `lab`: the one its deploy recorded, else the one the state
    file in `lab_dir` names, else the default."""
    record = lifecycle.owner(lab)
    recorded = lifecycle.own_state(lab, lab_dir)
    name = record.backend if record else recorded.backend if recorded else DEFAULT
    return get(name if name in BACKENDS else DEFAULT)
