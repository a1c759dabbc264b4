"""`--metrics [HOST]:PORT` of the verbs that run a live twin (`run`, `deploy`): a Prometheus
endpoint serving the twin's metrics (`twin.outputs.metrics`) while it runs; `--metrics-flavour` of
these and of `twin report --openmetrics`, and `--epoch` of the latter."""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime

from labs.backend import Progress
from labs.lifecycle import Managed
from twin.lab.directory import Lab


def add_metrics(p: argparse.ArgumentParser) -> None:
    """`--metrics [HOST]:PORT`."""
    p.add_argument(
        "--metrics",
        metavar="[HOST]:PORT",
        type=address,
        help="serve the live twin's metrics for Prometheus on HOST:PORT/metrics "
        "(HOST defaults to 127.0.0.1; docs/metrics.md)",
    )
    add_flavour(p)


FLAVOURS = ("twin", "sonic-exporter")
"""`twin.outputs.metrics.FLAVOURS` (not imported from there: it imports prometheus_client)."""


def add_flavour(p: argparse.ArgumentParser) -> None:
    """`--metrics-flavour twin|sonic-exporter`."""
    p.add_argument(
        "--metrics-flavour",
        choices=FLAVOURS,
        default="twin",
        help="metric names and labels: the twin's own (default) or as the common SONiC "
        "exporter writes them, to share its dashboards (docs/metrics.md)",
    )


def epoch(text: str) -> float:
    """`--epoch`: seconds since 1970 or an ISO 8601 date and time (UTC unless it says).

    >>> epoch("1800000000"), epoch("2027-01-15T08:00:00Z"), epoch("2027-01-15 09:00+01:00")
    (1800000000.0, 1800000000.0, 1800000000.0)
    """
    try:
        return float(text)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither seconds since 1970 nor an ISO 8601 date and time"
        ) from None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


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
    where: tuple[str, int] | None,
    lab: Lab,
    backend: Managed,
    progress: Progress,
    flavour: str = "twin",
) -> Iterator[None]:
    """Serve the twin's metrics inside the block when `where` is given: the port is taken
    first, so a deploy inside the block starts only once it is (one it cannot take is bad
    input, exit 2, with nothing started); scrapes before the twin is up are empty."""
    if where is None:
        yield
        return
    from twin.outputs.metrics import Server

    server = Server(lab, backend, *where, flavour)
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
