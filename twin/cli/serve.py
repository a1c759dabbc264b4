"""`--metrics [HOST]:PORT` of the verbs that run a live twin (`run`, `deploy`): a Prometheus
endpoint serving the twin's metrics (`twin.metrics`) while it runs."""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator

from labs.backend import Progress
from labs.lifecycle import Managed
from twin.labdir import Lab


def add_metrics(p: argparse.ArgumentParser) -> None:
    """`--metrics [HOST]:PORT`."""
    p.add_argument(
        "--metrics",
        metavar="[HOST]:PORT",
        type=address,
        help="serve the live twin's metrics for Prometheus on HOST:PORT/metrics "
        "(HOST defaults to 127.0.0.1; docs/metrics.md)",
    )


def address(text: str) -> tuple[str, int]:
    """`[HOST]:PORT` -> (host, port), refused before anything starts when it is not one; the
    host defaults to 127.0.0.1 (this machine only).

    >>> address(":9464"), address("0.0.0.0:9000")
    (('127.0.0.1', 9464), ('0.0.0.0', 9000))
    """
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not [HOST]:PORT (e.g. :9464)")
    return host.strip("[]") or "127.0.0.1", int(port)


@contextlib.contextmanager
def metrics(
    where: tuple[str, int] | None, lab: Lab, backend: Managed, progress: Progress
) -> Iterator[None]:
    """Serve the twin's metrics inside the block when `where` is given: the port is taken
    first, so a deploy inside the block starts only once it is (one it cannot take is bad
    input, exit 2, with nothing started); scrapes before the twin is up are empty."""
    if where is None:
        yield
        return
    from twin.metrics import Server

    server = Server(lab, backend, *where)
    progress(f"metrics of {lab.name} on {server.url}")
    try:
        yield
    finally:
        server.stop()


def until_gone(lab: Lab, backend: Managed, progress: Progress) -> None:
    """Serve (inside `metrics`) until the twin is destroyed (`twin destroy`) or Ctrl-C (which
    leaves the twin running)."""
    sys.stdout.flush()
    progress("serving until the twin is destroyed (Ctrl-C stops serving, the twin stays)")
    try:
        while backend.running(lab):
            time.sleep(2)
    except KeyboardInterrupt:
        progress("stopped serving metrics; the twin is still running")
