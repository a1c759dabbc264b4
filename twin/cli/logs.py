"""The log of a `twin` command (the standard `logging` module, one logger per module).

`-v`/`--verbose` logs at INFO on stderr (the command line, its exit code and time),
`--debug` also every command and netlink batch a backend runs, with its duration and exit
code (DEBUG, see `labs.cmdlog`); `--log-file PATH` appends everything down to DEBUG to PATH,
whatever stderr shows (opened through `twin.safeio`: a symbolic link there is refused),
progress lines too (on stderr they are printed already). Only the project's own loggers go
below WARNING: libraries keep to their warnings. Python warnings a library raises (a
matplotlib `UserWarning`, a deprecation) are logged as `py.warnings` records, which reach the
log file but stderr only with `--debug`: what a user reads there is the project's.
"""

from __future__ import annotations

import io
import logging
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path

from twin import safeio

PACKAGES = ("twin", "labs", "traffic", "validators")
"""The project's top-level packages: their loggers take the chosen level."""
FORMAT = "%(asctime)s.%(msecs)03d %(levelname)s %(name)s: %(message)s"
DATE = "%Y-%m-%dT%H:%M:%S"
log = logging.getLogger(__name__)


def configure(verbose: bool, debug: bool, log_file: str | None) -> None:
    """Send the project's log records to stderr at the chosen level and, when given, every
    record down to DEBUG to `log_file` (appended)."""
    shown = logging.DEBUG if debug else logging.INFO if verbose else logging.WARNING
    formatter = logging.Formatter(FORMAT, DATE)
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    handlers[0].setLevel(shown)
    handlers[0].addFilter(lambda record: not getattr(record, "printed", False))
    if not debug:
        handlers[0].addFilter(lambda record: record.name != "py.warnings")
    logging.captureWarnings(True)
    if log_file is not None:
        stream = io.TextIOWrapper(safeio.appending(Path(log_file)), line_buffering=True)
        handlers.append(logging.StreamHandler(stream))
        handlers[1].setLevel(logging.DEBUG)
    root = logging.getLogger()
    for handler in handlers:
        handler.setFormatter(formatter)
        root.addHandler(handler)
    lowest = logging.DEBUG if log_file is not None else shown
    for package in PACKAGES:
        logging.getLogger(package).setLevel(lowest)


def logged(verb: str, given: list[str], run: Callable[[], int]) -> int:
    """Run a verb, its command line and its end (exit code, duration) logged at INFO."""
    log.info("twin %s", shlex.join(given))
    started = time.monotonic()
    code = run()
    log.info("twin %s: exit %d in %.3f s", verb, code, time.monotonic() - started)
    return code
