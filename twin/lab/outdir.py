"""Output directories a verb creates for its reports (`twin run --out`, `twin diff --out`,
`twin drill --out`): fresh, never an existing directory with something in it, never a link."""

from __future__ import annotations

from pathlib import Path

from twin import safeio
from twin.errors import InputError


def check(path: Path, option: str = "--out") -> None:
    """Refuse a path that exists and is not an empty directory (or is a link), before any
    work starts.

    >>> import tempfile; d = Path(tempfile.mkdtemp())
    >>> check(d / "new"); check(d); _ = (d / "x").write_text("")
    >>> try:
    ...     check(d)
    ... except InputError as e:
    ...     print(e.problem)
    exists and is not empty (give a new directory)
    """
    if path.is_symlink():
        raise InputError(str(path), option, "is a symbolic link (give a new directory)")
    if path.exists() and not path.is_dir():
        raise InputError(str(path), option, "exists and is not a directory")
    if path.is_dir() and any(path.iterdir()):
        raise InputError(str(path), option, "exists and is not empty (give a new directory)")


def create(path: Path, option: str = "--out") -> Path:
    """Check `path`, then create it (and its parents)."""
    check(path, option)
    safeio.mkdir(path)
    return path


def check_file(path: Path, option: str) -> None:
    """Refuse a report file's path that is a link or a directory (a file is replaced)."""
    if path.is_symlink() or path.is_dir():
        raise InputError(str(path), option, "is a link or a directory (give a file's path)")
