"""One sonic-mgmt test on the twin: what it checks, its counterpart, and its broken lab."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from labs.sim.qostest.dut import Dut
from twin.render.config_db import ConfigDb

PASS, FAIL, NOT_OBSERVABLE = "pass", "fail", "not-observable"


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
class Outcome:
    """A test's verdict on one DUT (`twin qos-test` turns it into a validator Result): its
    status (pass, fail, not-observable), reason, figures (the counterpart, then each check as
    expected and seen) and the failed checks."""

    test: str
    scope: str
    status: str
    reason: str
    figures: dict[str, str]
    failed: list[str]
    device: str
    port: str


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

    def judge(self, dut: Dut, scope: str) -> Outcome:
        """Run and judge on this DUT."""
        figures = {"counterpart": self.counterpart}
        if self.unobservable:
            return Outcome(
                self.name,
                scope,
                NOT_OBSERVABLE,
                self.unobservable,
                figures,
                [],
                dut.name,
                dut.port(0),
            )
        checks = self.run(dut)
        for c in checks:
            figures[c.what] = f"expected {c.expected}, seen {c.seen}"
        failed = [f"{c.what}: expected {c.expected}, seen {c.seen}" for c in checks if not c.ok]
        status = FAIL if failed or not checks else PASS
        reason = f"{len(checks) - len(failed)} of {len(checks)} checks pass"
        reason += f"; {failed[0]}" if failed else ""
        return Outcome(self.name, scope, status, reason, figures, failed, dut.name, dut.port(0))


def _no_checks(_dut: Dut) -> list[Check]:
    return []


def _unchanged(_db: ConfigDb) -> None:
    pass


def hidden(name: str, counterpart: str, reason: str) -> QosTest:
    """A test the twin cannot run yet: judged not observable, with `reason`."""
    return QosTest(name, counterpart, _no_checks, _unchanged, "none", unobservable=reason)
