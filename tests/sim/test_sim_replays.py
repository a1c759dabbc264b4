"""Schedules other than rings replayed by the core iteration by iteration (labs/sim/csrc/coll.c):
the same run, bit for bit, as the flow table of every iteration, in two iterations' flows; and
a row still running two iterations on holds its next start back, counted."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from labs.failures import Failures, Network
from labs.sim import lab as simlab
from labs.sim import simulate
from labs.sim.fabrics import leaf_spine
from labs.sim.flows import FlowTable, Replay
from labs.sim.timeline import plan as sim_plan
from tests.simlab import LINK_DOWN, beside_incast, observations, play, small_lab
from twin.intent.inputs import parse_model
from twin.lab.directory import Lab
from twin.scenario import plan
from twin.scenario.model import Scenario

CASES = [
    ("all_reduce", "tree"),
    ("all_reduce", "halving_doubling"),
    ("all_reduce", "hierarchical_ring"),
    ("all_to_all", "ring"),
]
"""What the core replays: every schedule but the ring (all-to-all's direct exchange)."""


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_lab(tmp_path_factory.mktemp("lab") / "small")


def scenario(how: str, kind: str, algorithm: str, fault: dict[str, Any]) -> dict[str, Any]:
    """The collective beside an incast into one of its ranks, under a fault."""
    return beside_incast(how, {"kind": kind, "algorithm": algorithm, "iterations": 4}, fault)


@pytest.mark.parametrize(("kind", "algorithm"), CASES)
def test_a_replay_plays_as_its_table(base: Path, kind: str, algorithm: str) -> None:
    core = play(base, scenario("core", kind, algorithm, LINK_DOWN))
    table = play(base, scenario("table", kind, algorithm, LINK_DOWN))
    assert observations(core) == observations(table)
    (times,) = [v["times_s"] for v in core.extra["iterations"].values()]
    assert len(times) == 4 and all(t is not None and t > 0 for t in times)
    assert core.extra["sim"]["experiment"]["flows"] < table.extra["sim"]["experiment"]["flows"]


def test_an_unfinished_replay_reports_as_its_table(base: Path) -> None:
    node_down = {"at": 0.00001, "fault": "node-down", "node": "server3"}
    core = play(base, scenario("core", "all_reduce", "tree", node_down))
    table = play(base, scenario("table", "all_reduce", "tree", node_down))
    assert observations(core) == observations(table)
    assert core.extra["iterations"]["all_reduce@0"]["times_s"] == [None] * 4


def test_a_replay_holds_two_iterations_of_rows(base: Path) -> None:
    lab = Lab.open(base)
    parsed = parse_model(
        Scenario, {"settle": 0, **scenario("core", "all_reduce", "tree", LINK_DOWN)}, "t"
    )
    timeline = plan.timeline(lab, parsed)
    p = sim_plan(lab, timeline, simlab.network(lab), Network(lab, Failures.load(lab)))
    (replay,) = p.experiment.collectives
    assert isinstance(replay, Replay)
    assert replay.iterations == 4 and replay.names[-1] == b"end"
    incast = 2  # the other phase's rows
    assert p.n_flows == 2 * replay.slots + incast


def lagging(iterations: int, replayed: bool) -> Any:
    """A row (a -> b, 3 MB) the barrier does not wait for beside one it does (c -> d, 30 kB):
    each iteration ends with the short row, the long one falls behind."""
    fabric = leaf_spine(servers=4, leaves=2, spines=1, uplinks=1)
    rows = [(b"s0.a>b.0", 0, 1, 3_000_000), (b"s0.c>d.0", 2, 3, 30_000), (b"end", 0, 1, 0)]
    copies = 2 if replayed else iterations
    names, src, dst, size, counts, after = [], [], [], [], [], []
    for it in range(copies):
        base = it * len(rows)
        for k, (name, a, b, n) in enumerate(rows):
            names.append(b"p0.i%d." % it + name)
            src.append(a)
            dst.append(b)
            size.append(n)
            waits = [base + 1] if k == 2 else [] if it == 0 else [base - 1]
            counts.append(len(waits))
            after += waits
    table = FlowTable.of(
        names,
        src,
        dst,
        size=size,
        dcqcn=False,
        after_start=np.concatenate([[0], np.cumsum(counts)]),
        after=after,
    )
    replay = Replay(
        first_row=0,
        names=[name for name, *_ in rows],
        src=np.array([a for _, a, _, _ in rows], np.int32),
        dst=np.array([b for _, _, b, _ in rows], np.int32),
        deps=np.ones(3, np.int32),
        woken=np.array([0, 1], np.int32),
        iterations=iterations,
        phase=0,
    )
    exp = dataclasses.replace(
        fabric,
        table=table,
        collectives=[replay] if replayed else [],
        duration=1.0,
        stop_when_done=True,
    )
    return simulate(exp, seed=1)


def test_a_row_two_iterations_behind_holds_its_start_back() -> None:
    replayed, table = lagging(6, True), lagging(6, False)
    (made,) = replayed.collectives
    assert made.held == 4  # the long row's iterations 2-5, each ready before the one 2 before ended
    assert not np.isnan(made.iteration_ends).any()  # every iteration ended
    assert made.bytes_delivered.tolist() == [6 * 3_000_000, 6 * 30_000, 0]
    long_rows, ends = table.table.completion[0::3], table.table.completion[2::3]
    assert (table.table.start[0::3][2:] < long_rows[:-2]).all()  # the table ran 3 and more at once
    assert np.allclose(made.iteration_ends, ends)  # the short row's iterations, as the table's
    # the long row's bytes all cross its source's one link: done when the table's are
    assert made.last_completion[0] == pytest.approx(long_rows.max())


def test_a_row_one_iteration_behind_plays_as_its_table() -> None:
    """Two iterations: a row's flows of iteration 0 and 1 are the table's own."""
    replayed, table = lagging(2, True), lagging(2, False)
    (made,) = replayed.collectives
    assert made.held == 0
    assert made.last_completion[0] == pytest.approx(np.nanmax(table.table.completion[0::3]))
    assert made.bytes_delivered.tolist() == [2 * 3_000_000, 2 * 30_000, 0]


@pytest.mark.parametrize("algorithm", ["ring", "tree"])
def test_a_run_cut_in_its_last_iteration_reports_as_its_table(base: Path, algorithm: str) -> None:
    """A rank's node down in the last iteration: some flows finished every step, others not;
    each is done or not as its table rows say (a ring's slots and a replay's rows alike)."""
    collective = {"kind": "all_reduce", "algorithm": algorithm, "iterations": 4}
    whole = play(base, beside_incast("core", collective))
    (ends,) = [v["times_s"] for v in whole.extra["iterations"].values()]
    cut = {"at": sum(ends[:3]) + ends[3] / 2, "fault": "node-down", "node": "server3"}
    core = play(base, beside_incast("core", collective, cut))
    table = play(base, beside_incast("table", collective, cut))
    assert observations(core) == observations(table)
    done = [f["completed"] for f in core.flows if f["phase"] == "all_reduce@0"]
    assert any(done) and not all(done)
