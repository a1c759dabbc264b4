"""twin.cli.logs: a library's Python warning reaches the log file, not stderr (but with
--debug)."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from twin.cli import logs


@pytest.fixture
def restored() -> Iterator[None]:
    """The root logger's handlers and warning capture as they were, after the test."""
    root = logging.getLogger()
    before = list(root.handlers)
    try:
        yield
    finally:
        for handler in set(root.handlers) - set(before):
            root.removeHandler(handler)
        logging.captureWarnings(False)


def warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("Tight layout not applied", UserWarning, stacklevel=1)


@pytest.mark.usefixtures("restored")
def test_a_library_warning_goes_to_the_log_file_not_stderr(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log = tmp_path / "twin.log"
    logs.configure(verbose=True, debug=False, log_file=str(log))
    warn()
    logging.getLogger("twin.cli").warning("twin's own warning")
    stderr = capsys.readouterr().err
    assert "Tight layout" not in stderr and "twin's own warning" in stderr
    assert "WARNING py.warnings: " in log.read_text() and "Tight layout" in log.read_text()


@pytest.mark.usefixtures("restored")
def test_debug_shows_library_warnings_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure(verbose=False, debug=True, log_file=None)
    warn()
    assert "UserWarning: Tight layout not applied" in capsys.readouterr().err
