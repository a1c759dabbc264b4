"""PFC keeps the lossless class lossless when headroom is sized by the physics formula, and a
too small headroom shows up as counted lossless drops."""

from __future__ import annotations

from pathlib import Path

from labs.sim import load, simulate
from labs.sim.headroom import headroom_bytes

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "sim"


def test_incast_beyond_buffer_is_lossless_with_formula_headroom() -> None:
    exp, seed = load(EXAMPLES / "pfc_incast_8.yaml")
    result = simulate(exp, seed or 1)
    offered = sum(f.size or 0 for f in exp.flows)
    assert offered > exp.switches[0].buffer_bytes
    assert result.total("drops_lossless") == 0
    assert result.total("pause_sent") > 0
    for f in result.flows:
        assert f.bytes_delivered == f.size and f.completion is not None
    senders = [result.port(f"s{i}:eth0") for i in range(1, 9)]
    assert all(
        p.priorities[3].pause_received > 0 and p.priorities[3].paused_time > 0 for p in senders
    )
    # the ingress PG never held more than the shared threshold plus the headroom
    pg = result.pgs["sw:Ethernet0"][3]
    assert max(pg) <= exp.switches[0].buffer_bytes // 8 + headroom_bytes(100e9, 100, 4096)


def test_undersized_headroom_drops_are_counted_and_reported() -> None:
    exp, seed = load(EXAMPLES / "pfc_incast_8_undersized.yaml")
    result = simulate(exp, seed or 1)
    drops = result.total("drops_lossless")
    assert drops > 0
    dropped = sum(f.bytes_dropped for f in result.flows)
    assert (drops - len(exp.flows)) * 4096 < dropped <= drops * 4096  # last packets are short
    events = result.events_of("lossless_drop")
    assert events and all(e.node == "sw" and e.priority == 3 for e in events)
    assert result.total("drops_lossy") == 0


def test_headroom_formula_matches_reference_table() -> None:
    # physics.md 1.3: 400G without D_intf, 9216 B MTU: 79.0 KB at 5 m, 126.5 KB at 100 m
    assert round(headroom_bytes(400e9, 5, 9216) / 1e3, 1) == 79.0
    assert round(headroom_bytes(400e9, 100, 9216) / 1e3, 1) == 126.5
