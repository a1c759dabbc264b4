"""The one verdict on broken reference labs: what the main job runs (`twin run LAB SCENARIO
--backend sim`: the default scenario's data plane on the packet simulator, and every static
validator) fails each break with exit 1 and a failing row naming the broken device, and
passes the healthy reference.

Each break is made as a person would make it, by editing the lab directory's configs and host
files: PFC on the wrong priority on one leaf, RoCE's DSCP mapped lossy on one spine, 300 m
cables with the headroom of 40 m, a static route loop, ECN off on the receiving leaves of the
default scenario's incast only, hosts marking the backup into DSCP 26, BFD removed from one
leaf, ECN off on the incast's senders or on its receiver, one server's DCQCN floor at line
rate, one server's RoCE on priority 4, and on a leaf the default scenario sends no bulk
through, the RoCE queue's weight 1 against 99 or a STRICT storage queue; routing policy (an
inbound route-map dropping a rack, an outbound prefix-list, one path per prefix on a spine).
The reference fabric (50 servers, 12 switches) costs about 10 s a run on the simulator.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import lab_name
from twin.cli.main import main
from twin.cli.verbs.run import DEFAULT_SCENARIO, REFERENCE
from twin.intent import fabric as intent
from twin.lab import directory as labdir
from twin.lab.directory import Lab
from validators.examples import add_frr_policy, roce_weight_1_against_99, strict_bulk_queue

Db = dict[str, Any]
Break = Callable[[Path], None]
INCAST_LEAVES = ("leaf3", "leaf4")
"""The MLAG pair of server14, where the default scenario's incast converges."""
INCAST_SENDERS = [f"server{n}" for n in (*range(1, 9), *range(39, 47))]
"""The default scenario's incast senders: server1-8 and server39-46."""
INCAST_RECEIVER = "server14"
QUIET_LEAF = "leaf1"
"""A leaf the default scenario's backup (server27 to server40) does not cross."""


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference fabric under a lab name of ours."""
    data = yaml.safe_load(REFERENCE.read_text())
    data["name"] = lab_name("brk")
    out = tmp_path_factory.mktemp("reference") / "lab"
    labdir.generate(intent.parse(data, str(REFERENCE)), out, str(REFERENCE))
    return out


def edit_db(lab: Path, switch: str, change: Callable[[Db], None]) -> None:
    path = lab / "configs" / switch / "config_db.json"
    db = json.loads(path.read_text())
    change(db)
    path.write_text(json.dumps(db, indent=2))


def edit_text(lab: Path, node: str, name: str, change: Callable[[str], str]) -> None:
    path = lab / "configs" / node / name
    path.write_text(change(path.read_text()))


def pfc_on_priority_4(lab: Path) -> None:
    """leaf3 enables PFC on priority 4 instead of 3 on every port."""

    def change(db: Db) -> None:
        for entry in db["PORT_QOS_MAP"].values():
            if entry.get("pfc_enable") == "3":
                entry["pfc_enable"] = "4"

    edit_db(lab, "leaf3", change)


def roce_lossy_on_spine2(lab: Path) -> None:
    """spine2 maps DSCP 26 to TC 0."""
    edit_db(lab, "spine2", lambda db: db["DSCP_TO_TC_MAP"]["RDMA"].update({"26": "0"}))


def cables_300m(lab: Path) -> None:
    """Every leaf-spine cable is 300 m at both ends; the headroom stays sized for 40 m."""

    def change(db: Db) -> None:
        for lengths in db["CABLE_LENGTH"].values():
            for port, length in lengths.items():
                if length == "40m":
                    lengths[port] = "300m"

    for switch in sorted(p.name for p in (lab / "configs").iterdir()):
        if switch.startswith(("leaf", "spine")):
            edit_db(lab, switch, change)


def static_route_loop(lab: Path) -> None:
    """leaf1 sends server14's subnet to spine1, spine1 sends it back to leaf1."""
    edit_text(lab, "leaf1", "frr.conf", lambda t: t + "ip route 10.2.0.32/27 10.1.0.1\n")
    edit_text(lab, "spine1", "frr.conf", lambda t: t + "ip route 10.2.0.32/27 10.1.0.0\n")


def ecn_off_on_incast_leaves(lab: Path) -> None:
    """The receiving leaves of the incast stop marking: WRED/ECN off on their profiles."""

    def change(db: Db) -> None:
        for profile in db["WRED_PROFILE"].values():
            profile.update(ecn="ecn_none", wred_green_enable="false")

    for leaf in INCAST_LEAVES:
        edit_db(lab, leaf, change)


def backup_into_dscp_26(lab: Path) -> None:
    """Every server marks the storage class (the backup) with RoCE's DSCP 26."""
    for path in sorted((lab / "configs").glob("server*/host.json")):
        host = json.loads(path.read_text())
        for rule in host["dscp_marking"]:
            if rule["class"] == "storage":
                rule["dscp"] = 26
        path.write_text(json.dumps(host, indent=2))


def edit_rdma(lab: Path, servers: list[str], change: Callable[[Db], None]) -> None:
    for server in servers:
        path = lab / "configs" / server / "host.json"
        host = json.loads(path.read_text())
        change(host["rdma"])
        path.write_text(json.dumps(host, indent=2))


def ecn_off_on_incast_senders(lab: Path) -> None:
    """The incast's 16 senders turn their RDMA stack's ECN off."""
    edit_rdma(lab, INCAST_SENDERS, lambda rdma: rdma.update(ecn=False))


def ecn_off_on_the_incast_receiver(lab: Path) -> None:
    """The incast's receiver turns its RDMA stack's ECN off: it sends no CNP."""
    edit_rdma(lab, [INCAST_RECEIVER], lambda rdma: rdma.update(ecn=False))


def dcqcn_floor_at_line_rate_on_server1(lab: Path) -> None:
    """server1's DCQCN may not cut its rate below 400 Gb/s."""
    edit_rdma(lab, ["server1"], lambda rdma: rdma["dcqcn"].update(min_rate_mbps=400000.0))


def roce_on_priority_4_on_server1(lab: Path) -> None:
    """server1 sends RoCE on priority 4, which the switches do not pause."""
    edit_rdma(lab, ["server1"], lambda rdma: rdma.update(pfc_priority=4))


def roce_weight_1_on_quiet_leaf(lab: Path) -> None:
    edit_db(lab, QUIET_LEAF, roce_weight_1_against_99)


def strict_bulk_queue_on_quiet_leaf(lab: Path) -> None:
    edit_db(lab, QUIET_LEAF, strict_bulk_queue)


def no_bfd_on_leaf2(lab: Path) -> None:
    """leaf2's BGP sessions lose BFD (the profile line removed)."""
    edit_text(
        lab, "leaf2", "frr.conf", lambda t: t.replace(" neighbor FABRIC bfd profile fabric\n", "")
    )


def route_map_drops_a_rack_on_leaf1(lab: Path) -> None:
    """leaf1 takes in everything from the spines but server14's rack (10.2.0.32/27)."""
    add_frr_policy(
        Lab.open(lab),
        "leaf1",
        "  neighbor FABRIC route-map FROM-SPINES in",
        "ip prefix-list RACK seq 5 permit 10.2.0.32/27\n"
        "route-map FROM-SPINES deny 10\n match ip address prefix-list RACK\nexit\n"
        "route-map FROM-SPINES permit 20\nexit\n",
    )


def prefix_list_out_on_leaf3(lab: Path) -> None:
    """leaf3 stops announcing its own rack's subnet (the incast's receivers) to the spines."""
    add_frr_policy(
        Lab.open(lab),
        "leaf3",
        "  neighbor FABRIC prefix-list NO-OWN out",
        "ip prefix-list NO-OWN seq 5 deny 10.2.0.32/27\nip prefix-list NO-OWN seq 10 permit any\n",
    )


def one_path_on_spine1(lab: Path) -> None:
    """spine1 keeps one path per prefix (`maximum-paths 1`) toward the MLAG pairs."""
    edit_text(lab, "spine1", "frr.conf", lambda t: t.replace("maximum-paths 64", "maximum-paths 1"))


BREAKS: dict[str, tuple[Break, set[str]]] = {
    "pfc-priority-4": (pfc_on_priority_4, {"leaf3"}),
    "roce-lossy-spine2": (roce_lossy_on_spine2, {"spine2"}),
    "cables-300m": (cables_300m, {"leaf1", "spine1"}),
    "static-loop": (static_route_loop, {"leaf1", "spine1"}),
    "ecn-off-receivers": (ecn_off_on_incast_leaves, set(INCAST_LEAVES)),
    "backup-dscp-26": (backup_into_dscp_26, {"server27"}),
    "no-bfd-leaf2": (no_bfd_on_leaf2, {"leaf2"}),
    "ecn-off-senders": (ecn_off_on_incast_senders, {"server1"}),
    "ecn-off-receiver": (ecn_off_on_the_incast_receiver, {INCAST_RECEIVER}),
    "dcqcn-floor-server1": (dcqcn_floor_at_line_rate_on_server1, {"server1"}),
    "roce-priority-4-server1": (roce_on_priority_4_on_server1, {"server1"}),
    "roce-weight-1-leaf1": (roce_weight_1_on_quiet_leaf, {QUIET_LEAF}),
    "strict-bulk-leaf1": (strict_bulk_queue_on_quiet_leaf, {QUIET_LEAF}),
    "route-map-in-leaf1": (route_map_drops_a_rack_on_leaf1, {"leaf1"}),
    "prefix-list-out-leaf3": (prefix_list_out_on_leaf3, {"leaf3"}),
    "maximum-paths-1-spine1": (one_path_on_spine1, {"spine1"}),
}
"""Break -> (the edit, the devices a failing row must name: one of them at least)."""

ROW = re.compile(r"^(\S+)\s{2,}(.+?)\s{2,}(pass|fail|not-observable|info)\s{2,}(.*)$")


def run_sim(lab: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[tuple[str, ...]]]:
    """`twin run LAB DEFAULT_SCENARIO --backend sim`: exit code and the table's rows."""
    code = main(["run", str(lab), str(DEFAULT_SCENARIO), "--backend", "sim"])
    out = capsys.readouterr().out
    rows = [m.groups() for line in out.splitlines() if (m := ROW.match(line))]
    return code, rows


def failing(rows: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    return [r for r in rows if r[2] == "fail"]


def test_the_healthy_reference_passes_and_exercises_the_lossless_plane(
    reference: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, rows = run_sim(reference, capsys)
    assert code == 0, failing(rows)
    by = {(r[0], r[1]): r for r in rows}
    assert by[("pfc_consistency", "fabric")][2] == "pass"  # the static validators are in
    marks = by[("ecn_behaviour", "ecn before pfc, priority 3")]
    assert marks[2] == "pass" and int(marks[3].split()[0]) > 1000, marks  # the incast marked
    assert by[("lossless_isolation", "loss roce")][3].startswith("lossless 0 of ")


@pytest.mark.parametrize("name", sorted(BREAKS))
def test_a_broken_reference_fails_naming_the_device(
    name: str, reference: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edit, devices = BREAKS[name]
    lab = Path(shutil.copytree(reference, tmp_path / name))
    edit(lab)
    code, rows = run_sim(lab, capsys)
    assert code == 1, rows
    named = [r for r in failing(rows) if any(re.search(rf"\b{d}\b", r[3]) for d in devices)]
    assert named, failing(rows)


def test_no_static_leaves_a_static_break_out_of_the_verdict(
    reference: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """BFD removed shows only in the configs (the simulator plays no BFD): with --no-static
    the run passes, without it fails; the row is failover_budget's."""
    lab = Path(shutil.copytree(reference, tmp_path / "nobfd"))
    no_bfd_on_leaf2(lab)
    code = main(["run", str(lab), str(DEFAULT_SCENARIO), "--backend", "sim", "--no-static"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "failover_budget" not in out


def test_ecn_off_on_the_incast_senders_pauses_the_fabric_in_the_simulator(
    reference: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The simulator plays each NIC's own ECN: with the incast's senders ignoring CNPs, the
    switches pause where the healthy reference sends no pause frame (its ECN marks hold the
    incast), and the run fails on the data plane alone (--no-static)."""
    lab = Path(shutil.copytree(reference, tmp_path / "ecnoff"))
    ecn_off_on_incast_senders(lab)
    code = main(["run", str(lab), str(DEFAULT_SCENARIO), "--backend", "sim", "--no-static"])
    rows = {
        (m[1], m[2]): m for line in capsys.readouterr().out.splitlines() if (m := ROW.match(line))
    }
    assert code == 1
    drops = rows[("pfc_behaviour", "lossless drops")][4]
    assert int(re.findall(r"\((\d+) pause frames sent\)", drops)[0]) > 1000, drops
    assert rows[("ecn_behaviour", "ecn before pfc, priority 3")][3] == "fail"


def test_a_starved_roce_scheduler_fails_collective_efficiency(
    reference: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """leaf7 (server40's, where the backup lands) gives RoCE DWRR weight 1 and the lossy queues
    99: the All-Reduce's iterations beside the backup stretch, and the spread the intent
    allows is exceeded on the reference, its ranks all keeping their links."""

    def starve(db: Db) -> None:
        db["SCHEDULER"]["scheduler.rdma"]["weight"] = "1"
        db["SCHEDULER"]["scheduler.lossy"]["weight"] = "99"

    lab = Path(shutil.copytree(reference, tmp_path / "starved"))
    edit_db(lab, "leaf7", starve)
    code = main(["run", str(lab), str(DEFAULT_SCENARIO), "--backend", "sim", "--no-static"])
    rows = [m.groups() for line in capsys.readouterr().out.splitlines() if (m := ROW.match(line))]
    assert code == 1
    (row,) = [r for r in failing(rows) if r[0] == "collective_efficiency"]
    assert "p99/p50" in row[3] and "left out" not in row[3], row
