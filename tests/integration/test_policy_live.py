"""Routing policy: the routing model and the live FRR agree. examples/small.yaml with an
outbound prefix-list on leaf1 (its own subnet not announced) and an outbound route-map on
leaf3 (its AS prepended twice) deployed on netns: every switch's live FIB is the model's,
and the spines reach each of those subnets through the MLAG peer only."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from ipaddress import IPv4Network
from pathlib import Path

import pytest

from tests.conftest import lab_name, root_and_frr, running_twin, wait_for, write_lab
from twin.lab.directory import Lab
from twin.model.routing import Routing
from twin.model.wiring import Wiring
from twin.pytest_plugin import Twin
from validators.dynamic.fib_agreement import differences
from validators.examples import add_frr_policy as bind


def subnet(lab: Lab, leaf: str) -> IPv4Network:
    return IPv4Network(lab.graph.nodes[leaf]["subnet"])


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Twin]:
    reason = root_and_frr()
    if reason:
        pytest.skip(reason)
    path = write_lab(tmp_path_factory.mktemp("policy-live") / "lab", lab_name("pol"))
    lab = Lab.open(path)
    own = subnet(lab, "leaf1")
    bind(
        lab,
        "leaf1",
        "  neighbor FABRIC prefix-list NO-OWN out",
        f"ip prefix-list NO-OWN seq 5 deny {own}\nip prefix-list NO-OWN seq 10 permit any\n",
    )
    asn = lab.graph.nodes["leaf3"]["asn"]
    bind(
        lab,
        "leaf3",
        "  neighbor FABRIC route-map LONGER out",
        f"route-map LONGER permit 10\n set as-path prepend {asn} {asn}\nexit\n",
    )
    with running_twin(path) as twin:
        yield twin


def test_the_live_fibs_are_the_models_under_policy(live: Twin) -> None:
    model = Routing(Wiring(live.lab)).fib
    for leaf, peer in (("leaf1", "leaf2"), ("leaf3", "leaf4")):
        prefix = subnet(live.lab, leaf)
        for spine in live.lab.nodes("spine"):
            assert {h.node for h in model[spine][prefix]} == {peer}
    # the deploy waits for the leaves' server subnets; the other routes follow within seconds
    wait_for(lambda: not differences(live.lab, live.fib(), model), "the model's FIB", 20)


def test_without_the_policy_the_model_disagrees(live: Twin, tmp_path: Path) -> None:
    """Not vacuous: the model of the same configs without the two bindings (what the model
    computed before it read policy) differs from the live FIB at the spines."""
    copy = tmp_path / "unbound"
    shutil.copytree(live.lab.path / "configs", copy / "configs")
    for name in ("design.json", "ifmap.json", "fabric.yaml"):
        shutil.copy(live.lab.path / name, copy / name)
    for leaf in ("leaf1", "leaf3"):
        conf = copy / "configs" / leaf / "frr.conf"
        lines = conf.read_text().splitlines()
        conf.write_text("".join(f"{x}\n" for x in lines if " out" not in x or "FABRIC" not in x))
    policed = Routing(Wiring(live.lab)).fib
    wait_for(lambda: not differences(live.lab, live.fib(), policed), "the model's FIB", 20)
    found = differences(live.lab, live.fib(), Routing(Wiring(Lab.open(copy))).fib)
    assert {f.device for f in found} == set(live.lab.nodes("spine"))
