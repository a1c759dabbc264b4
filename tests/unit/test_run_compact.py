"""A run directory's compact files read back whole: the first FIB snapshot with each next-hop
list once and the others as changes from it (`twin.scenario.fibfiles`), queue series as
changes (`twin.scenario.occupancy`)."""

from __future__ import annotations

from ipaddress import IPv4Network
from typing import Any

import orjson
import pytest

from twin.errors import InputError
from twin.model.fib import Fib, NextHop, to_json
from twin.scenario import fibfiles, occupancy

A, B = NextHop("spine1", "Ethernet0"), NextHop("spine2", "Ethernet4")
P, Q = IPv4Network("10.0.0.0/24"), IPv4Network("10.0.1.0/24")
START: Fib = {"leaf1": {P: (A, B), Q: (A,)}, "leaf2": {P: (B,)}, "spine1": {Q: ()}}


@pytest.mark.parametrize(
    "after",
    [
        {"leaf1": {P: (B,), Q: (A,)}, "leaf2": {P: (B,)}, "spine1": {Q: ()}},  # a route changed
        {"leaf1": {P: (A, B)}, "leaf2": {P: (B,)}, "spine1": {Q: ()}},  # a route gone
        {"leaf1": {P: (A, B), Q: (A,)}, "spine1": {Q: ()}},  # a node gone
        {**START, "leaf3": {Q: (A,)}},  # a node added
        START,  # nothing changed
    ],
)
def test_a_snapshot_as_changes_reads_back_whole(after: Fib) -> None:
    data = fibfiles.encode(after, START, "start")
    assert data["encoding"] == "delta" and set(data["nodes"]) <= set(START) | set(after)
    assert fibfiles.decode(data, {"start": START}.__getitem__, "fib/x.json") == after


def test_a_whole_snapshot_writes_each_next_hop_list_once() -> None:
    spines = tuple(NextHop(f"spine{i}", f"Ethernet{4 * i}") for i in range(64))
    fib: Fib = {
        f"leaf{n}": {IPv4Network(f"10.{p}.0.0/24"): spines for p in range(50)} for n in range(4)
    }
    fib["leaf0"][P] = ()
    data = fibfiles.encode(fib)
    assert data["encoding"] == "grouped" and len(data["hops"]) == 2
    assert (
        fibfiles.decode(orjson.loads(orjson.dumps(data)), {"start": START}.__getitem__, "f") == fib
    )
    assert len(orjson.dumps(data)) * 50 < len(orjson.dumps(to_json(fib)))


def test_a_snapshot_written_whole_as_before_reads_back() -> None:
    assert fibfiles.decode(to_json(START), {"start": START}.__getitem__, "fib/start.json") == START


def test_an_unchanged_snapshot_is_its_base() -> None:
    data = fibfiles.encode(START, START, "start")
    assert data["nodes"] == {} and fibfiles.decode(data, lambda _: START, "f") is START


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"encoding": "delta", "nodes": {}}, "base"),
        ({"encoding": "delta", "base": "start", "nodes": {"leaf1": [1]}}, "nodes.leaf1"),
        ({"encoding": "delta", "base": "start", "nodes": {"leaf1": {"x/y": None}}}, "x/y"),
        ({"encoding": "delta", "base": "start", "nodes": {"leaf1": {"10.0.0.0/24": 3}}}, "leaf1"),
    ],
)
def test_a_malformed_change_file_is_one_input_error(data: dict[str, Any], key: str) -> None:
    with pytest.raises(InputError, match=key.replace("/", ".")):
        fibfiles.decode(data, lambda _: START, "fib/x.json")


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"hops": {}, "nodes": {}}, "hops"),
        ({"hops": [[{"node": "a"}]], "nodes": {}}, "hops.0.0.port"),
        ({"hops": [], "nodes": []}, "nodes"),
        ({"hops": [], "nodes": {"leaf1": [0]}}, "nodes.leaf1"),
        ({"hops": [[]], "nodes": {"leaf1": {"x/y": 0}}}, "nodes.leaf1.x/y"),
        ({"hops": [[]], "nodes": {"leaf1": {"10.0.0.0/24": 1}}}, "not an index of hops"),
        ({"hops": [[]], "nodes": {"leaf1": {"10.0.0.0/24": True}}}, "not an index of hops"),
    ],
)
def test_a_malformed_grouped_snapshot_is_one_input_error(data: dict[str, Any], key: str) -> None:
    with pytest.raises(InputError, match=key.replace("/", ".")):
        fibfiles.decode(
            {"encoding": "grouped", **data}, {"start": START}.__getitem__, "fib/start.json"
        )


def test_queue_changes_expand_to_every_sample() -> None:
    data = {
        "interval": 2e-5,
        "encoding": "changes",
        "samples": 6,
        "queues": {"leaf1:Ethernet0": {"3": [0, 5, 2, 9, 5, 0]}},
        "pgs": {"leaf1:Ethernet0": {"3": [4, 7]}},
    }
    assert occupancy.dense(data) == {
        "interval": 2e-5,
        "queues": {"leaf1:Ethernet0": {"3": [5, 5, 9, 9, 9, 0]}},
        "pgs": {"leaf1:Ethernet0": {"3": [0, 0, 0, 0, 7, 7]}},
    }
    plain = {"interval": 1e-5, "queues": {}, "pgs": {}}
    assert occupancy.dense(plain) is plain


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"encoding": "rle"}, "encoding"),
        ({"samples": -1}, "samples"),
        ({"queues": {"p": {"3": [0, 1, 0, 2]}}}, "queues.p.3"),  # not increasing
        ({"queues": {"p": {"3": [6, 1]}}}, "queues.p.3"),  # past the last sample
        ({"queues": {"p": {"3": [0]}}}, "queues.p.3"),  # odd
        ({"queues": {"p": {"3": [0, 1.5]}}}, "queues.p.3"),  # not an integer
    ],
)
def test_malformed_queue_changes_are_one_input_error(change: dict[str, Any], key: str) -> None:
    data = {"interval": 1e-5, "encoding": "changes", "samples": 6, "queues": {}, "pgs": {}}
    with pytest.raises(InputError, match=key):
        occupancy.dense({**data, **change})
