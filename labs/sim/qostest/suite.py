"""The suite: every test in order, selection by name, and a run on a lab (healthy, or each
test on its own broken variant)."""

from __future__ import annotations

from collections.abc import Sequence

from labs.sim.qostest import buffers, ecn, hashing, m2o, mapping, pause, pfcwd
from labs.sim.qostest.case import NOT_OBSERVABLE, Outcome, QosTest
from labs.sim.qostest.dut import Dut
from twin.errors import InputError
from twin.lab.directory import Lab

TESTS: list[QosTest] = [
    *buffers.TESTS,
    *mapping.TESTS,
    *pause.TESTS,
    *m2o.TESTS,
    *ecn.TESTS,
    *pfcwd.TESTS,
    *hashing.TESTS,
]


def select(names: Sequence[str]) -> list[QosTest]:
    """The named tests in suite order (all when none is named)."""
    known = {t.name: t for t in TESTS}
    for name in names:
        if name not in known:
            raise InputError("TEST", name, f"no such test (known: {', '.join(known)})")
    return [t for t in TESTS if not names or t.name in names]


def run(lab: Lab, tests: Sequence[QosTest], broken: bool = False) -> list[Outcome]:
    """Each test on the lab's DUT, or with `broken` on the DUT its `breaks` edits."""
    healthy = Dut.of_lab(lab)
    out = []
    for test in tests:
        dut = healthy.variant(test.breaks) if broken else healthy
        scope = f"{dut.name} broken: {test.broken}" if broken else dut.name
        out.append(test.judge(dut, scope))
    return out


def expected_vs_seen(results: Sequence[Outcome]) -> str:
    """Each test's status and counterpart, then its checks, one a line."""
    lines = []
    for r in results:
        lines.append(f"{r.test:34} {r.status:14} {r.figures['counterpart']}")
        if r.status == NOT_OBSERVABLE:
            lines.append(f"    not observable: {r.reason}")
        lines += [f"    {k}: {v}" for k, v in r.figures.items() if k != "counterpart"]
    return "\n".join(lines)
