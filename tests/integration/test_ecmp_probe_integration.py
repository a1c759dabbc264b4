"""`ecmp_spread` from an ECMP probe on a real twin of the reference fabric (8 leaves, each with
4 uplinks to 4 spines, 50 dual-homed servers): every leaf passes with the twin's own 5-tuple
hashing and fails with L3-only hashing (`fib_multipath_hash_policy=0` in every leaf), three
runs each, with 1, 2 and 3 address pairs per leaf (fewer than the uplinks: hashing on the
addresses alone leaves an uplink empty).

Each run is also measured here, independently of the validator: the tx_packets of every
leaf's uplink bundles (found from the design graph) read with `ip -s -j link` in the leaf's
namespace before and after the run, and the verdict of the same +-25 % bounds on them; and
the leaves' kernels are asked which uplink they pick for 200 of each pair's source ports
(`ip route get ... iif ... sport ...`): every uplink with 5-tuple hashing, one with L3-only.

Skipped, with the reason, without root or FRR.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from labs import registry
from tests.conftest import REPO, lab_name, root_and_frr, running_twin, wait_for
from twin.intent import fabric as intent
from twin.lab import directory as labdir
from twin.lab.directory import Lab
from twin.pytest_plugin import Twin
from twin.scenario import model as scenarios
from twin.scenario import plan, player
from twin.scenario.model import Traffic
from twin.verdict import verdict
from validators.result import Result, Status

pytestmark = [
    pytest.mark.skipif(root_and_frr() is not None, reason=str(root_and_frr())),
]

TOLERANCE = 0.25
PAIRS = (1, 2, 3)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Twin]:
    """examples/reference.yaml under a name of its own, deployed on netns."""
    out = tmp_path_factory.mktemp("reference") / "lab"
    fabric = yaml.safe_load((REPO / "examples" / "reference.yaml").read_text())
    fabric["name"] = lab_name()
    source = out.parent / "fabric.yaml"
    source.write_text(yaml.safe_dump(fabric))
    labdir.generate(intent.load(source), out, str(source))
    with running_twin(out) as twin:
        yield twin


def uplinks(lab: Lab) -> dict[str, set[str]]:
    """Per leaf, the Linux names of its links to spines (bundles), from the design graph."""
    out: dict[str, set[str]] = {}
    for _, _, e in lab.graph.edges(data=True):
        for side, other in (("a", "b"), ("b", "a")):
            roles = (lab.graph.nodes[e[side]]["role"], lab.graph.nodes[e[other]]["role"])
            if roles == ("leaf", "spine"):
                port = e.get(f"{side}_bundle") or e[f"{side}_port"]
                out.setdefault(e[side], set()).add(
                    lab.ifmap[e[side]].get(port, {}).get("netns", port)
                )
    return out


def tx_packets(lab: Lab) -> dict[str, dict[str, int]]:
    """Every leaf uplink's tx_packets now, read from the kernel."""
    counts: dict[str, dict[str, int]] = {}
    for leaf, names in uplinks(lab).items():
        done = subprocess.run(
            ["ip", "-n", f"{lab.name}.{leaf}", "-s", "-j", "link", "show"],
            capture_output=True,
            text=True,
            check=True,
        )
        links = {
            link["ifname"]: link["stats64"]["tx"]["packets"] for link in json.loads(done.stdout)
        }
        counts[leaf] = {name: int(links[name]) for name in names}
    return counts


def spread(before: dict[str, int], after: dict[str, int]) -> tuple[float, float]:
    """(max/mean, min/mean) of the uplinks' packets between two readings."""
    sent = [after[name] - before[name] for name in sorted(after)]
    mean = sum(sent) / len(sent)
    return max(sent) / mean, min(sent) / mean


def probe_run(twin: Twin, tmp: Path, pairs: int) -> tuple[dict[str, Result], dict[str, Any]]:
    """Play a probe-only scenario; ecmp_spread's results by leaf, and this test's own
    (max/mean, min/mean) per leaf from the kernel's counters."""
    wait_for(lambda: twin.established(), f"{twin.name} established", timeout=90)
    scenario = {
        "name": f"probe-{pairs}",
        "settle": 0.5,
        "traffic": [
            {"name": "probe", "at": 0, "duration": 2, "kind": "ecmp_probe", "pairs": pairs}
        ],
        "validate": {"ecmp_spread": {"tolerance": TOLERANCE}},
    }
    path = tmp / f"probe-{pairs}.yaml"
    path.write_text(yaml.safe_dump(scenario))
    lab = Lab.open(twin.path)
    before = tx_packets(lab)
    run_dir = player.play(lab, scenarios.load(path, lab), registry.of(lab))
    after = tx_packets(lab)
    _, results = verdict.report_run(run_dir)
    judged = {r.scope: r for r in results if r.validator == "ecmp_spread"}
    own = {leaf: spread(before[leaf], after[leaf]) for leaf in before}
    return judged, own


def kernel_ways(lab: Lab, pairs: int, tuples: int = 200) -> dict[str, list[set[str]]]:
    """Per leaf, per probe pair, the uplinks the leaf's kernel picks for the pair's first
    `tuples` source ports, asked of it here (`ip route get ... iif ... sport ...`)."""
    spec = Traffic.model_validate({"kind": "ecmp_probe", "pairs": pairs})
    ways: dict[str, list[set[str]]] = {}
    for p in plan.probe_pairs(lab, spec):
        nic = next(i for i in lab.host(p.src)["interfaces"] if i["name"] == p.nic)
        iif = lab.ifmap[p.leaf][nic["peer_port"]]["netns"]
        src, dst = (str(lab.host(s)["address"]).split("/")[0] for s in (p.src, p.dst))
        lines = "".join(
            f"route get {dst} from {src} iif {iif} ipproto udp sport {sport} dport 4791\n"
            for sport in range(p.sport, p.sport + tuples)
        )
        done = subprocess.run(
            ["ip", "-n", f"{lab.name}.{p.leaf}", "-j", "-batch", "-"],
            input=lines,
            capture_output=True,
            text=True,
            check=True,
        )
        answers = [json.loads(line)[0] for line in done.stdout.splitlines() if line.startswith("[")]
        assert len(answers) == tuples, done.stderr
        ways.setdefault(p.leaf, []).append({a["dev"] for a in answers})
    return ways


def reasons(judged: dict[str, Result]) -> dict[str, str]:
    return {scope: f"{r.status}: {r.reason}" for scope, r in judged.items()}


def within(ratios: tuple[float, float]) -> bool:
    high, low = ratios
    return high <= 1 + TOLERANCE and low >= 1 - TOLERANCE


def test_every_leaf_passes_with_5_tuple_hashing_every_run(reference: Twin, tmp_path: Path) -> None:
    leaves = reference.lab.nodes("leaf")
    for pairs in PAIRS:
        judged, own = probe_run(reference, tmp_path, pairs)
        assert judged["fib"].status is Status.PASS
        statuses = {leaf: judged[leaf].status for leaf in leaves}
        assert statuses == dict.fromkeys(leaves, Status.PASS), reasons(judged)
        for leaf, ways in kernel_ways(reference.lab, pairs).items():
            assert ways == [uplinks(reference.lab)[leaf]] * pairs  # every pair on every uplink
        for leaf in leaves:
            figures = judged[leaf].figures
            assert figures["flows"] == 3000 and figures["pairs"] == pairs
            assert within(own[leaf]), (pairs, leaf, own[leaf])
            high, low = own[leaf]
            assert abs(float(figures["max_over_mean"]) - high) < 0.05
            assert abs(float(figures["min_over_mean"]) - low) < 0.05


def test_every_leaf_fails_with_l3_only_hashing_every_run(reference: Twin, tmp_path: Path) -> None:
    leaves = reference.lab.nodes("leaf")

    def policy(value: int) -> None:
        for leaf in leaves:
            done = reference.exec(
                leaf, "sysctl", "-w", f"net.ipv4.fib_multipath_hash_policy={value}"
            )
            assert done.returncode == 0, done.stderr

    policy(0)
    try:
        runs = [probe_run(reference, tmp_path, pairs) for pairs in PAIRS]
        ways = kernel_ways(reference.lab, max(PAIRS))
    finally:
        policy(3)  # the twin's own: the 5-tuple
    # The leaves' own lookups: all of a pair's source ports take one uplink.
    assert {leaf: [len(w) for w in found] for leaf, found in ways.items()} == {
        leaf: [1] * max(PAIRS) for leaf in leaves
    }
    for pairs, (judged, own) in zip(PAIRS, runs, strict=True):
        statuses = {leaf: judged[leaf].status for leaf in leaves}
        assert statuses == dict.fromkeys(leaves, Status.FAIL), reasons(judged)
        for leaf in leaves:
            assert judged[leaf].findings[0].device == leaf
            # At most `pairs` of the 4 uplinks carry the probe: one has only control packets.
            assert not within(own[leaf]) and own[leaf][1] < 0.1, (pairs, leaf, own[leaf])
            assert float(judged[leaf].figures["min_over_mean"]) < 0.1
