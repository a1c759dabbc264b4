"""`twin report RUN` refuses a run directory whose files are not the JSON it wrote, in one line.

A run killed while writing, or a file edited by hand, left a truncated or differently shaped
file; `twin report` traced back on each case below (those of `READ` when a validator reads
that file). Now the line names the file, where in it (line, entry or key) and what is wrong,
exit code 2: the counters and FIBs by their whole shape, the other files as objects or
arrays; a flow record by the keys validators read.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from twin.cli import main as cli
from twin.errors import InputError
from twin.scenario.observations import Observations

CASES = {
    "run.json cut short": ("run.json", "[1,", "run.json: line 1: not valid JSON"),
    "run.json null": ("run.json", "null", "run.json: must be an object"),
    "counters.json null": ("counters.json", "null", "counters.json: must be an object"),
    "counters.json cut short": ("counters.json", '{"fields": [', "counters.json: line 1: "),
    "counters.json fields not a list": (
        "counters.json",
        '{"fields": 1, "samples": []}',
        "counters.json: fields: ",
    ),
    "a counter that is not a number": (
        "counters.json",
        '{"fields": ["rx_packets"], "samples": [{"t": 1, "c": {"leaf1:Ethernet0": ["z"]}}]}',
        "counters.json: samples.0.c.leaf1:Ethernet0.0: ",
    ),
    "a sample short of its fields": (
        "counters.json",
        '{"fields": ["rx_packets", "tx_packets"], "samples": [{"t": 1, "c": {"x:y": [1]}}]}',
        "samples.0.c.x:y: 1 values, not one a field",
    ),
}


@pytest.fixture
def run(played_lab: Path, tmp_path: Path) -> Path:
    """A copy of the played lab's run directory."""
    lab = Path(shutil.copytree(played_lab, tmp_path / "lab"))
    return next((lab / "runs").iterdir())


def test_the_played_run_reports(run: Path) -> None:
    assert cli.main(["report", str(run)]) in (0, 1)


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_a_broken_run_file_is_refused_in_one_line(
    run: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    name, text, expected = CASES[case]
    assert (run / name).exists()
    (run / name).write_text(text)
    capsys.readouterr()
    assert cli.main(["report", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"twin: {run / name}: "), err
    assert expected in err, err


FLOW = {
    "flow_id": 1,
    "src": "server1",
    "dst": "server3",
    "phase": "backup@0",
    "class": "roce",
    "dscp_sent": 26,
    "pps": 150,
    "sent": 150,
    "received": 150,
    "lost": 0,
    "tail_lost": 0,
    "gaps": [],
    "dscp_received": {"26": 150},
}
"""A flow record as the backends write it (they add more keys)."""

READ: dict[str, tuple[str, str, Callable[[Observations], object], str]] = {
    "flows.json entries not objects": (
        "flows.json",
        "[1]",
        lambda obs: obs.flows,
        "flows.json: 0: must be an object",
    ),
    "a flow missing its keys": (
        "flows.json",
        '[{"flow_id": 1, "src": "server1"}]',
        lambda obs: obs.flows,
        "flows.json: 0.dst: Field required",
    ),
    "a flow's sent count not a number": (
        "flows.json",
        json.dumps([{**FLOW, "sent": "many"}]),
        lambda obs: obs.flows,
        "flows.json: 0.sent: ",
    ),
    "bgp.json sessions not sessions": (
        "bgp.json",
        '{"start": [{"a": 1}]}',
        lambda obs: obs.bgp,
        "bgp.json: not BGP sessions by time",
    ),
    "events.jsonl a line not JSON": (
        "events.jsonl",
        "{}\ngarbage\n",
        lambda obs: obs.events,
        "events.jsonl: line 2: not valid JSON",
    ),
    "events.jsonl a line not an object": (
        "events.jsonl",
        "[]\n",
        lambda obs: obs.events,
        "events.jsonl: line 1: must be an object",
    ),
    "a FIB null": ("fib/start.json", "null", lambda obs: obs.fib("start"), "must be an object"),
    "a FIB entry null": (
        "fib/start.json",
        '{"leaf1": null}',
        lambda obs: obs.fib("start"),
        "leaf1: ",
    ),
    "a FIB prefix not a network": (
        "fib/start.json",
        '{"leaf1": {"10.0.0.300/8": []}}',
        lambda obs: obs.fib("start"),
        "not a valid IPv4 network",
    ),
    "a FIB next hop without its port": (
        "fib/start.json",
        '{"leaf1": {"10.0.0.0/8": [{"node": "spine1"}]}}',
        lambda obs: obs.fib("start"),
        "leaf1.10.0.0.0/8.0.port: ",
    ),
    "a FIB prefix with host bits set": (
        "fib/start.json",
        '{"leaf1": {"10.0.0.1/8": []}}',
        lambda obs: obs.fib("start"),
        "leaf1.10.0.0.1/8: not a valid IPv4 network",
    ),
    "a FIB's next hops not an array": (
        "fib/start.json",
        '{"leaf1": {"10.0.0.0/8": {}}}',
        lambda obs: obs.fib("start"),
        "leaf1.10.0.0.0/8: must be an array of next hops, not an object",
    ),
    "a FIB next hop not an object": (
        "fib/start.json",
        '{"leaf1": {"10.0.0.0/8": ["spine1"]}}',
        lambda obs: obs.fib("start"),
        "leaf1.10.0.0.0/8.0: must be an object",
    ),
    "a FIB next hop's node not a string, after the same hops well formed": (
        "fib/start.json",
        '{"leaf1": {"10.0.0.0/8": [{"node": "spine1", "port": "E0"}],'
        ' "10.1.0.0/16": [{"node": 1, "port": "E0"}]}}',
        lambda obs: obs.fib("start"),
        "leaf1.10.1.0.0/16.0.node: must be a string, not a number",
    ),
    "a FIB next hop's port null, after the same hops well formed": (
        "fib/start.json",
        '{"leaf1": {"10.0.0.0/8": [{"node": "spine1", "port": "E0"}],'
        ' "10.1.0.0/16": [{"node": "spine1", "port": null}]}}',
        lambda obs: obs.fib("start"),
        "leaf1.10.1.0.0/16.0.port: must be a string, not null",
    ),
    "a FIB cut short": (
        "fib/start.json",
        '{"leaf1": {',
        lambda obs: obs.fib("start"),
        "fib/start.json: line 1: not valid JSON",
    ),
    "an extra file cut short": (
        "pfc.json",
        "[1",
        lambda obs: obs.extra("pfc"),
        "pfc.json: line 1: not valid JSON",
    ),
}


@pytest.mark.parametrize("case", READ, ids=list(READ))
def test_files_only_some_validators_read_are_refused_as_read(run: Path, case: str) -> None:
    name, text, read, expected = READ[case]
    (run / name).write_text(text)
    with pytest.raises(InputError) as refused:
        read(Observations.open(run))
    assert str(refused.value).startswith(f"{run / name}: ") and expected in str(refused.value)


def test_a_flow_record_as_the_backends_write_it_is_taken(run: Path) -> None:
    (run / "flows.json").write_text(json.dumps([{**FLOW, "qp": 0, "ecn_received": {}}]))
    assert Observations.open(run).flows[0]["qp"] == 0
