"""The backends by name: each is a class in `labs/<name>/backend.py`, imported only when used."""

from __future__ import annotations

import importlib

from labs.backend import Backend
from twin.errors import LabError

BACKENDS = {
    "netns": "labs.netns.backend:NetnsBackend",
    "clab": "labs.clab.backend:ClabBackend",
    "clabernetes": "labs.clab.kube:ClabernetesBackend",
}
DEFAULT = "netns"


def get(name: str) -> Backend:
    """The backend called `name`; one line naming the known ones otherwise."""
    if name not in BACKENDS:
        raise LabError(f"unknown backend {name!r} (known: {', '.join(sorted(BACKENDS))})")
    module, cls = BACKENDS[name].split(":")
    backend: Backend = getattr(importlib.import_module(module), cls)()
    return backend
