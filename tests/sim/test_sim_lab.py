"""The sim backend simulates the lab's own configs: an edit to any table it reads changes what
a scenario does (no root: simulated time only)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from labs.backend import Fault, Played
from labs.failures import Failures, Network
from labs.modelled import ModelledObserver
from labs.sim import lab as simlab
from labs.sim.backend import run
from tests.simlab import (
    Db,
    copy,
    edit_hosts,
    edit_switches,
    incast,
    play,
    small_lab,
    small_xoff,
    total,
)
from twin.intent.inputs import parse_model
from twin.lab.directory import Lab
from twin.model.fib import Fib, Lookup
from twin.scenario import plan
from twin.scenario.model import Scenario


def allreduce(message: int = 4_000_000) -> dict[str, Any]:
    """One ring All-Reduce over the four servers."""
    phase = {"at": 0, "kind": "all_reduce", "servers": "all", "qps": 2, "message": message}
    return {"name": "allreduce", "traffic": [phase]}


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_lab(tmp_path_factory.mktemp("lab") / "small")


def edited(base: Path, tmp_path: Path, change: Callable[[str, Db], None]) -> Path:
    lab = copy(base, tmp_path / "edited")
    edit_switches(lab, change)
    return lab


def every_port(db: Db, table: str, change: Callable[[dict[str, Any]], None]) -> None:
    for entry in db.get(table, {}).values():
        change(entry)


def iteration(lab: Path, message: int = 4_000_000) -> float:
    times = play(lab, allreduce(message)).extra["iterations"]["all_reduce@0"]["times_s"]
    assert times[0] is not None
    return float(times[0])


def test_pfc_enable_off_drops_instead_of_pausing(base: Path, tmp_path: Path) -> None:
    before = play(base, incast())
    assert total(before, "pause_sent") > 0 and total(before, "drops.lossless") == 0
    assert total(before, "drops.lossy") == 0

    def no_pfc(_: str, db: Db) -> None:
        every_port(db, "PORT_QOS_MAP", lambda e: e.update(pfc_enable=""))

    after = play(edited(base, tmp_path, no_pfc), incast())
    assert total(after, "pause_sent") == 0
    assert total(after, "drops.lossy") > 0


def test_wred_thresholds_set_the_marking(base: Path, tmp_path: Path) -> None:
    roce = incast("roce", None, 0.0005)
    before = total(play(base, roce), "ecn_marks")
    assert before > 0

    def lower(_: str, db: Db) -> None:
        every_port(
            db,
            "WRED_PROFILE",
            lambda e: e.update(green_min_threshold="15360", green_max_threshold="30720"),
        )

    assert total(play(edited(base, tmp_path / "low", lower), roce), "ecn_marks") > before

    def off(_: str, db: Db) -> None:
        every_port(
            db, "WRED_PROFILE", lambda e: e.update(ecn="ecn_none", wred_green_enable="false")
        )

    assert total(play(edited(base, tmp_path / "off", off), roce), "ecn_marks") == 0


def test_a_wred_profile_an_asic_refuses_leaves_the_queue_without_wred(
    base: Path, tmp_path: Path
) -> None:
    """A WRED profile without its maximum threshold (SAI's default 0, below the minimum) is
    refused by the switch, as the simulator models it: no marks, and the run is judged, not
    refused (it ended in exit 2, `queues.3: kmax below kmin`)."""
    roce = incast("roce", None, 0.0005)
    assert total(play(base, roce), "ecn_marks") > 0

    def no_max(_: str, db: Db) -> None:
        every_port(db, "WRED_PROFILE", lambda e: e.pop("green_max_threshold", None))

    assert total(play(edited(base, tmp_path, no_max), roce), "ecn_marks") == 0


def switch_bytes(played: Played, prio: int) -> int:
    """Bytes the switches sent at a priority."""
    rows = played.extra["pfc"]
    return sum(
        r["tx_bytes"]
        for r in rows
        if r["port"].startswith(("leaf", "spine")) and r["priority"] == prio
    )


def test_dscp_map_sets_the_class(base: Path, tmp_path: Path) -> None:
    before = play(base, incast(duration=0.0002))
    assert switch_bytes(before, 3) > 0 and switch_bytes(before, 1) == 0

    def to_tc1(_: str, db: Db) -> None:
        every_port(db, "DSCP_TO_TC_MAP", lambda m: m.update({"26": "1"}))

    after = play(edited(base, tmp_path, to_tc1), incast(duration=0.0002))
    assert switch_bytes(after, 3) == 0 and switch_bytes(after, 1) > 0


def queues_used(lab: Path) -> set[int]:
    occupancy = play(lab, incast(duration=0.0005)).extra["queues"]["queues"]
    return {int(q) for port in occupancy.values() for q in port}


def test_tc_to_queue_map_picks_the_queue(base: Path, tmp_path: Path) -> None:
    assert 3 in queues_used(base)

    def to_q4(_: str, db: Db) -> None:
        every_port(db, "TC_TO_QUEUE_MAP", lambda m: m.update({"3": "4"}))

    used = queues_used(edited(base, tmp_path, to_q4))
    assert 4 in used and 3 not in used


def test_tc_to_pg_map_into_a_lossy_pg_drops(base: Path, tmp_path: Path) -> None:
    def to_pg0(_: str, db: Db) -> None:
        every_port(db, "TC_TO_PRIORITY_GROUP_MAP", lambda m: m.update({"3": "0"}))

    after = play(edited(base, tmp_path, to_pg0), incast())
    assert total(after, "pause_sent") == 0 and total(after, "drops.lossy") > 0


def test_pfc_priority_to_queue_map_mismatch_is_lossy(base: Path, tmp_path: Path) -> None:
    def wrong(_: str, db: Db) -> None:
        every_port(db, "MAP_PFC_PRIORITY_TO_QUEUE", lambda m: m.update({"3": "4"}))

    after = play(edited(base, tmp_path, wrong), incast())
    assert total(after, "pause_sent") == 0 and total(after, "drops.lossy") > 0


def test_pfc_priority_to_pg_map_mismatch_is_lossy(base: Path, tmp_path: Path) -> None:
    def wrong(_: str, db: Db) -> None:
        every_port(db, "PFC_PRIORITY_TO_PRIORITY_GROUP_MAP", lambda m: m.update({"3": "0"}))

    after = play(edited(base, tmp_path, wrong), incast())
    assert total(after, "pause_sent") == 0 and total(after, "drops.lossy") > 0


def test_undersized_xoff_headroom_drops_lossless(base: Path, tmp_path: Path) -> None:
    after = play(edited(base, tmp_path, small_xoff), incast())
    assert total(after, "drops.lossless") > 0


def test_buffer_pg_without_lossless_profile_drops(base: Path, tmp_path: Path) -> None:
    def lossy_pg3(_: str, db: Db) -> None:
        for key, entry in db["BUFFER_PG"].items():
            if key.endswith("|3"):
                entry["profile"] = "ingress_lossy_profile"

    assert total(play(edited(base, tmp_path, lossy_pg3), incast()), "drops.lossless") > 0


def test_smaller_pool_pauses_sooner(base: Path, tmp_path: Path) -> None:
    short = incast(duration=0.001)
    before = total(play(base, short), "pause_sent")

    def small_pool(_: str, db: Db) -> None:
        db["BUFFER_POOL"]["ingress_lossless_pool"]["size"] = "6000000"

    assert total(play(edited(base, tmp_path, small_pool), short), "pause_sent") > before


def test_dynamic_th_sets_the_pg_threshold(base: Path, tmp_path: Path) -> None:
    short = incast(duration=0.001)
    before = total(play(base, short), "pause_sent")

    def tighter(_: str, db: Db) -> None:
        for profile in db["BUFFER_PROFILE"].values():
            if "xoff" in profile:
                profile["dynamic_th"] = "-4"

    assert total(play(edited(base, tmp_path, tighter), short), "pause_sent") > before


def test_buffer_queue_caps_a_lossy_queue(base: Path, tmp_path: Path) -> None:
    lossy = incast("storage", None, 0.001)
    before = total(play(base, lossy), "drops.lossy")

    def capped(_: str, db: Db) -> None:
        db["BUFFER_PROFILE"]["egress_lossy_profile"] = {
            "pool": "egress_lossy_pool",
            "size": "1518",
            "static_th": "100000",
        }

    assert total(play(edited(base, tmp_path, capped), lossy), "drops.lossy") > before


def share_of_roce(lab: Path) -> float:
    """Bytes of TC3 over TC1 that the leaves sent to server4 while both were backlogged."""
    scenario = {
        "name": "two-classes",
        "traffic": [
            {"at": 0, "duration": 0.001, "kind": "incast", "src": ["server1", "server2"],
             "dst": "server4", "class": "storage", "qps": 4},
            {"at": 0, "duration": 0.001, "kind": "incast", "src": ["server3"], "dst": "server4",
             "class": "storage", "dscp": 26, "qps": 8},
        ],
    }  # fmt: skip
    rows = [r for r in play(lab, scenario).extra["pfc"] if r["port"].startswith("leaf")]
    to4 = {"leaf3:Ethernet8", "leaf4:Ethernet8"}
    tc3 = sum(r["tx_bytes"] for r in rows if r["port"] in to4 and r["priority"] == 3)
    tc1 = sum(r["tx_bytes"] for r in rows if r["port"] in to4 and r["priority"] == 1)
    return float(tc3 / tc1)


def test_scheduler_weights_share_the_port(base: Path, tmp_path: Path) -> None:
    before = share_of_roce(base)

    def equal(_: str, db: Db) -> None:
        db["SCHEDULER"]["scheduler.rdma"]["weight"] = "20"

    after = share_of_roce(edited(base, tmp_path, equal))
    assert before > 2.5 and after < 1.5


def test_queue_table_names_the_scheduler(base: Path, tmp_path: Path) -> None:
    def strict_lossy(_: str, db: Db) -> None:
        for key, entry in db["QUEUE"].items():
            if key.endswith("|1"):
                entry["scheduler"] = "scheduler.cnp"

    assert share_of_roce(edited(base, tmp_path, strict_lossy)) < 0.2


def storm(seconds: float) -> dict[str, Any]:
    return {
        "name": "storm",
        "traffic": [
            {"at": 0, "duration": seconds, "kind": "backup", "src": "server1", "dst": "server4",
             "class": "roce", "gbps": 10, "qps": 1},
        ],
        "faults": [{"at": 0.001, "fault": "pfc-storm", "link": "server4:nic0"}],
        "sim": {"pause_storm": 0.01},
    }  # fmt: skip


def test_pfc_watchdog_catches_a_storm(base: Path, tmp_path: Path) -> None:
    kinds = [e["event"] for e in play(base, storm(0.3)).events]
    assert "watchdog_detect" in kinds

    def no_watchdog(_: str, db: Db) -> None:
        db.pop("PFC_WD", None)

    kinds = [e["event"] for e in play(edited(base, tmp_path, no_watchdog), storm(0.3)).events]
    assert "watchdog_detect" not in kinds and "pause_storm" in kinds


def test_port_speed_sets_the_pace(base: Path, tmp_path: Path) -> None:
    before = iteration(base)

    def slow(_: str, db: Db) -> None:
        every_port(db, "PORT", lambda e: e.update(speed="100000"))

    assert iteration(edited(base, tmp_path, slow)) > 2 * before


def test_cable_length_delays(base: Path, tmp_path: Path) -> None:
    before = iteration(base, 40_000)

    def long(_: str, db: Db) -> None:
        for lengths in db["CABLE_LENGTH"].values():
            lengths.update(dict.fromkeys(lengths, "2000m"))

    assert iteration(edited(base, tmp_path, long), 40_000) > before + 10e-6


def test_host_dscp_marks_roce(base: Path, tmp_path: Path) -> None:
    lab = copy(base, tmp_path / "edited")
    edit_hosts(lab, lambda _, h: h["rdma"].update(dscp=10))
    played = play(lab, incast("roce", None, 0.0002))
    assert {f["dscp_sent"] for f in played.flows} == {10}
    assert switch_bytes(played, 1) > 0 and switch_bytes(played, 3) == 0


def test_host_dcqcn_parameters_act(base: Path, tmp_path: Path) -> None:
    roce = incast("roce", None, 0.001)
    before = play(base, roce)
    lab = copy(base, tmp_path / "edited")
    edit_hosts(lab, lambda _, h: h["rdma"]["dcqcn"].update(g=0.5, min_rate_mbps=20000))
    after = play(lab, roce)
    delivered = [sum(f["bytes_delivered"] for f in p.flows) for p in (before, after)]
    assert delivered[0] != delivered[1]


def to_server4(seconds: float) -> dict[str, Any]:
    return {
        "name": "to-server4",
        "traffic": [
            {"at": 0, "duration": seconds, "kind": "backup", "src": "server1", "dst": "server4",
             "class": "roce", "gbps": 50, "qps": 2},
        ],
    }  # fmt: skip


def test_static_route_in_frr_conf_is_followed(base: Path, tmp_path: Path) -> None:
    assert total(play(base, to_server4(0.0002)), "drops.no_route") == 0
    lab = copy(base, tmp_path / "edited")
    address = json.loads((lab / "configs/server4/host.json").read_text())["address"]
    for leaf in ("leaf1", "leaf2"):
        conf = lab / "configs" / leaf / "frr.conf"
        conf.write_text(f"ip route {address.split('/')[0]}/32 blackhole\n" + conf.read_text())
    assert total(play(lab, to_server4(0.0002)), "drops.no_route") > 0


def test_fib_epochs_apply_at_their_times(base: Path) -> None:
    lab = Lab.open(base)
    scenario = parse_model(Scenario, {"settle": 0, **to_server4(0.0004)}, "test")
    timeline = plan.timeline(lab, scenario)
    start = ModelledObserver(lab).fib()
    dropped: Fib = {
        **start,
        **{leaf: dict.fromkeys(start[leaf], ()) for leaf in ("leaf1", "leaf2")},
    }
    played = run(lab, timeline, fibs=[(0.0, "start", start), (0.0002, "blackhole", dropped)])
    lost = total(played, "drops.no_route")
    assert lost > 0
    assert played.fibs["blackhole"][0] == 0.0002
    sent = sum(f["sent"] for f in played.flows)
    assert sum(f["received"] for f in played.flows) < 0.6 * sent


def test_faults_recompute_the_fib_after_the_convergence_delay(base: Path) -> None:
    scenario = {
        **to_server4(0.0004),
        "faults": [{"at": 0.0001, "fault": "link-down", "link": "leaf3:spine1"}],
        "sim": {"convergence": 0.00005},
    }
    played = play(base, scenario)
    (t0, start), (t1, label) = played.extra["sim"]["fibs"]
    assert (t0, start, label) == (0.0, "start", "fault1-link-down")
    assert t1 == pytest.approx(0.00015)
    leaf3 = {p: h for p, h in played.fibs["fault1-link-down"][1]["leaf3"].items()}
    assert all(hop.node != "spine1" for hops in leaf3.values() for hop in hops)


def test_the_sku_sets_the_cells_and_buffer_profiles_the_offsets(base: Path, tmp_path: Path) -> None:
    """DEVICE_METADATA's hwsku picks the ASIC's cell (twin/platforms/asics.yml: Trident2 208 B
    for the VS default, Tomahawk 3 254 B); a lossless profile's xon_offset is its PG's."""
    from labs.sim.lab import network

    def tomahawk3(_: str, db: Db) -> None:
        db["DEVICE_METADATA"]["localhost"]["hwsku"] = "DellEMC-Z9332f-O32"
        for profile in db.get("BUFFER_PROFILE", {}).values():
            if "xoff" in profile:
                profile["xon_offset"] = "2496"

    before = network(Lab(base)).switches
    after = network(Lab(edited(base, tmp_path, tomahawk3))).switches
    assert {s.cell_bytes for s in before} == {208} and {s.cell_bytes for s in after} == {254}
    offsets = {q.pg(3).xon_offset for s in after for q in s.port_qos.values() if 3 in q.lossless}
    assert offsets == {2496}
    assert {q.ecn_at for s in after for q in s.port_qos.values()} == {"dequeue"}


def test_each_switch_routes_each_server_by_its_longest_prefix_after_faults(
    base: Path,
) -> None:
    """`labs.sim.lab.routes` against a longest-prefix lookup per switch and server, in the
    FIBs after faults, given the intact FIB's table (`before`: rows of switches whose routes
    did not change are kept, the others made again)."""
    lab = Lab.open(base)
    intact = Network(lab, Failures())
    addresses = simlab.network(lab).addresses
    first = simlab.routes(intact.wiring, intact.fib, addresses)
    for fault in (Fault("link-down", link="leaf1:spine1"), Fault("node-down", node="spine2")):
        fib = intact.after(fault).fib
        table = simlab.routes(intact.wiring, fib, addresses, (intact.fib, first))
        find = Lookup(fib)
        for switch in intact.wiring.routers:
            assert table[switch] == {
                host: simlab._egress(intact.wiring, switch, find(switch, int(a)) or ())
                for host, a in addresses.items()
            }
        assert any(table[s] != first[s] for s in table), fault


def test_nics_marked_alike_share_one_profile_and_others_keep_theirs(
    base: Path, tmp_path: Path
) -> None:
    """Equal NIC profiles are one object (the core's build works out a profile's tables once
    per object); a server marking RoCE with another DSCP keeps a profile of its own."""
    lab = copy(base, tmp_path / "edited")
    first = sorted(Lab.open(lab).nodes("server"))[0]
    edit_hosts(lab, lambda name, h: h["rdma"].update(dscp=10) if name == first else None)
    nics = {h.name: h.qos for h in simlab.network(Lab.open(lab)).hosts}
    others = {id(q) for name, q in nics.items() if name != first}
    assert len(nics) == 4 and len(others) == 1
    assert id(nics[first]) not in others and nics[first].dscp_to_tc[10] == 3
