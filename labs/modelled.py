"""What the fake and sim backends share: a twin that is a record in the lab's state plus the
failures it holds (`labs.failures`), with FIBs from the routing model and no processes."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

from labs import failures, state
from labs.backend import Fault, Session, Status
from labs.failures import STATE, Failures, Network
from twin import safeio
from twin.errors import LabError
from twin.lab.directory import Lab
from twin.model.fib import Fib


class ModelledObserver:
    """`labs.backend.Observer` of a modelled twin: its FIB; nothing runs between plays."""

    def __init__(self, lab: Lab) -> None:
        self.lab = lab

    def fib(self) -> Fib:
        """Every node's FIB under the failures the twin holds."""
        return Network(self.lab, Failures.load(self.lab)).fib

    def counters(self) -> dict[str, list[int]]:
        """No traffic outside a play: nothing counted."""
        return {}

    def bgp(self) -> list[Session]:
        """Not observed (no BGP daemons)."""
        return []

    @contextmanager
    def watch(self) -> Iterator[list[dict[str, Any]]]:
        """No state changes happen outside a play."""
        yield []


class ModelledBackend:
    """The verbs of a twin that runs nothing: check, remove, cleanup, status, exec (refused),
    fault."""

    name: ClassVar[str]

    def check(self, lab: Lab) -> None:
        """Nothing to refuse on this machine: the twin runs nothing."""

    def remove(self, lab: Lab) -> dict[str, int]:
        """Forget the failures the twin holds (the lifecycle forgets the twin)."""
        was = self.running(lab)
        safeio.remove(lab.path / STATE)
        return {"twins": int(was)}

    def cleanup(self, lab: str) -> dict[str, int]:
        """Nothing: a modelled twin leaves nothing on the machine (only records in its lab
        directory, which the lifecycle forgets)."""
        return {}

    def running(self, lab: Lab) -> bool:
        """Whether the lab's state records a twin of this backend."""
        return state.running(lab.path, self.name)

    def status(self, lab: Lab) -> Status:
        """Nodes up or down, links as the failures leave them; sessions are not observed."""
        return failures.status(lab, self.name, self.running(lab))

    def exec(self, lab: Lab, node: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
        """Refused: the twin runs no processes."""
        raise LabError(f"the {self.name} backend runs no processes: cannot run {argv[0]} in {node}")

    def fault(self, lab: Lab, fault: Fault) -> dict[str, Any]:
        """Record a fault in the twin's failures and log it (the next play starts from them)."""
        return failures.inject(lab, fault)
