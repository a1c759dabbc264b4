"""Flows as columns (labs.sim.flows.FlowTable): the same results as the same `Flow`s."""

from __future__ import annotations

import dataclasses
import itertools
import json

import numpy as np
import pytest

from labs.sim import ExperimentError, Flow, native, simulate
from labs.sim.build import build
from labs.sim.fabrics import leaf_spine, ring_allreduce, ring_allreduce_table, with_flows
from labs.sim.flows import TRANSPORTS, FlowTable
from labs.sim.timeline import _waits
from traffic.collectives import Schedule, all_to_all, halving_doubling_all_reduce, ring_all_reduce


def _fabric() -> tuple[list[str], list[Flow]]:
    """Eight ranks on a small leaf-spine, a ring All-Reduce and two backups (TCP and RC)."""
    fabric = leaf_spine(servers=4, leaves=2, spines=2, uplinks=1)
    ranks = [h.name for h in fabric.hosts]
    backups = [
        Flow("tcp", ranks[0], ranks[5], size=3_000_000, cc="none", transport="tcp", start=5e-6),
        Flow("rc", ranks[2], ranks[5], size=2_000_000, transport="rc", start=1e-5, rate=200e9),
    ]
    return ranks, backups


def _as_table(flows: list[Flow], hosts: list[str]) -> FlowTable:
    """Flows without src_port, priority, ttl or packet_bytes of their own, as a table."""
    host = {h: i for i, h in enumerate(hosts)}
    row = {f.name: i for i, f in enumerate(flows)}
    after = [[row[a] for a in sorted(set(f.after))] for f in flows]
    return FlowTable.of(
        [f.name.encode() for f in flows],
        [host[f.src] for f in flows],
        [host[f.dst] for f in flows],
        size=[f.size for f in flows],
        rate=[f.rate or 0.0 for f in flows],
        start=[f.start for f in flows],
        dscp=[f.dscp for f in flows],
        dcqcn=[f.cc == "dcqcn" for f in flows],
        transport=[TRANSPORTS.index(f.transport) for f in flows],
        after_start=np.cumsum([0, *map(len, after)]),
        after=[a for rows in after for a in rows],
    )


def test_a_table_runs_as_its_flows() -> None:
    ranks, backups = _fabric()
    fabric = leaf_spine(servers=4, leaves=2, spines=2, uplinks=1)
    flows = [*ring_allreduce(ranks, 4_000_000), *backups]
    listed = simulate(with_flows(fabric, flows, duration=0.05), seed=3)
    table = _as_table(flows, ranks)
    columns = simulate(dataclasses.replace(fabric, table=table, duration=0.05), seed=3)
    assert columns.flows == [] and columns.table is not None
    assert (listed.packet_hops, listed.events_processed, listed.end_time) == (
        columns.packet_hops,
        columns.events_processed,
        columns.end_time,
    )
    got = columns.table
    for i, f in enumerate(listed.flows):
        assert (f.bytes_sent, f.bytes_delivered, f.bytes_dropped, f.cnps, f.ecn_marks) == (
            got.bytes_sent[i],
            got.bytes_delivered[i],
            got.bytes_dropped[i],
            got.cnps[i],
            got.ecn_marks[i],
        )
        assert f.completion is not None and f.completion == got.completion[i]
        assert f.start == got.start[i] and f.retransmitted_packets == got.retransmitted_packets[i]
    assert listed.ports == columns.ports
    assert json.loads(columns.to_json())["table"]["completion"][0] == got.completion[0]


def test_listed_flows_and_a_table_together() -> None:
    """Listed flows come first, the table's rows after them (their `after` within the table)."""
    ranks, backups = _fabric()
    fabric = leaf_spine(servers=4, leaves=2, spines=2, uplinks=1)
    ring = ring_allreduce(ranks, 2_000_000)
    both = dataclasses.replace(
        with_flows(fabric, backups, duration=0.05),
        table=ring_allreduce_table(fabric, ranks, 2_000_000),
    )
    listed = simulate(with_flows(fabric, [*backups, *ring], duration=0.05), seed=1)
    mixed = simulate(both, seed=1)
    assert mixed.table is not None and len(mixed.table) == len(ring)
    assert [f.completion for f in mixed.flows] == [f.completion for f in listed.flows[:2]]
    assert mixed.table.completion.tolist() == [f.completion for f in listed.flows[2:]]
    assert mixed.packet_hops == listed.packet_hops


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("dst", 99, "ar0-0: not a host"),
        ("dscp", 64, "ar0-0: dscp 0-63"),
        ("priority", 8, "ar0-0: priority 8 is not 0-7"),
        ("transport", 2, "ar0-0: transport tcp has its own congestion control"),
        ("src_port", 1, "ar0-0: src_port is not a port of its source"),
    ],
)
def test_bad_rows_name_their_flow(column: str, value: int, message: str) -> None:
    ranks, _ = _fabric()
    fabric = leaf_spine(servers=4, leaves=2, spines=2, uplinks=1)
    table = ring_allreduce_table(fabric, ranks, 1_000_000)
    bad = getattr(table, column).copy()
    bad[0] = value
    with pytest.raises(ExperimentError, match=message):
        simulate(dataclasses.replace(fabric, table=dataclasses.replace(table, **{column: bad})))


def test_rows_past_a_chunk_are_passed_and_read_back() -> None:
    """The core takes and gives flows 65 536 at a time: reliable flows after 70 000 zero-byte
    ones end as they do alone."""
    ranks, backups = _fabric()
    fabric = leaf_spine(servers=4, leaves=2, spines=2, uplinks=1)
    n = 70_000
    filler = FlowTable.of(
        [f"z{i}".encode() for i in range(n)], [0] * n, [1] * n, size=0, dcqcn=False
    )
    tail = _as_table(backups, ranks)
    alone = simulate(dataclasses.replace(fabric, table=tail, duration=0.05))
    behind = simulate(
        dataclasses.replace(fabric, table=FlowTable.concat([filler, tail]), duration=0.05)
    )
    assert alone.table is not None and behind.table is not None
    assert np.isnan(behind.table.completion).sum() == 0
    for column in ("bytes_delivered", "completion", "retransmitted_packets"):
        assert getattr(behind.table, column)[n:].tolist() == getattr(alone.table, column).tolist()
    assert alone.table.bytes_delivered.tolist() == [3_000_000, 2_000_000]


def _waits_by_definition(schedule: Schedule) -> list[list[int]]:
    """What each row of one iteration waits for, one flow at a time: the rows of the step
    before that its source sent or received in ([-1]: the barrier before); the barrier, the
    last step's rows."""
    rows = [[(k, f) for f in step] for k, step in enumerate(schedule.steps)]
    after: list[list[int]] = []
    previous: list[tuple[int, str, str]] = []  # (row, src, dst) of the last step with rows
    row = 0
    for step in rows:
        current = []
        for _, f in step:
            touching = [r for r, s, d in previous if f.src in (s, d)]
            after.append(touching or [-1])
            current.append((row, f.src, f.dst))
            row += 1
        previous = current or previous
    return [*after, [r for r, _, _ in previous]]


@pytest.mark.parametrize(
    "schedule",
    [
        ring_all_reduce(["a", "b", "c", "d", "e"], 5000, 2),
        ring_all_reduce(["a", "b", "c"], 2, 2),  # chunks 1, 1, 0: some ranks idle
        ring_all_reduce(["a", "b", "c"], 0),  # no rows at all
        halving_doubling_all_reduce(["a", "b", "c", "d"], 4000, 3),
        all_to_all(["a", "b", "c"], 3000),
    ],
    ids=["ring", "idle-ranks", "empty", "halving-doubling", "all-to-all"],
)
def test_collective_rows_wait_for_the_step_before(schedule: Schedule) -> None:
    counts, rows = _waits(schedule.table, len(schedule.ranks))
    starts = np.concatenate([[0], np.cumsum(counts)])
    found = [rows[a:b].tolist() for a, b in itertools.pairwise(starts.tolist())]
    assert found == _waits_by_definition(schedule)


def test_a_constant_column_takes_no_memory() -> None:
    a = FlowTable.of([b"x", b"y"], [0, 1], [1, 0], rate=5e9)
    b = FlowTable.of([b"z"], [0], [1], rate=5e9)
    c = FlowTable.of([b"w"], [1], [0], rate=1e9)
    assert a.rate.strides == (0,) and FlowTable.concat([a, b]).rate.strides == (0,)
    assert FlowTable.concat([a, b]).rate.tolist() == [5e9] * 3
    assert FlowTable.concat([a, c]).rate.tolist() == [5e9, 5e9, 1e9]
    assert FlowTable.concat([a, b, c]).after.dtype == np.int32


def test_constant_columns_may_be_read_only_views() -> None:
    """A column of one value may be np.broadcast_to's read-only view (no memory per row): the
    core reads it chunk by chunk and runs as with a copy."""
    ranks, backups = _fabric()
    fabric = leaf_spine(servers=4, leaves=2, spines=2, uplinks=1)
    table = _as_table([*ring_allreduce(ranks, 2_000_000), *backups], ranks)
    views = {
        f.name: np.broadcast_to(column[:1], column.shape)
        for f in dataclasses.fields(FlowTable)
        if f.name not in ("names", "after_start", "after")
        and len(column := getattr(table, f.name))
        and (column == column[0]).all()
    }
    assert {"stop", "ttl", "priority", "src_port", "after_delay"} <= set(views)
    assert not any(v.flags.writeable for v in views.values())
    copied = simulate(dataclasses.replace(fabric, table=table, duration=0.05), seed=2)
    viewed = simulate(
        dataclasses.replace(fabric, table=dataclasses.replace(table, **views), duration=0.05),
        seed=2,
    )
    assert copied.table is not None and viewed.table is not None
    assert copied.packet_hops == viewed.packet_hops > 0
    assert copied.table.completion.tolist() == viewed.table.completion.tolist()
    assert copied.ports == viewed.ports


def test_a_chain_across_chunks_shares_one_run_state() -> None:
    """70 000 zero-byte flows, each 1 ns after the one before (the core takes 65 536 rows at a
    time), then a flow after the last: each starts when its predecessor is done, and as a done
    flow gives its run state back, one serves them all."""
    fabric = leaf_spine(servers=4, leaves=2, spines=2, uplinks=1)
    n = 70_000
    chain = FlowTable.of(
        [f"c{i}".encode() for i in range(n + 1)],
        [0] * (n + 1),
        [1] * (n + 1),
        size=[0] * n + [1_000_000],
        after_delay=1e-9,
        after_start=[0, *range(n + 1)],
        after=np.arange(n),
    )
    exp = dataclasses.replace(fabric, table=chain, duration=0.01)
    result = simulate(exp)
    assert result.table is not None
    assert np.allclose(result.table.start, np.arange(n + 1) * 1e-9, rtol=0, atol=1e-15)
    assert result.table.bytes_delivered[n] == 1_000_000
    lib, built = native.library(), build(exp, 1)
    try:
        lib.sim_run(built.handle, exp.duration, 1)
        counts = (native.I64 * native.COUNTS)()
        lib.sim_counts(built.handle, counts)
    finally:
        lib.sim_free(built.handle)
    assert counts[7] == 1  # the peak of run states in use
