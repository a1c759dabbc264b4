"""Errors the user can act on.

Every error the tool reports about its input names the file, the key and what is wrong, in
one line. The tree::

    TwinError                  base of every error the CLI turns into one line and exit 2
    ├── InputError             a file the user wrote (intent, scenario, lab config) is wrong
    ├── DesignError            the intent is valid but no fabric satisfies it
    └── LabError               a lab directory or a running twin is not in the expected state

    InternalError              a bug of the tool (a validator or verb crashed): one line, exit 3,
                               never a verdict
"""

from __future__ import annotations


def one_line(message: str) -> str:
    r"""The message with characters that are not printable (a newline in a key of the user's
    file) shown escaped.

    >>> print(one_line("fabric.yaml: \n: unknown key"))
    fabric.yaml: \n: unknown key
    """
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)


class TwinError(Exception):
    """Base of every error reported to the user as one line (what is not printable in it,
    escaped)."""

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))


class InputError(TwinError):
    """A file written by the user is wrong: names the file, the key and the problem."""

    def __init__(self, file: str, key: str, problem: str) -> None:
        self.file, self.key, self.problem = file, key, problem
        super().__init__(f"{file}: {key}: {problem}" if key else f"{file}: {problem}")


class DesignError(InputError):
    """The intent is well-formed but describes an impossible fabric."""


class LabError(TwinError):
    """A lab directory or a running twin is missing or in the wrong state."""


class InternalError(Exception):
    """A bug of the tool itself (a validator raised): reported as one line, exit 3."""

    def __init__(self, where: str, exc: BaseException) -> None:
        super().__init__(one_line(f"internal error in {where}: {type(exc).__name__}: {exc}"))
