"""`twin import` of gNMI answers and of Prometheus forms: sonic-gnmi's published answers
(tests/data/sonic-gnmi/, Apache-2.0, see its README) in the shapes gnmic and pygnmi print, a
scrape of the common SONiC exporter and a range query of Prometheus, each into a production
run; a switch or port the lab lacks is one line, exit 2, nothing written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.sim.test_telemetry import SMALL, twin
from twin.telemetry import gnmi

DATA = Path(__file__).resolve().parents[1] / "data" / "sonic-gnmi"
ANSWERS = {
    "COUNTERS/Ethernet*": "COUNTERS_Ethernet_wildcard_expected.txt",
    "COUNTERS/Ethernet68": "COUNTERS_Ethernet68.txt",
    "COUNTERS/Ethernet*/SAI_PORT_STAT_PFC_7_RX_PKTS": "COUNTERS_Ethernet_wildcard_PFC_7_RX.txt",
    "COUNTERS/Ethernet*/Queues": "COUNTERS_Ethernet_wildcard_Queues_expected.txt",
    "COUNTERS/Ethernet68/Pfcwd": "COUNTERS_Ethernet68_Pfcwd.txt",
    "PERIODIC_WATERMARKS/Ethernet16/PriorityGroups": (
        "PERIODIC_WATERMARKS_Ethernet16_PriorityGroups_expected.txt"
    ),
}
"""The path each published answer answers (sonic-gnmi's gnmi_server/server_test.go)."""
READ_NS = 1_800_000_000 * 10**9


def gnmic(values: dict[str, Any]) -> list[dict[str, Any]]:
    """`gnmic get` output: a notification per path."""
    return [
        {
            "source": "leaf1:50051",
            "timestamp": READ_NS + i,
            "time": "2027-01-15T08:00:00Z",
            "prefix": "COUNTERS_DB:",
            "target": "COUNTERS_DB",
            "updates": [{"Path": path, "values": {path: value}}],
        }
        for i, (path, value) in enumerate(values.items())
    ]


def pygnmi(values: dict[str, Any]) -> dict[str, Any]:
    """pygnmi's `get()`: one notification holding every update."""
    updates = [{"path": path, "val": value} for path, value in values.items()]
    note = {"timestamp": READ_NS, "prefix": None, "alias": None, "atomic": False}
    return {"notification": [{**note, "update": updates}]}


def published() -> dict[str, Any]:
    return {path: json.loads((DATA / name).read_text()) for path, name in ANSWERS.items()}


@pytest.mark.parametrize("shape", [gnmic, pygnmi])
def test_sonic_gnmi_answers_are_read_in_both_clients_shapes(shape: Any) -> None:
    dump = gnmi.parse(shape(published()), "answer.json")
    assert sorted(dump.ports) == ["Ethernet1", "Ethernet68"]
    assert sorted(dump.queues) == [("Ethernet68", 1), ("Ethernet68", 3), ("Ethernet68", 4), (
        "Ethernet7", 5)]  # fmt: skip
    assert list(dump.pg_watermarks) == [("Ethernet16", 5)]
    nonzero = {
        (port, name): v for port, stats in dump.ports.items() for name, v in stats.items() if v
    }
    assert nonzero == {
        ("Ethernet1", "SAI_PORT_STAT_PFC_7_RX_PKTS"): 1,
        ("Ethernet68", "SAI_PORT_STAT_PFC_7_RX_PKTS"): 2,
    }
    # a watermark is the largest of COUNTERS: (64) and the periodic one (192)
    assert dump.queue_watermarks[("Ethernet68", 1)] == 192
    assert dump.queue_watermarks[("Ethernet7", 5)] == 100
    assert dump.first == READ_NS / 1e9


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    lab = tmp_path_factory.mktemp("small") / "lab"
    assert twin("generate", str(SMALL), "-o", str(lab)).returncode == 0
    return lab


def refused(source: str, lab: Path, out: Path) -> str:
    done = twin("import", source, "--lab", str(lab), "-o", str(out))
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not out.exists()
    return done.stderr


def test_a_gnmi_answer_of_a_port_or_switch_the_lab_lacks_is_one_line(
    small: Path, tmp_path: Path
) -> None:
    answer = tmp_path / "leaf1.json"
    answer.write_text(json.dumps(gnmic(published())))
    out = tmp_path / "prod"
    assert "leaf1 has no port Ethernet1 in lab small" in refused(f"leaf1={answer}", small, out)
    assert "lab small has no switch spine9" in refused(f"spine9={answer}", small, out)
    answer.write_text(json.dumps({"notification": [{"update": [{"path": "X/Y", "val": 1}]}]}))
    assert "not a path of COUNTERS" in refused(f"leaf1={answer}", small, out)


SCRAPE = """\
# HELP sonic_interface_receive_packets_total Number of packets received on an interface
# TYPE sonic_interface_receive_packets_total counter
sonic_interface_receive_packets_total{device="Ethernet24",method="ucast"} 1000
sonic_interface_receive_packets_total{device="Ethernet24",method="broadcast"} 7
sonic_interface_receive_packets_total{device="Ethernet24",method="multicast"} 3
# TYPE sonic_interface_receive_errs_total counter
sonic_interface_receive_errs_total{device="Ethernet24",type="discard"} 4
sonic_interface_receive_errs_total{device="Ethernet24",type="pause"} 99
# TYPE sonic_interface_transmit_bytes_total counter
sonic_interface_transmit_bytes_total{device="Ethernet24"} 123456
# TYPE sonic_queue_dropped_packets_total counter
sonic_queue_dropped_packets_total{device="Ethernet24",queue="1"} 11
# TYPE sonic_queue_bytes_total counter
sonic_queue_bytes_total{device="Ethernet24",queue="1"} 5000
# TYPE sonic_queue_watermark_bytes_total counter
sonic_queue_watermark_bytes_total{device="Ethernet24",queue="3",WATERMARK} 2048
# TYPE sonic_interface_collector_success gauge
sonic_interface_collector_success 1
""".replace("WATERMARK", 'type="persistent",watermark="shared"')
"""A scrape of vinted/sonic-exporter (its names and labels: internal/collector/*.go)."""


def test_an_exporter_scrape_is_a_production_run(small: Path, tmp_path: Path) -> None:
    scrape = tmp_path / "leaf1.prom"
    scrape.write_text(SCRAPE)
    out = tmp_path / "prod"
    done = twin("import", f"leaf1={scrape}", "--lab", str(small), "-o", str(out))
    assert done.returncode == 0, done.stderr
    run = json.loads((out / "run.json").read_text())
    assert run["kind"] == "production" and run["differenced"] is False  # one scrape: totals
    counters = json.loads((out / "counters.json").read_text())
    fields, last = counters["fields"], counters["samples"][-1]["c"]["leaf1:Ethernet24"]
    got = dict(zip(fields, last, strict=True))
    # every method counted (ucast + broadcast + multicast); 802.3x pause is not a discard
    assert (got["rx_packets"], got["rx_dropped"], got["tx_bytes"]) == (1010, 4, 123456)
    rows = json.loads((out / "pfc.json").read_text())
    lossy = {r["priority"]: r["drops"]["lossy"] for r in rows if r["port"] == "leaf1:Ethernet24"}
    assert (
        lossy[1] == 11
    )  # queue 1 holds priority 1, lossy on the small fabric (an uplink: no bundle)
    marks = json.loads((out / "watermarks.json").read_text())
    assert marks["queues"]["leaf1:Ethernet24"]["3"] == 2048
    assert "leaf1 has no port Ethernet4" in refused(
        f"leaf1={_with(scrape, 'Ethernet4')}", small, tmp_path / "no"
    )
    assert "no switch label: give the source as SWITCH=FILE" in refused(
        str(scrape), small, tmp_path / "no"
    )


def _with(scrape: Path, device: str) -> Path:
    other = scrape.with_name(f"{device}.prom")
    other.write_text(scrape.read_text().replace("Ethernet24", device))
    return other


def matrix(*series: tuple[dict[str, str], list[tuple[float, int]]]) -> dict[str, Any]:
    result = [{"metric": m, "values": [[t, str(v)] for t, v in vs]} for m, vs in series]
    return {"status": "success", "data": {"resultType": "matrix", "result": result}}


def test_a_range_query_is_a_production_run_over_its_window(small: Path, tmp_path: Path) -> None:
    pause = {"__name__": "sonic_pfc_pause_frames_sent_total", "switch": "leaf1", "priority": "3"}
    tx = {
        "__name__": "sonic_interface_transmit_packets_total",
        "switch": "leaf2",
        "method": "ucast",
    }
    answer = matrix(
        ({**pause, "device": "Ethernet0"}, [(100.0, 50), (110.0, 80), (120.0, 5)]),  # a reset
        ({**tx, "device": "Ethernet24"}, [(100.5, 1000), (119.5, 4000)]),
        ({"__name__": "up", "instance": "leaf1:9101"}, [(100.0, 1), (120.0, 1)]),
    )
    query = tmp_path / "range.json"
    query.write_text(json.dumps(answer))
    out = tmp_path / "prod"
    done = twin("import", str(query), "--lab", str(small), "-o", str(out))
    assert done.returncode == 0, done.stderr
    run = json.loads((out / "run.json").read_text())
    assert run["windows"] == {
        "leaf1": {"start": 100.0, "end": 120.0},
        "leaf2": {"start": 100.5, "end": 119.5},
    }
    rows = json.loads((out / "pfc.json").read_text())
    (paused,) = [r for r in rows if r["pause_sent"]]
    assert (paused["port"], paused["priority"], paused["pause_sent"]) == ("leaf1:Ethernet0", 3, 35)
    counters = json.loads((out / "counters.json").read_text())
    column = counters["fields"].index("tx_packets")
    first, last = (s["c"]["leaf2:Ethernet24"][column] for s in counters["samples"])
    assert last - first == 3000
    answer["data"]["result"][1]["metric"]["switch"] = "spine9"
    query.write_text(json.dumps(answer))
    assert "lab small has no switch spine9" in refused(str(query), small, tmp_path / "no")
    answer["status"] = "error"
    query.write_text(json.dumps(answer))
    assert "not a successful query" in refused(str(query), small, tmp_path / "no")
