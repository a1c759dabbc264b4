"""Everything a scenario says is bounded and type-checked before a twin is deployed for it.

Each case was accepted before: a time that is infinite or beyond any run, a daemon that FRR
does not have, a link whose second half names nothing, a threshold that is not a number, or
traffic a 2-core machine cannot send (64 QPs x 200,000 pps of all-to-all for an hour).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import lab_name, write_lab
from twin.cli import main as cli
from twin.cli.verbs.run import REFERENCE
from twin.errors import InputError
from twin.intent import fabric
from twin.lab import directory as labdir
from twin.lab.directory import Lab
from twin.scenario import model as scenarios

GOOD: dict[str, Any] = {
    "name": "good",
    "traffic": [
        {"at": 0, "duration": 3, "kind": "all_reduce", "servers": "all", "qps": 2},
        {"at": 1, "duration": 1, "kind": "backup", "src": "server1", "dst": "server3"},
    ],
    "faults": [
        {"at": 1, "fault": "link-down", "link": "leaf1:spine1"},
        {"at": 2, "fault": "daemon-kill", "node": "spine1", "daemon": "bfdd"},
    ],
    "capture": ["leaf1:Ethernet0"],
    "validate": {"failover": {"max_loss_ms": 2000}, "ecmp_spread": {"max_over_mean": 1.5}},
}


def changed(path: str, value: Any) -> dict[str, Any]:
    """GOOD with one value replaced (`path` like "traffic.1.dst")."""
    data: dict[str, Any] = json.loads(json.dumps(GOOD))
    *parents, last = path.split(".")
    node: Any = data
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node[p]
    node[int(last) if isinstance(node, list) else last] = value
    return data


CASES: dict[str, tuple[dict[str, Any], str]] = {
    "at inf": (changed("traffic.0.at", float("inf")), "traffic.0.at: "),
    "at 1e308": (changed("faults.0.at", 1e308), "faults.0.at: "),
    "duration nan": (changed("traffic.0.duration", float("nan")), "traffic.0.duration: "),
    "a payload not whole 32-bit words": (changed("traffic.0.payload", 65), "traffic.0.payload: "),
    "an unknown daemon": (changed("faults.1.daemon", "sshd"), "faults.1.daemon: "),
    "a link to no port": (changed("faults.0.link", "leaf1:nowhere"), "faults.0.link: "),
    "a capture of no port": (changed("capture.0", "leaf1:Ethernet999"), "capture.0: "),
    "a threshold not a number": (
        changed("validate.ecmp_spread.max_over_mean", "é日本"),
        "validate.ecmp_spread.max_over_mean: ",
    ),
    "a threshold infinite": (
        changed("validate.failover.max_loss_ms", float("inf")),
        "validate.failover.max_loss_ms: ",
    ),
    "more traffic than the machine sends": (
        changed(
            "traffic.0",
            {
                "at": 0,
                "duration": 3600,
                "kind": "all_to_all",
                "servers": "all",
                "qps": 64,
                "pps": 200000,
            },
        ),
        "traffic.0: ",
    ),
    "a flap that never ends": (
        changed(
            "faults.0", {"at": 0, "fault": "link-flap", "link": "leaf1:spine1", "count": 10**9}
        ),
        "faults.0",
    ),
    "a backup to itself": (changed("traffic.1.dst", "server1"), "traffic.1: "),
    "a server twice": (changed("traffic.0.servers", ["server1", "server1"]), "traffic.0: "),
    "a key that is a newline": ({**GOOD, "\n": 1}, "\\n: unknown key"),
}


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    """The small lab with two leaf pairs."""
    return Lab.open(write_lab(tmp_path_factory.mktemp("scenarios") / "lab", lab_name()))


def test_the_good_scenario_loads(lab: Lab, tmp_path: Path) -> None:
    path = tmp_path / "good.yaml"
    path.write_text(yaml.safe_dump(GOOD))
    assert scenarios.load(path, lab).faults[1].daemon == "bfdd"


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    """The reference fabric (the default scenario names its servers)."""
    data = yaml.safe_load(REFERENCE.read_text())
    data["name"] = lab_name()
    out = tmp_path_factory.mktemp("reference") / "lab"
    labdir.generate(fabric.parse(data, str(REFERENCE)), out, str(REFERENCE))
    return Lab.open(out)


@pytest.mark.parametrize("example", sorted(Path("examples/scenarios").glob("*.yaml")), ids=str)
def test_the_example_scenarios_load(lab: Lab, reference: Lab, example: Path) -> None:
    scenarios.load(example, reference if example.name == "default.yaml" else lab)


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_a_scenario_out_of_bounds_is_refused(lab: Lab, tmp_path: Path, case: str) -> None:
    data, expected = CASES[case]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    with pytest.raises(InputError) as refused:
        scenarios.load(path, lab)
    message = str(refused.value)
    assert message.startswith(f"{path}: ") and expected in message and "\n" not in message


FAULT_ARGS = {
    "a delay that is not finite": (["link-down", "leaf1:spine1", "--delay-ms", "nan"], "delay_ms"),
    "a period that is not finite": (["link-flap", "leaf1:spine1", "--period", "nan"], "period"),
    "a flap that never ends": (
        ["link-flap", "leaf1:spine1", "--period", "1", "--count", "99999999999"],
        "count",
    ),
    "a loss that is not finite": (["loss", "leaf1:spine1", "inf"], "percent"),
    "a rate of zero": (["rate", "leaf1:spine1", "0"], "mbit"),
    "a daemon FRR does not run": (["daemon-kill", "leaf1", "rm -rf"], "daemon"),
}


@pytest.mark.parametrize("case", FAULT_ARGS, ids=list(FAULT_ARGS))
def test_twin_fault_takes_a_scenarios_bounds(
    lab: Lab, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, key = FAULT_ARGS[case]
    assert cli.main(["deploy", str(lab.path), "--backend", "fake"]) == 0
    capsys.readouterr()
    try:
        assert cli.main(["fault", str(lab.path), "--backend", "fake", *argv]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"twin: fault {argv[0]}: {key}: "), err
    finally:
        assert cli.main(["destroy", str(lab.path), "--backend", "fake"]) == 0
