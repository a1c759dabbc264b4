"""The FIB computed from configs is the one a running twin converges to, with all links up and
after links fail: `twin.model.routing.Routing` against the backend observer's `fib()`, on
every backend (netns: real FRR and kernel, root needed; fake: the model itself)."""

from __future__ import annotations

import time

import pytest

from labs.backend import Fault
from twin.model.fib import Fib, Link, applied
from twin.model.routing import Routing
from twin.model.wiring import Wiring, links
from twin.pytest_plugin import Twin

DEADLINE_S = 20.0


@pytest.fixture
def twin(any_twin: Twin) -> Twin:
    """The small lab on the backend under test."""
    return any_twin


def settles_to(twin: Twin, expected: Fib) -> tuple[Fib, float]:
    """The switches' live FIB once it equals `expected` (ECMP order aside), or at the deadline;
    and the seconds it took."""
    lab = twin.lab
    start = time.monotonic()
    want = {s: {p: set(h) for p, h in expected[s].items()} for s in lab.switches()}
    while True:
        got = twin.fib()
        same = {s: {p: set(h) for p, h in got[s].items()} for s in lab.switches()} == want
        if same or time.monotonic() - start > DEADLINE_S:
            return got, time.monotonic() - start


def test_live_fib_is_the_one_computed_from_configs(twin: Twin) -> None:
    expected = Routing(Wiring(twin.lab)).fib
    got, _ = settles_to(twin, expected)
    for switch in twin.lab.switches():
        assert {p: set(h) for p, h in got[switch].items()} == {
            p: set(h) for p, h in expected[switch].items()
        }, switch


@pytest.mark.parametrize(
    "ends",
    [[("leaf1", "spine1")], [("leaf1", "spine1"), ("server1", "leaf1")], [("leaf3", "spine2")]],
)
def test_live_fib_after_failures_is_the_one_computed(
    twin: Twin, ends: list[tuple[str, str]]
) -> None:
    routing = Routing(Wiring(twin.lab))
    failed: list[Link] = [next(x for x in links(twin.lab) if {x[0], x[2]} == set(e)) for e in ends]
    expected = applied(routing.fib, routing.after(failed))
    try:
        for a, b in ends:
            twin.backend.fault(twin.lab, Fault("link-down", link=f"{a}:{b}"))
        got, _ = settles_to(twin, expected)
    finally:
        for a, b in ends:
            twin.backend.fault(twin.lab, Fault("link-up", link=f"{a}:{b}"))
    for switch in twin.lab.switches():
        assert {p: set(h) for p, h in got[switch].items()} == {
            p: set(h) for p, h in expected[switch].items()
        }, switch
    settles_to(twin, routing.fib)
