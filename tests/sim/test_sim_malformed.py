"""A malformed experiment is refused with one line naming the file and key, exit status 2,
whatever is wrong with it: every value of the example files replaced by values of the wrong
type, sign or size (a quoted PG number, which YAML makes a string, is read as the number)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from labs.sim import ExperimentError, native
from labs.sim.build import build
from labs.sim.loader import experiment
from twin.cli.verbs.sim import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"
FUZZED = ["ring_three_flows", "pfc_incast_8", "dcqcn_incast_2_delay", "backup_in_lossy"]
BAD: list[Any] = ["3", -1, [], {}, None, 1.5, True, 10**12]


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every key and index of a parsed document, depth first."""
    items = (
        node.items()
        if isinstance(node, dict)
        else enumerate(node)
        if isinstance(node, list)
        else []
    )
    for key, value in items:
        yield (*prefix, key)
        yield from paths(value, (*prefix, key))


def replaced(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    out = copy.deepcopy(doc)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


@pytest.mark.parametrize("name", FUZZED)
def test_every_wrong_value_is_one_line(name: str) -> None:
    doc = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())
    refused = 0
    for path in paths(doc):
        for bad in BAD:
            try:
                built = build(experiment(replaced(doc, path, bad)), 1)
            except ExperimentError as exc:
                assert "\n" not in str(exc) and str(exc), (path, bad)
                refused += 1
            else:
                native.library().sim_free(built.handle)
    assert refused > 0


def test_a_quoted_pg_number_is_the_pg() -> None:
    exp = experiment({"qos": {"pgs": {"3": {"static_threshold": "10KB"}}}, "hosts": ["a"]})
    assert exp.hosts[0].qos.pg(3).static_threshold == 10_000


@pytest.mark.parametrize(
    ("qos", "named"),
    [
        ({"pgs": {3: {"static_threshold": -1}}}, "pgs.3"),
        ({"pgs": {"x": {}}}, "qos.pgs"),
        ({"queues": {3: {"kmin": "200KB", "kmax": "5KB"}}}, "queues.3"),
        ({"pfc_response_quanta": -5}, "pfc_response_quanta"),
    ],
)
def test_the_cli_refuses_with_one_line_and_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], qos: dict[str, Any], named: str
) -> None:
    doc = yaml.safe_load((EXAMPLES / "pfc_incast_8.yaml").read_text())
    doc["qos"] = {**doc.get("qos", {}), **qos}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    out = tmp_path / "out.json"
    assert main([str(path), "-o", str(out), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.yaml" in err and named in err, err
    assert not out.exists()
