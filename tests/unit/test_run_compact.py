"""A run directory's compact files read back whole: FIB snapshots as changes from the first
(`twin.scenario.fibfiles`), queue series as changes (`twin.scenario.occupancy`)."""

from __future__ import annotations

from ipaddress import IPv4Network
from typing import Any

import pytest

from twin.errors import InputError
from twin.model.fib import Fib, NextHop
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
