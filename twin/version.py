"""The version of fabric twin (written once, in pyproject.toml) and the facts a run or a
report is stamped with, so that a result says what produced it."""

from __future__ import annotations


def version() -> str:
    """The installed package's version (pyproject.toml's); read when asked (reading package
    metadata costs more than the rest of `twin --help`)."""
    from importlib import metadata

    try:
        return metadata.version("fabric-twin")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def stamp(backend: str | None = None) -> dict[str, str]:
    """What produced a result: the twin's version, the backend, and the platform facts the
    run used (kernel, Python)."""
    import platform

    facts = {
        "twin_version": version(),
        "kernel": platform.release(),
        "python": platform.python_version(),
    }
    return {**facts, "backend": backend} if backend else facts
