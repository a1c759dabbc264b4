"""The backends by name: each is a class in `labs/<name>/backend.py`, imported only when used.

A lab's `state.json` records the backend its twin runs on, so later verbs find it without
being told (`of`).
"""

from __future__ import annotations

import importlib

from labs import state
from labs.backend import Backend
from twin.errors import LabError
from twin.labdir import Lab

BACKENDS = {
    "netns": "labs.netns.backend:NetnsBackend",
    "clab": "labs.clab.backend:ClabBackend",
    "clabernetes": "labs.clab.kube:ClabernetesBackend",
    "fake": "labs.fake.backend:FakeBackend",
    "sim": "labs.sim.backend:SimBackend",
}
DEFAULT = "netns"


def get(name: str) -> Backend:
    """The backend called `name`; one line naming the known ones otherwise."""
    if name not in BACKENDS:
        raise LabError(f"unknown backend {name!r} (known: {', '.join(sorted(BACKENDS))})")
    module, cls = BACKENDS[name].split(":")
    backend: Backend = getattr(importlib.import_module(module), cls)()
    return backend


def of(lab: Lab, name: str | None = None) -> Backend:
    """The backend `name`, else the one the lab's state records, else the default; refuses a
    name other than the one a recorded twin runs on."""
    recorded = state.load(lab.path)
    if recorded is not None and name is not None and recorded.backend != name:
        raise LabError(
            f"lab {lab.name} runs on the {recorded.backend} backend, not {name} "
            f"(twin destroy {lab.path} first)"
        )
    return get(name or (recorded.backend if recorded else DEFAULT))
