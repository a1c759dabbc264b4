"""What a backend runs, logged: every external command and every netlink batch, at debug
level (`twin --debug`), with its duration and how it ended (exit code, or the error).

The backends run their commands through `run` and `start`, and wrap a batch of netlink
requests (a namespace's addresses and links, its routes, a veth) in `netlink`, so that a
failure in the field can be traced from the log alone (`twin --debug --log-file PATH`).
"""

from __future__ import annotations

import contextlib
import logging
import shlex
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

log = logging.getLogger(__name__)


def _ms(started: float) -> float:
    return (time.monotonic() - started) * 1000


def run(
    argv: Sequence[str],
    stdin: str | None = None,
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a command to its end, its output captured as text (never through a shell; a
    non-zero exit is the caller's to judge)."""
    command = shlex.join(argv)
    started = time.monotonic()
    try:
        done = subprocess.run(
            list(argv),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        log.debug("%s: timed out after %.1f ms", command, _ms(started))
        raise
    except OSError as exc:
        log.debug("%s: not run (%s) after %.1f ms", command, exc.strerror, _ms(started))
        raise
    ended(argv, done.returncode, started)
    return done


def ended(argv: Sequence[str], code: int, started: float) -> None:
    """Log a command that ran to its end (through `run`, or some other way: started and
    waited for, run in a container through an API): its exit code and how long it took
    since `started` (`time.monotonic`)."""
    log.debug("%s: exit %d in %.1f ms", shlex.join(argv), code, _ms(started))


def start(argv: Sequence[str], **popen: Any) -> subprocess.Popen[Any]:
    """Start a command that runs on (a daemon, a capture, a probe): `subprocess.Popen`'s
    arguments; logged with its pid and how long starting it took."""
    started = time.monotonic()
    proc: subprocess.Popen[Any] = subprocess.Popen(list(argv), **popen)
    log.debug("%s: started, pid %d, in %.1f ms", shlex.join(argv), proc.pid, _ms(started))
    return proc


def detached(argv: Sequence[str], started: float) -> None:
    """Log a command started detached (its exit is not ours to see), with how long starting
    it took since `started`."""
    log.debug("%s: started detached in %.1f ms", shlex.join(argv), _ms(started))


@contextlib.contextmanager
def netlink(what: str) -> Iterator[None]:
    """A batch of netlink requests (`what` names it: namespace and requests), logged when it
    ends with its duration, or with the error that ended it."""
    started = time.monotonic()
    try:
        yield
    except BaseException as exc:
        log.debug("netlink %s: failed (%s) in %.1f ms", what, exc, _ms(started))
        raise
    log.debug("netlink %s: done in %.1f ms", what, _ms(started))
