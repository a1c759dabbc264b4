"""The one error of a twin that did not come up in time, shared by the backends."""

from __future__ import annotations

from twin.errors import LabError

SHOWN = 5


def not_ready(lab: str, verb: str, timeout: float, missing: list[str]) -> LabError:
    """`lab LAB did not VERB in T s: ...`, naming the first five things still missing.

    >>> str(not_ready("small", "converge", 60, [f"leaf{i}: no route" for i in range(7)]))[-42:]
    'leaf3: no route; leaf4: no route (+2 more)'
    """
    more = f" (+{len(missing) - SHOWN} more)" if len(missing) > SHOWN else ""
    return LabError(
        f"lab {lab} did not {verb} in {timeout:.0f} s: " + "; ".join(missing[:SHOWN]) + more
    )
