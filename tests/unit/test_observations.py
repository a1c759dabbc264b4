"""One module writes and reads a run directory (`twin.scenario.observations`), in the typed
records of `twin.scenario.records`: what it saves reads back as the same records, run.json
carries a schema version and a newer major one is refused in one line, snapshots are tied
to their faults by index; docs/observations.md names every file and record key the module
knows, and its examples use no key the records lack."""

from __future__ import annotations

import ast
import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labs.backend import Played
from twin import jsonio
from twin.cli import main as cli
from twin.errors import InputError
from twin.lab.directory import RACY_NS
from twin.model import fib
from twin.model.fib import Fib, NextHop
from twin.scenario import fibfiles, observations, records
from twin.scenario.observations import FILES, Observations

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "observations.md"
FIB: Fib = {"leaf1": {}, "server1": {}}


def played() -> Played:
    """A run with one phase, one flow and a link flap (logged once it is over)."""
    phase: records.PhaseRecord = {
        "index": 0,
        "label": "backup",
        "kind": "backup",
        "class": "roce",
        "start": 10.0,
        "end": 12.0,
        "pps_per_flow": 100,
        "dscp": {"server1": 26},
        "flows": [{"flow_id": 7, "src": "server1", "dst": "server2", "qp": 0}],
        "sent": {"7": 200},
    }
    flap: records.FaultRecord = {
        "index": 0,
        "began": 10.5,
        "t": 11.5,
        "event": "fault",
        "fault": "link-flap-done",
        "link": "leaf1:spine1",
        "period": 0.25,
        "count": 2,
    }
    flow: records.FlowRecord = {
        "flow_id": 7,
        "src": "server1",
        "dst": "server2",
        "qp": 0,
        "phase": "backup",
        "class": "roce",
        "dscp_sent": 26,
        "pps": 100,
        "sent": 200,
        "received": 190,
        "lost": 10,
        "tail_lost": 0,
        "reordered": 0,
        "gaps": [[11.0, 10]],
        "dscp_received": {"26": 190},
        "ecn_received": {"2": 190},
    }
    start: records.Event = {"t": 10.0, "event": "run-start", "scenario": "flap"}
    fibs = {"start": (9.9, FIB), records.fib_label(0, "link-flap"): (12.0, FIB), "end": (12.1, FIB)}
    return Played(
        started=10.0,
        ended=12.0,
        phases=[phase],
        faults=[flap],
        flows=[flow],
        counters={"interval": 1.0, "fields": ["rx_packets"], "samples": [{"t": 10.0, "c": {}}]},
        fibs=fibs,
        bgp={"start": [], "end": []},
        events=[start],
    )


def saved(out: Path) -> tuple[records.RunRecord, Played]:
    """A run directory as the player saves one, and what it was saved from."""
    record = played()
    run: records.RunRecord = {
        "schema": records.SCHEMA,
        "lab": "small",
        "lab_dir": str(out.parent),
        "backend": "fake",
        "capabilities": ["counters", "fib", "flows"],
        "scenario": "flap",
        "started": record.started,
        "ended": record.ended,
        "fault_margin": 0.5,
        "phases": record.phases,
        "faults": record.faults,
        "fibs": {label: t for label, (t, _) in record.fibs.items()},
        "fib_faults": observations.snapshot_faults(record.faults, record.fibs),
        "servers": ["server1", "server2"],
        "uplinks": {},
        "stamp": {"twin_version": "0", "kernel": "k", "python": "3", "backend": "fake"},
    }
    fabric = out.parent / "fabric.yaml"
    fabric.write_text("name: small\n")
    out.mkdir()
    observations.save(out, run, record, fabric)
    return run, record


def test_a_saved_run_reads_back_as_the_records_it_was_saved_from(tmp_path: Path) -> None:
    run, record = saved(tmp_path / "run")
    obs = Observations.open(tmp_path / "run")
    assert obs.run == run and obs.run["fib_faults"] == {"fault1-link-flap": 0}
    assert (obs.flows, obs.events, obs.counters) == (record.flows, record.events, record.counters)
    assert obs.fib("fault1-link-flap") == FIB and obs.phase("backup") == record.phases[0]
    assert (tmp_path / "run" / "fabric.yaml").read_text() == "name: small\n"


def test_snapshots_are_read_once_and_identical_ones_share_one_fib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Validators ask for the same snapshots many times: each file is parsed once while it
    is unchanged, and snapshots where no route changed (the same bytes) are one `Fib`."""
    saved(tmp_path / "run")
    other = {"leaf1": {"10.1.0.0/16": [{"node": "spine1", "port": "Ethernet0"}]}}
    (tmp_path / "run" / "fib" / "fault1-link-flap.json").write_text(json.dumps(other))
    old = time.time_ns() - 10 * RACY_NS
    for path in (tmp_path / "run" / "fib").iterdir():
        os.utime(path, ns=(old, old))
    parsed: list[object] = []

    def counted(read: Callable[..., Fib]) -> Callable[..., Fib]:
        def reading(*args: Any) -> Fib:
            parsed.append(args)
            return read(*args)

        return reading

    monkeypatch.setattr(fibfiles, "from_json", counted(fib.from_json))  # the flap, by hand
    monkeypatch.setattr(fibfiles, "from_grouped", counted(fib.from_grouped))  # start, saved
    obs = Observations.open(tmp_path / "run")
    start, flap = obs.fib("start"), obs.fib("fault1-link-flap")
    assert obs.fib("end") is start and start == FIB and flap != FIB
    assert flap["leaf1"][IPv4Network("10.1.0.0/16")] == (NextHop("spine1", "Ethernet0"),)
    assert [obs.fib(label) for label in ("start", "end", "fault1-link-flap")] == [
        start,
        start,
        flap,
    ]
    assert len(parsed) == 2


def test_a_snapshot_or_extra_file_rewritten_is_read_again(tmp_path: Path) -> None:
    """A test (or a person) that rewrites a run's file and judges the same observations
    again is judged on the new file: at once (written within a clock tick), or later."""
    saved(tmp_path / "run")
    obs = Observations.open(tmp_path / "run")
    start = tmp_path / "run" / "fib" / "start.json"
    pfc = tmp_path / "run" / "pfc.json"
    pfc.write_text("[]")
    assert obs.fib("start") == FIB and obs.extra("pfc") == []
    changed: dict[str, dict[str, list[Any]]] = {"leaf1": {"10.1.0.0/16": []}}
    start.write_text(json.dumps(changed))
    pfc.write_text("[{}]")
    assert obs.fib("start") == {"leaf1": {IPv4Network("10.1.0.0/16"): ()}}
    assert obs.extra("pfc") == [{}]
    old = time.time_ns() - 10 * RACY_NS
    for path, text in ((start, json.dumps(FIB)), (pfc, "[]")):
        path.write_text(text)
        os.utime(path, ns=(old, old))
    assert obs.fib("start") == FIB and obs.extra("pfc") == []
    start.write_text(json.dumps(changed))
    pfc.write_text("[{}]")
    os.utime(start, ns=(old + 1000, old + 1000))
    os.utime(pfc, ns=(old + 1000, old + 1000))
    assert obs.fib("start") != FIB and obs.extra("pfc") == [{}]
    pfc.unlink()
    assert obs.extra("pfc") is None


def test_a_file_just_written_is_parsed_once_while_its_bytes_stay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`twin run` judges the run it has just saved: a file written within a clock tick has
    no `version` to keep it by, so its bytes tell whether it changed (queues.json was parsed
    twice, by ecn_behaviour and the plots)."""
    from twin.intent.inputs import parse_json
    from twin.scenario import observations

    saved(tmp_path / "run")
    (tmp_path / "run" / "pfc.json").write_text("[]")
    parsed: list[Path] = []

    def counted(path: Path, raw: bytes) -> Any:
        parsed.append(path)
        return parse_json(path, raw)

    monkeypatch.setattr(observations, "parse_json", counted)
    obs = Observations.open(tmp_path / "run")
    assert obs.extra("pfc") == [] and obs.extra("pfc") == []
    assert len(parsed) == 1
    (tmp_path / "run" / "pfc.json").write_text("[{}]")
    assert obs.extra("pfc") == [{}]
    assert len(parsed) == 2


@dataclass
class _Unwritable:
    x: int


WRITTEN: list[Any] = [
    {"interval": 1e-05, "queues": {"leaf1:Ethernet0": {3: [0, 4096, 2**40]}}},
    {True: 1, 2.5: [1e16, -0.0, 1e-7], "s": "\u00e9 nullroute"},
    [None, {"drops": {"lossless": 0}}],
    [2**70, NextHop("spine1", "Ethernet0"), ("a", 1)],
    {"x": float("inf"), "y": float("nan")},
]


@pytest.mark.parametrize("value", WRITTEN, ids=range(len(WRITTEN)))
def test_run_files_hold_what_json_dumps_writes(value: Any) -> None:
    """`dumps` (orjson where exact) writes the values json.dumps writes, reading back alike
    with either reader."""
    written = jsonio.dumps(value)
    text = written.decode() if isinstance(written, bytes) else written
    assert repr(json.loads(text)) == repr(json.loads(json.dumps(value)))
    with pytest.raises(TypeError):
        jsonio.dumps({"a": _Unwritable(1)})


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**62, max_value=2**80)
    | st.floats()
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


def _read(read: Callable[[bytes], Any], raw: bytes) -> str:
    """What a reader gives for `raw`: its value's repr, or its error's type and message."""
    try:
        return repr(read(raw))
    except (ValueError, RecursionError) as exc:
        return f"{type(exc).__name__}: {exc}"


@given(JSON_VALUES, st.booleans())
@settings(max_examples=300, deadline=None)
def test_files_read_as_json_loads_reads_them(value: Any, ascii_only: bool) -> None:
    """`jsonio.loads` (orjson where exact) gives json.loads's values: integers past 64 bits,
    NaN, infinities and lone surrogates (escaped, or raw and not UTF-8) included."""
    raw = json.dumps(value, ensure_ascii=ascii_only).encode(errors="surrogatepass")
    assert _read(jsonio.loads, raw) == _read(json.loads, raw)


@pytest.mark.parametrize(
    "raw",
    [b"[1,]", b"", b'{"a": 1} x', b"\xef\xbb\xbf[1]", b"[" * 5000 + b"]" * 5000, b"1e400", b"01"],
)
def test_text_orjson_refuses_reads_or_fails_as_json_loads(raw: bytes) -> None:
    """What is not JSON fails as json.loads fails (the message `parse_json` gives a user);
    what orjson alone refuses (a byte-order mark, deep nesting, a float's overflow) reads."""
    assert _read(jsonio.loads, raw) == _read(json.loads, raw)


def test_added_files_events_and_run_keys_read_back(tmp_path: Path) -> None:
    run, _ = saved(tmp_path / "run")
    storm: records.Event = {"t": 11.0, "event": "pause_storm", "node": "leaf1", "sim_t": 0.001}
    hybrid: records.RunRecord = {
        **run,
        "data_plane": {"backend": "sim", "time_scale": 0.001, "fibs": []},
    }
    observations.add(tmp_path / "run", hybrid, {"pfc": [{"port": "leaf1:Ethernet0"}]}, [storm])
    obs = Observations.open(tmp_path / "run")
    assert obs.run == hybrid and obs.events[-1] == storm
    assert obs.extra("pfc") == [{"port": "leaf1:Ethernet0"}]


def test_snapshots_are_tied_to_faults_by_index_not_by_reading_labels() -> None:
    flap = played().faults[0]
    down: records.FaultRecord = {**flap, "index": 1, "fault": "node-down"}
    labels = ["start", "fault1-link-flap", "fault2-node-down", "fault3-link-up", "end"]
    assert observations.snapshot_faults([flap, down], labels) == {
        "fault1-link-flap": 0,
        "fault2-node-down": 1,
    }


def rewrite_run(out: Path, **changes: Any) -> None:
    """Edit run.json as an older or newer twin would have written it (None: key absent)."""
    data = json.loads((out / "run.json").read_text())
    data.update(changes)
    (out / "run.json").write_text(json.dumps({k: v for k, v in data.items() if v is not None}))


def test_a_run_without_a_schema_reads_as_1_0_with_its_snapshots_tied(tmp_path: Path) -> None:
    saved(tmp_path / "run")
    rewrite_run(tmp_path / "run", schema=None, fib_faults=None)
    run = Observations.open(tmp_path / "run").run
    assert run["schema"] == "1.0" and run["fib_faults"] == {"fault1-link-flap": 0}


@pytest.mark.parametrize(
    ("schema", "problem"),
    [("2.0", "2.0 is newer than this twin reads"), ("1", "'1' is not MAJOR.MINOR")],
)
def test_a_newer_major_schema_is_refused_in_one_line(
    tmp_path: Path, schema: str, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    saved(tmp_path / "run")
    rewrite_run(tmp_path / "run", schema=schema)
    capsys.readouterr()
    assert cli.main(["report", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"run.json: schema: {problem}" in err, err


def test_a_newer_minor_schema_is_read(tmp_path: Path) -> None:
    saved(tmp_path / "run")
    rewrite_run(tmp_path / "run", schema="1.99", later_key=1)
    assert Observations.open(tmp_path / "run").run["schema"] == "1.99"
    rewrite_run(tmp_path / "run", schema="2.0")
    with pytest.raises(InputError):
        _ = Observations.open(tmp_path / "run").run


def run_files_written(path: Path) -> set[str]:
    """The run directory's files (FILES' names and `fib/`) a module names in the path of a
    `safeio.write` or `safeio.append` call, or as a key of the files it makes to write
    (a dict display's or a subscript's it stores into) when it writes with `safeio`."""
    names = {n.split("/")[0] for n in FILES}
    tree = ast.parse(path.read_text())
    paths, keys = [], []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("write", "append")
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "safeio"
            and node.args
        ):
            paths.append(node.args[0])
        elif isinstance(node, ast.Dict):
            keys += [k for k in node.keys if k is not None]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            keys.append(node.slice)

    def strings(nodes: list[ast.expr]) -> set[str]:
        return {str(c.value) for n in nodes for c in ast.walk(n) if isinstance(c, ast.Constant)}

    files = {k for k in strings(keys) if "." in k or "/" in k} if paths else set()
    return {n.split("/")[0] for n in strings(paths) | files} & names


def test_only_the_observations_module_writes_a_run_directory() -> None:
    writers = {
        str(path.relative_to(REPO)): found
        for package in ("twin", "labs", "traffic", "validators")
        for path in sorted((REPO / package).rglob("*.py"))
        if (found := run_files_written(path))
    }
    assert set(writers) == {"twin/scenario/observations.py"}
    assert {"run.json", "flows.json", "events.jsonl", "fib"} <= writers.popitem()[1]


# -- docs/observations.md ----------------------------------------------------------------------


def sections() -> dict[str, str]:
    """The doc's text by `## ` heading (the part before the first: "")."""
    parts = re.split(r"^## (.+)$", DOC.read_text(), flags=re.M)
    return {"": parts[0], **dict(zip(parts[1::2], parts[2::2], strict=True))}


def keys(record: type) -> set[str]:
    """Every key of a TypedDict."""
    return set(record.__required_keys__) | set(record.__optional_keys__)  # type: ignore[attr-defined]


def named(text: str) -> set[str]:
    """Every `key` and "key" a piece of the doc names."""
    return set(re.findall(r'`"?([\w-]+)"?`', text)) | set(re.findall(r'"(\w+)":', text))


def examples(text: str) -> list[dict[str, Any]]:
    """The JSON objects of a section's examples, placeholders (`[PHASE, ...]`) left out."""
    blocks = re.findall(r"```json\n(.*?)```", text, flags=re.S)
    blocks = [re.sub(r"\b[A-Z]+, \.\.\.", "", b) for b in blocks]
    return [json.loads(b) for b in blocks if "..." not in b]


def test_the_docs_table_lists_every_file_of_the_module() -> None:
    table = re.findall(r"^\| `([^`]+)` \|", sections()[""], flags=re.M)
    assert len(table) == len(set(table)) and set(table) == set(FILES)
    assert {name for name, record in FILES.items() if record} <= set(sections())


def test_the_doc_names_every_key_of_every_record() -> None:
    doc = sections()
    simulator = doc["What the simulator adds (`--backend sim`)"]
    for name, record in FILES.items():
        if record is not None:
            faults = doc["run.json"] if name == "events.jsonl" else ""  # "each fault (as above)"
            missing = keys(record) - named(doc[name] + faults + simulator)
            assert missing == set(), f"{name}: {missing}"
    for record in (records.PhaseRecord, records.FaultRecord):
        assert keys(record) - named(doc["run.json"] + simulator) == set(), record.__name__


def test_the_docs_examples_use_only_the_records_keys() -> None:
    doc = sections()
    run, phase, fault = examples(doc["run.json"])
    (counters,) = examples(doc["counters.json"])
    (flow,) = examples(doc["flows.json"])
    for example, record in [
        (run, records.RunRecord),
        (phase, records.PhaseRecord),
        (fault, records.FaultRecord),
        (counters, records.Counters),
        (flow, records.FlowRecord),
    ]:
        assert set(example) <= keys(record), set(example) - keys(record)
    assert keys(records.RunRecord) - {"data_plane"} == set(run)


def test_a_grouped_fib_lists_prefixes_by_length_then_address_and_equal_lists_once() -> None:
    """`to_grouped` writes each node's prefixes shortest first, then by address (not as
    text: 9.x before 10.x), and one index for equal next-hop lists that are distinct objects
    (a FIB read from JSON or routed again holds both)."""
    a, b = (NextHop("spine1", "Ethernet0"),), (NextHop("spine2", "Ethernet4"),)
    routes = {
        IPv4Network("10.0.0.0/24"): a,
        IPv4Network("10.1.0.0/16"): b,
        IPv4Network("10.0.0.0/8"): tuple(list(a)),
        IPv4Network("9.0.0.0/8"): b,
    }
    grouped = fib.to_grouped({"leaf2": dict(routes), "leaf1": {IPv4Network("10.0.0.0/8"): a}})
    assert list(grouped["nodes"]) == ["leaf1", "leaf2"]
    assert grouped["nodes"]["leaf2"] == {
        "9.0.0.0/8": 1,
        "10.0.0.0/8": 0,
        "10.1.0.0/16": 1,
        "10.0.0.0/24": 0,
    }
    assert list(grouped["nodes"]["leaf2"]) == [
        "9.0.0.0/8",
        "10.0.0.0/8",
        "10.1.0.0/16",
        "10.0.0.0/24",
    ]
    assert len(grouped["hops"]) == 2 and fib.from_grouped(grouped)["leaf2"] == routes
