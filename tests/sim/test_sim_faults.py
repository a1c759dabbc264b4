"""Faults: a NIC that keeps sending pauses (with and without the PFC watchdog) and links that
go down and up."""

from __future__ import annotations

import dataclasses

from labs.sim import (
    Experiment,
    Flow,
    Host,
    Link,
    LinkFault,
    PfcStorm,
    QosProfile,
    Switch,
    TxOff,
    Watchdog,
    native,
    simulate,
)
from labs.sim.build import Built
from labs.sim.fabrics import leaf_spine, with_flows
from labs.sim.loader import experiment
from labs.sim.routing import forwarding, route_rows


def storm_experiment(watchdog: Watchdog | None) -> Experiment:
    """s1 sends 2 MB to r through sw; r's NIC pauses priority 3 from 1 ms to 6 ms."""
    qos = QosProfile(watchdog=watchdog)
    return Experiment(
        switches=[Switch("sw", buffer_bytes=4_000_000, qos=qos)],
        hosts=[Host("s1"), Host("r")],
        links=[Link("s1:eth0", "sw:Ethernet0", 100e9), Link("r:eth0", "sw:Ethernet4", 100e9)],
        flows=[Flow("f", "s1", "r", size=2_000_000, rate=10e9, cc="none")],
        faults=[PfcStorm("r:eth0", start=1e-3, end=6e-3, priorities=(3,))],
        duration=0.02,
    )


def test_storm_stalls_the_sender_without_drops() -> None:
    result = simulate(storm_experiment(None))
    kinds = [e.kind for e in result.events]
    assert kinds[:1] == ["storm_start"] and "storm_end" in kinds
    storms = result.events_of("pause_storm")
    assert ("sw", "Ethernet4") in {(e.node, e.port) for e in storms}
    assert result.port("sw:Ethernet4").priorities[3].paused_time >= 4.9e-3
    assert result.port("s1:eth0").priorities[3].pause_received > 0
    flow = result.flow("f")
    assert result.total("drops_lossless") == 0 and flow.bytes_delivered == flow.size
    assert flow.completion is not None and flow.completion > 6e-3  # it waited for the storm


def test_watchdog_drop_flushes_and_restores() -> None:
    exp = storm_experiment(Watchdog(detection=0.5e-3, restoration=1e-3, action="drop"))
    result = simulate(dataclasses.replace(exp, stop_when_done=False))
    (detect,) = result.events_of("watchdog_detect")
    (restore,) = result.events_of("watchdog_restore")
    assert (detect.node, detect.port, detect.priority, detect.detail) == (
        "sw",
        "Ethernet4",
        3,
        "drop",
    )
    assert 1.5e-3 <= detect.time <= 2e-3
    assert 6.8e-3 <= restore.time <= 7.1e-3  # 1 ms after the last pause frame (sent before 6 ms)
    assert result.total("drops_watchdog") > 0 and result.total("drops_lossless") == 0
    flow = result.flow("f")
    assert flow.bytes_dropped > 0 and flow.bytes_delivered + flow.bytes_dropped == flow.size


def test_watchdog_forward_ignores_pauses() -> None:
    result = simulate(
        storm_experiment(Watchdog(detection=0.5e-3, restoration=1e-3, action="forward"))
    )
    (detect,) = result.events_of("watchdog_detect")
    assert detect.detail == "forward"
    flow = result.flow("f")
    assert flow.bytes_dropped == 0 and flow.completion is not None
    assert flow.completion < 3e-3  # 2 MB at 10 Gb/s is 1.6 ms; the storm only held it briefly


def test_link_down_and_up() -> None:
    fabric = leaf_spine(servers=2, leaves=2, spines=2, uplinks=1, speed=100e9)
    flow = Flow("f", "srv0-nic0", "srv1-nic1", size=4_000_000, rate=20e9, cc="none")
    cut = [
        LinkFault("leaf0:Ethernet8", down=0.5e-3, up=1.5e-3),
        LinkFault("leaf0:Ethernet12", down=0.5e-3, up=1.5e-3),
    ]
    exp = with_flows(fabric, [flow], faults=cut, duration=0.01)
    result = simulate(exp)
    assert [e.kind for e in result.events] == ["link_down", "link_down", "link_up", "link_up"]
    f = result.flow("f")
    assert f.bytes_dropped > 0 and f.bytes_delivered > 0
    assert f.bytes_delivered + f.bytes_dropped == f.size and f.completion is not None
    assert result.total("drops_no_route") + result.total("drops_link") > 0
    # without the fault nothing is lost
    clean = simulate(dataclasses.replace(exp, faults=[]))
    assert clean.flow("f").bytes_delivered == f.size


def test_switch_counts_but_ignores_pauses_on_priorities_without_pfc() -> None:
    """A storm on priority 0, which the switch's pfc_enable (lossless 3, 4) does not list:
    counted, not acted on; the lossy flow on it finishes as without the storm."""
    exp = storm_experiment(None)
    lossy = dataclasses.replace(exp.flows[0], dscp=0, priority=0)
    storm = PfcStorm("r:eth0", start=1e-3, end=6e-3, priorities=(0,))
    result = simulate(dataclasses.replace(exp, flows=[lossy], faults=[storm]))
    counters = result.port("sw:Ethernet4").priorities[0]
    assert counters.pause_received > 0 and counters.paused_time == 0
    flow = result.flow("f")
    assert flow.bytes_delivered == flow.size
    assert flow.completion is not None and flow.completion < 2e-3  # 1.6 ms of 2 MB at 10 Gb/s


def test_tx_off_holds_a_port_without_pause_frames() -> None:
    """A switch port's transmitter disabled from 0 to 1 ms (sonic-mgmt's TX-off): the lossy
    flow through it queues (no pause frame sent or counted) and leaves once it is enabled;
    from an experiment file as from the API."""
    exp = storm_experiment(None)
    lossy = dataclasses.replace(exp.flows[0], size=200_000, dscp=0, priority=0)
    held = experiment({"faults": [{"tx_off": "sw:Ethernet4", "start": 0, "end": "1ms"}]}).faults
    assert held == [TxOff("sw:Ethernet4", 0.0, 1e-3)]
    result = simulate(dataclasses.replace(exp, flows=[lossy], faults=held))
    flow = result.flow("f")
    assert flow.bytes_delivered == flow.size and flow.completion is not None
    assert 1e-3 < flow.completion < 1.1e-3  # queued behind the disabled transmitter
    assert result.total("pause_sent") == 0 and result.total("pause_received") == 0


def checked_fabric() -> tuple[Experiment, list[Flow]]:
    """Sixteen servers sending 256-byte packets across two leaves (a packet reaches leaf0 every
    nanosecond or so: faults share their calendar bucket with arrivals), each leaf with two
    uplinks to each of two spines."""
    fabric = leaf_spine(servers=16, leaves=2, spines=2, uplinks=2, speed=100e9)
    flows = [
        Flow(f"f{k}", f"srv{k}-nic0", f"srv{k ^ 1}-nic1", size=1_000_000, rate=90e9, cc="none",
             packet_bytes=256)
        for k in range(16)
    ]  # fmt: skip
    return fabric, flows


def test_routes_taken_ahead_of_arrivals_are_the_ones_taken_at_arrival() -> None:
    """The core takes an arrival's route before it runs (with its calendar bucket's, or one
    event ahead) and keeps it for it; a link going down or up drops what was kept. Checked,
    every kept route is taken again when used: while leaf0's uplinks go down and up under
    traffic (a change every microsecond or two), none differs."""
    fabric, flows = checked_fabric()
    cut = [
        LinkFault(f"leaf0:Ethernet{port}", down=(4 * k + port / 16) * 1e-6, up=(4 * k + 3) * 1e-6)
        for k in range(100)
        for port in (64, 72)  # an uplink to each spine (0-60: the servers)
    ]
    exp = with_flows(fabric, flows, faults=cut, duration=0.01)
    result = simulate(exp, check_routes=True)
    assert [e.kind for e in result.events].count("link_down") > 100
    kept, stale = result.routes_checked
    assert kept > 1_000 and stale == 0, result.routes_checked
    assert simulate(exp).routes_checked == (0, 0)


def test_routes_taken_ahead_follow_the_timed_route_tables() -> None:
    """The same check while timed route tables take over every microsecond (as the routing
    model's do after a fault), each the other's next hops in reverse order (ECMP picks another
    port for most packets)."""
    fabric, flows = checked_fabric()
    exp = with_flows(fabric, flows, duration=0.01)
    table = forwarding(exp.switches, exp.hosts, exp.links)
    flipped = {n: {h: ports[::-1] for h, ports in row.items()} for n, row in table.items()}
    hosts = [h.name for h in exp.hosts]
    nodes = [s.name for s in exp.switches] + hosts

    def prepare(built: Built) -> None:
        index = {f"{n}:{p}": i for i, (n, p) in enumerate(built.layout.ports)}
        for k in range(1, 400):
            rows = route_rows(flipped if k % 2 else table, nodes, hosts, index)
            native.library().sim_add_route_rows(
                built.handle, k * 1e-6, rows.n_dest, *native.rows(rows), len(rows.hops)
            )

    kept, stale = simulate(exp, prepare=prepare, check_routes=True).routes_checked
    assert kept > 1_000 and stale == 0, (kept, stale)
