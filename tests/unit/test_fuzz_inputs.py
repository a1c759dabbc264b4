"""Property: no input makes a tool trace back, write outside its output or leave half of a lab.

Hypothesis edits a fabric file, a scenario and the files of a lab directory (one value
replaced or removed anywhere in the document, or the whole file replaced by arbitrary text)
and runs what reads them: `twin generate`, the scenario loader, `twin validate` and the
checks `twin deploy` runs before it creates anything (the pre-deploy check, then the plan it
builds from the configs; nothing is deployed). Each must end with exit code 0 or 2 (1 is a
validator's failing verdict), a refusal must be one line on stderr, and nothing may appear
outside the output directory. The files of a running twin (`state.json`, `events.jsonl`) and
of a played run (run.json, failover_probes.json, counters, flows, BGP, FIB snapshots, events),
a run with a fault its probes crossed, are edited the same way and read by `twin destroy` and
`twin report`. Values include an integer of more digits than Python converts. Example counts
are kept small (20) so this runs in seconds, and drawn from a seed fixed per test, so the suite
runs the same examples every time (a CI run is red only for a change, never for a new draw);
`TWIN_FUZZ_EXAMPLES` sets the count and draws at random (bench/bench_fuzz.py explores there),
and `TWIN_FUZZ_CODES` names a file each example's exit code is appended to.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labs import state
from labs.netns.plan import build
from tests.conftest import SMALL, lab_name, write_lab
from twin.cli import main as cli
from twin.errors import TwinError
from twin.lab import check as labcheck
from twin.lab.directory import Lab
from twin.scenario import model as scenarios

FUZZ = settings(
    max_examples=int(os.environ.get("TWIN_FUZZ_EXAMPLES", "20")),
    derandomize="TWIN_FUZZ_EXAMPLES" not in os.environ,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
BIG_INTEGER = "big-integer-of-5000-digits"
"""A value written as an integer of 5,000 digits (more than Python converts by default)."""
SCALARS = st.one_of(
    st.just(BIG_INTEGER),
    st.none(),
    st.booleans(),
    st.integers(-3, 70),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["leaf1", "spine1", "server1", "nic0", "Ethernet0", "10.0.0.1/31", "all"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
TEXT = st.one_of(st.text(max_size=200), st.binary(max_size=200).map(lambda b: b.decode("latin-1")))


def _mutate(data: st.DataObject, document: Any) -> Any:
    """The document with one value somewhere replaced (or a key dropped)."""
    document = json.loads(json.dumps(document))
    holder: Any = None
    key: Any = None
    node = document
    while isinstance(node, dict | list) and node and data.draw(st.booleans(), label="deeper"):
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        holder, key = node, data.draw(st.sampled_from(keys), label="key")
        node = node[key]
    if holder is None:
        return data.draw(VALUES, label="document")
    if isinstance(holder, dict) and data.draw(st.booleans(), label="drop"):
        del holder[key]
    else:
        holder[key] = data.draw(VALUES, label="value")
    return document


def _edited_text(data: st.DataObject, document: Any, as_yaml: bool) -> str:
    if data.draw(st.integers(0, 4), label="whole file") == 0:
        return data.draw(TEXT, label="text")
    changed = _mutate(data, document)
    text = yaml.safe_dump(changed, allow_unicode=True) if as_yaml else json.dumps(changed)
    return text.replace(f'"{BIG_INTEGER}"', "7" * 5000).replace(BIG_INTEGER, "7" * 5000)


def _one_line_refusal(code: int, err: str) -> None:
    codes = os.environ.get("TWIN_FUZZ_CODES")
    if codes:
        with open(codes, "a") as out:
            out.write(f"{code}\n")
    assert code in (0, 1, 2), code
    if code == 2:
        assert err.count("\n") == 1 and err.startswith("twin: "), err


def _listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@given(data=st.data())
@FUZZ
def test_generate_never_traces_back(
    data: st.DataObject,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    work = tmp_path / "generate"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    fabric = yaml.safe_load(SMALL.read_text())
    source = work / "fabric.yaml"
    source.write_text(_edited_text(data, fabric, as_yaml=True))
    out = work / "out" / "lab"
    monkeypatch.chdir(work)
    code = cli.main(["generate", str(source), "-o", str(out)])
    _one_line_refusal(code, capsys.readouterr().err)
    made = _listing(work)
    if code == 0:
        assert all(p in ("fabric.yaml", "out") or p.startswith("out/lab") for p in made), made
    else:
        assert made in (["fabric.yaml"], ["fabric.yaml", "out"]), made


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated lab directory, copied for each example."""
    return write_lab(tmp_path_factory.mktemp("fuzz") / "lab", lab_name())


SCENARIO: dict[str, Any] = {
    "name": "fuzz",
    "traffic": [
        {"at": 0, "duration": 3, "kind": "all_reduce", "servers": "all", "qps": 2},
        {"at": 1, "duration": 1, "kind": "backup", "src": "server1", "dst": "server3"},
    ],
    "faults": [{"at": 1, "fault": "link-down", "link": "leaf1:spine1"}],
    "capture": ["leaf1:Ethernet0"],
    "validate": {"failover": {"max_loss_ms": 2000}, "ecmp_spread": {"max_over_mean": 1.5}},
}


@given(data=st.data())
@FUZZ
def test_a_scenario_is_loaded_or_refused_in_one_line(
    data: st.DataObject, pristine: Path, tmp_path: Path
) -> None:
    path = tmp_path / "scenario.yaml"
    path.write_text(_edited_text(data, SCENARIO, as_yaml=True))
    try:
        scenarios.load(path, Lab.open(pristine))
    except TwinError as exc:
        assert str(exc).startswith(f"{path}: ")
        _one_line_refusal(2, f"twin: {exc}\n")
    else:
        _one_line_refusal(0, "")


LAB_FILES = [
    "fabric.yaml",
    "ifmap.json",
    "design.json",
    "configs/leaf1/config_db.json",
    "configs/spine1/config_db.json",
    "configs/server1/host.json",
    "configs/leaf1/frr.conf",
]


def _edited_file(data: st.DataObject, path: Path) -> str:
    """The file's text with one edit: YAML and JSON documents by value, frr.conf by line (one
    replaced or dropped), any of them possibly replaced whole."""
    text = path.read_text()
    if path.suffix == ".yaml":
        return _edited_text(data, yaml.safe_load(text), as_yaml=True)
    if path.suffix == ".json":
        return _edited_text(data, json.loads(text), as_yaml=False)
    lines = text.splitlines()
    if data.draw(st.integers(0, 4), label="whole file") == 0:
        return data.draw(TEXT, label="text")
    i = data.draw(st.integers(0, len(lines) - 1), label="line")
    lines[i : i + 1] = data.draw(st.lists(st.text(max_size=40), max_size=1), label="new line")
    return "\n".join(lines) + "\n"


@given(data=st.data(), file=st.sampled_from(LAB_FILES))
@FUZZ
def test_an_edited_lab_is_validated_or_refused_before_deploy(
    data: st.DataObject,
    file: str,
    pristine: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lab_dir = tmp_path / "lab"
    shutil.rmtree(lab_dir, ignore_errors=True)
    shutil.copytree(pristine, lab_dir)
    target = lab_dir / file
    target.write_text(_edited_file(data, target))
    monkeypatch.chdir(tmp_path)
    before = _listing(tmp_path)
    code = cli.main(["validate", str(lab_dir), "--only", "mtu_consistency", "pfc_consistency"])
    _one_line_refusal(code, capsys.readouterr().err)
    after = _listing(tmp_path)
    if code == 2:
        assert after == before
    else:
        assert all(p in before or p.startswith("lab/validate") for p in after), after
    # What deploy does before it creates anything: the check, the lab's name (its tag), then
    # the plan of the configs (which a lab that passed the check must give).
    lab = Lab.open(lab_dir)
    try:
        labcheck.check(lab, live=True)
        assert lab.name
    except TwinError as exc:
        assert "\n" not in str(exc)
        return
    build(lab)


TWIN_FILES = [
    "lab/state.json",
    "lab/events.jsonl",
    "run/events.jsonl",
    "run/run.json",
    "run/failover_probes.json",
    "run/counters.json",
    "run/flows.json",
    "run/bgp.json",
    "run/fib/start.json",
    "run/fib/fault1-link-down.json",
]


@pytest.fixture(scope="module")
def faulted_lab(pristine: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lab with one run of `SCENARIO` on the fake backend: a link-down fault crossed by
    failover probes, FIB snapshots around it, failover and ECMP spread judged."""
    lab = Path(shutil.copytree(pristine, tmp_path_factory.mktemp("faulted") / "lab"))
    scenario = lab.parent / "scenario.yaml"
    scenario.write_text(yaml.safe_dump({k: v for k, v in SCENARIO.items() if k != "capture"}))
    assert cli.main(["run", str(lab), str(scenario), "--backend", "fake"]) in (0, 1)
    return lab


def _edited_lines(data: st.DataObject, text: str) -> str:
    """JSON lines with one line edited, dropped or torn (a process killed while writing)."""
    lines = text.splitlines()
    i = data.draw(st.integers(0, len(lines) - 1), label="line")
    how = data.draw(st.sampled_from(["edit", "drop", "tear"]), label="how")
    if how == "tear":
        return "\n".join([*lines[:i], lines[i][: data.draw(st.integers(0, len(lines[i])))]])
    new = [] if how == "drop" else [_edited_text(data, json.loads(lines[i]), as_yaml=False)]
    return "\n".join(lines[:i] + new + lines[i + 1 :]) + "\n"


@given(data=st.data(), file=st.sampled_from(TWIN_FILES))
@FUZZ
def test_edited_twin_and_run_files_are_read_or_refused_in_one_line(
    data: st.DataObject,
    file: str,
    faulted_lab: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lab_dir = tmp_path / "lab"
    shutil.rmtree(lab_dir, ignore_errors=True)
    shutil.copytree(faulted_lab, lab_dir)
    (run,) = (lab_dir / "runs").iterdir()
    state.State(Lab.open(lab_dir).name, "fake", status="running").save(lab_dir)  # a fake twin
    where, _, name = file.partition("/")
    target = (lab_dir if where == "lab" else run) / name
    assert target.is_file(), sorted(p.name for p in run.iterdir())
    text = target.read_text()
    target.write_text(
        _edited_lines(data, text)
        if name == "events.jsonl"
        else _edited_text(data, json.loads(text), as_yaml=False)
    )
    capsys.readouterr()
    code = cli.main(["report", str(run), "--no-static"])
    _one_line_refusal(code, capsys.readouterr().err)
    code = cli.main(["destroy", str(lab_dir), "--backend", "fake"])
    _one_line_refusal(code, capsys.readouterr().err)
