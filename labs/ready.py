"""What a twin that did not come up in time lacked, said one way by every backend."""

from __future__ import annotations

from twin.errors import LabError

SHOWN = 5


def unready(lab: str, verb: str, timeout: float, missing: list[str]) -> str:
    """`lab LAB did not VERB in T s: ...`, naming the first five things still missing.

    >>> unready("small", "converge", 60, [f"leaf{i}: no route" for i in range(7)])[-42:]
    'leaf3: no route; leaf4: no route (+2 more)'
    """
    more = f" (+{len(missing) - SHOWN} more)" if len(missing) > SHOWN else ""
    return f"lab {lab} did not {verb} in {timeout:.0f} s: " + "; ".join(missing[:SHOWN]) + more


def not_ready(lab: str, verb: str, timeout: float, missing: list[str]) -> LabError:
    """`unready` as the error of a twin that cannot be used."""
    return LabError(unready(lab, verb, timeout, missing))
