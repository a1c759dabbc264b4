"""One sonic-mgmt test on the twin: what it checks, its counterpart, and its broken lab."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from twin.qostest.dut import Dut
from twin.render.config_db import ConfigDb
from validators.result import Finding, Result, Status


@dataclass(frozen=True)
class Check:
    """One expected-against-seen comparison."""

    what: str
    expected: str
    seen: str
    ok: bool


def within(what: str, seen: float, low: float, high: float, unit: str = "") -> Check:
    """seen in [low, high]."""
    return Check(what, f"{low:g}..{high:g}{unit}", f"{seen:g}{unit}", low <= seen <= high)


def equal(what: str, seen: object, expected: object) -> Check:
    """seen == expected."""
    return Check(what, str(expected), str(seen), seen == expected)


@dataclass(frozen=True)
class QosTest:
    """A test: `run` returns its checks on a DUT; `breaks` edits a config_db into the lab
    the test is meant to catch (`broken` says how); `unobservable`, when set, says why the
    twin cannot run it yet."""

    name: str
    counterpart: str
    """sonic-mgmt file::function (or class) it reproduces."""
    run: Callable[[Dut], list[Check]]
    breaks: Callable[[ConfigDb], None]
    broken: str
    unobservable: str = ""
    tags: tuple[str, ...] = field(default_factory=tuple)

    def judge(self, dut: Dut, scope: str) -> Result:
        """Run and judge on this DUT; the result's validator is the test's name."""
        if self.unobservable:
            return Result(
                self.name,
                scope,
                Status.NOT_OBSERVABLE,
                self.unobservable,
                {"counterpart": self.counterpart},
            )
        checks = self.run(dut)
        figures: dict[str, int | float | str] = {"counterpart": self.counterpart}
        for c in checks:
            figures[c.what] = f"expected {c.expected}, seen {c.seen}"
        bad = [c for c in checks if not c.ok]
        findings = [
            Finding(dut.name, f"{c.what}: expected {c.expected}, seen {c.seen}", dut.port(0))
            for c in bad
        ]
        status = Status.FAIL if bad or not checks else Status.PASS
        head = f"{len(checks) - len(bad)} of {len(checks)} checks pass"
        detail = f"; {findings[0].message}" if findings else ""
        return Result(self.name, scope, status, head + detail, figures, findings)


def _no_checks(_dut: Dut) -> list[Check]:
    return []


def _unchanged(_db: ConfigDb) -> None:
    pass


def hidden(name: str, counterpart: str, reason: str) -> QosTest:
    """A test the twin cannot run yet: judged not observable, with `reason`."""
    return QosTest(name, counterpart, _no_checks, _unchanged, "none", unobservable=reason)
