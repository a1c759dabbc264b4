"""The FIB computed from configs is the one a live twin converges to (netns: real FRR and
kernel), with all links up and after links fail: `twin.model.routing.Routing` against the
backend observer's `fib()`. Needs root and FRR."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from labs import registry
from labs.backend import Fault
from twin.labdir import Lab
from twin.model.fib import Fib, Link
from twin.model.routing import Routing
from twin.model.wiring import Wiring, links
from validators.examples import generate

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
    pytest.mark.skipif(shutil.which("vtysh") is None, reason="FRR is not installed"),
]

SMALL = Path(__file__).resolve().parent.parent / "examples" / "small.yaml"
DEADLINE_S = 20.0
BACKEND = registry.get("netns")


@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """The small lab, named for this process, running for the module and always destroyed."""
    lab = generate(tmp_path_factory.mktemp("live") / "lab", SMALL, name=f"fib{os.getpid() % 10**8}")
    try:
        BACKEND.deploy(lab, lambda _: None)
        yield lab
    finally:
        BACKEND.destroy(lab)


def live_fib(lab: Lab, wiring: Wiring) -> Fib:
    return BACKEND.observer(lab).fib()


def settles_to(lab: Lab, wiring: Wiring, expected: Fib) -> tuple[Fib, float]:
    """The switches' live FIB once it equals `expected` (ECMP order aside), or at the deadline;
    and the seconds it took."""
    start = time.monotonic()
    want = {s: {p: set(h) for p, h in expected[s].items()} for s in lab.switches()}
    while True:
        got = live_fib(lab, wiring)
        same = {s: {p: set(h) for p, h in got[s].items()} for s in lab.switches()} == want
        if same or time.monotonic() - start > DEADLINE_S:
            return got, time.monotonic() - start


def test_live_fib_is_the_one_computed_from_configs(twin: Lab) -> None:
    wiring = Wiring(twin)
    expected = Routing(wiring).fib
    got, _ = settles_to(twin, wiring, expected)
    for switch in twin.switches():
        assert {p: set(h) for p, h in got[switch].items()} == {
            p: set(h) for p, h in expected[switch].items()
        }, switch


@pytest.mark.parametrize(
    "ends",
    [[("leaf1", "spine1")], [("leaf1", "spine1"), ("server1", "leaf1")], [("leaf3", "spine2")]],
)
def test_live_fib_after_failures_is_the_one_computed(
    twin: Lab, ends: list[tuple[str, str]]
) -> None:
    wiring = Wiring(twin)
    routing = Routing(wiring)
    failed: list[Link] = [next(x for x in links(twin) if {x[0], x[2]} == set(e)) for e in ends]
    expected = {n: dict(r) for n, r in routing.fib.items()}
    for node, changes in routing.after(failed).items():
        for prefix, hops in changes.items():
            if hops is None:
                del expected[node][prefix]
            else:
                expected[node][prefix] = hops
    try:
        for a, b in ends:
            BACKEND.fault(twin, Fault("link-down", link=f"{a}:{b}"))
        got, _ = settles_to(twin, wiring, expected)
    finally:
        for a, b in ends:
            BACKEND.fault(twin, Fault("link-up", link=f"{a}:{b}"))
    for switch in twin.switches():
        assert {p: set(h) for p, h in got[switch].items()} == {
            p: set(h) for p, h in expected[switch].items()
        }, switch
    settles_to(twin, wiring, routing.fib)
