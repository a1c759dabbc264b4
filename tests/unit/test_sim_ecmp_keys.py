"""The ECMP key the simulator core gets for each row of a flow table is the one its docstring
defines: the CRC-32 of `seed|src|dst|sport|4791|17`, the UDP source port taken from the
flow's name (49152 + the low 14 bits of its CRC-32), computed here row by row with zlib."""

from __future__ import annotations

import zlib
from types import SimpleNamespace
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from labs.sim.build import CoreFlows, _pairs
from labs.sim.flows import FlowTable


def reference(seed: int, src: str, dst: str, name: bytes) -> int:
    sport = 0xC000 | (zlib.crc32(name) & 0x3FFF)
    return zlib.crc32(f"{seed}|{src}|{dst}|{sport}|4791|17".encode())


def keys(seed: int, hosts: list[str], rows: list[tuple[bytes, int, int]]) -> list[int]:
    """What CoreFlows.keys gives for `rows` (name, source, destination)."""
    table = FlowTable.of([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])
    named: Any = [SimpleNamespace(name=h) for h in hosts]
    pairs, shifts = _pairs(table, seed, named)
    none = np.zeros(0, np.int64)
    core = CoreFlows(
        table, 1024, 0, len(hosts), none, none.astype(bool), none, none, pairs,
        shifts, none.astype(np.int32),
    )  # fmt: skip
    return [int(k) for k in core.keys(slice(0, len(rows)), table.src)]


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    n_hosts=st.integers(1, 6),
    rows=st.lists(
        st.tuples(st.binary(min_size=1, max_size=40).filter(lambda b: b[-1:] != b"\0"),
                  st.integers(0, 5), st.integers(0, 5)),
        min_size=1,
        max_size=30,
    ),
)  # fmt: skip
def test_each_rows_key_is_the_crc_of_its_five_tuple(
    seed: int, n_hosts: int, rows: list[tuple[bytes, int, int]]
) -> None:
    hosts = [f"srv{i:03d}" for i in range(n_hosts)]
    rows = [(name, s % n_hosts, d % n_hosts) for name, s, d in rows]
    got = keys(seed, hosts, rows)
    assert got == [reference(seed, hosts[s], hosts[d], name) for name, s, d in rows]


def test_one_name_toward_two_destinations_has_two_keys() -> None:
    """Each pair's own prefix is in its key: the same name toward two hosts hashes apart."""
    got = keys(7, ["a", "b", "c"], [(b"x", 0, 1), (b"x", 0, 2)])
    assert got[0] != got[1]
    assert got == [reference(7, "a", "b", b"x"), reference(7, "a", "c", b"x")]
