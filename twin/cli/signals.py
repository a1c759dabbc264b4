"""SIGTERM and SIGINT as an orderly stop of a `twin` command.

The first of either raises `Stopped` in the main thread, so every `finally` on the way out
runs (`twin run` destroys the twin it deployed, the scenario player marks its run directory
interrupted); further signals are ignored while that cleanup runs. `main` then prints one
line and exits 128 + the signal's number (130 for SIGINT, 143 for SIGTERM). A process forked
from the command (pyroute2's helpers, traffic workers) inherits the handlers but dies of the
signal as if it had none: it must never run the command's cleanup.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType

HANDLED = (signal.SIGINT, signal.SIGTERM)


class Stopped(KeyboardInterrupt):
    """A signal asked the command to stop."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def code(self) -> int:
        """The exit code: 128 + the signal's number."""
        return 128 + self.signum

    @property
    def message(self) -> str:
        """The one line printed."""
        return (
            f"stopped by {signal.Signals(self.signum).name}; what this command started is removed"
        )


_owner = [0]
"""The process whose verb the handlers stop (a process forked from it is not that verb)."""


def _stop(signum: int, _: FrameType | None) -> None:
    if os.getpid() != _owner[0]:  # a forked child (pyroute2's, a traffic worker): die as
        signal.signal(signum, signal.SIG_DFL)  # it would have without these handlers
        os.kill(os.getpid(), signum)
        return
    for sig in HANDLED:
        signal.signal(sig, signal.SIG_IGN)
    raise Stopped(signum)


@contextlib.contextmanager
def orderly() -> Iterator[None]:
    """While inside, SIGINT and SIGTERM stop in order (in the main thread only; the handlers
    before are put back after)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _owner[0] = os.getpid()
    before = {sig: signal.signal(sig, _stop) for sig in HANDLED}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
