"""twin.outputs.metrics without a running twin: run exports in OpenMetrics that prometheus_client's
OpenMetrics parser reads (every sample timestamped, grouped by series), the sonic-exporter
flavour, and the live collector's background reads (a scrape never waits on BGP or FIBs)."""

from __future__ import annotations

import json
import threading
from ipaddress import IPv4Network

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from labs.backend import COUNTER_FIELDS, Observer, Session
from tests.synthetic import SyntheticRun, generate_lab, uplinks
from twin.lab.directory import Lab
from twin.model.fib import Fib
from twin.outputs.metrics import Live, Snapshot, of_run, openmetrics
from twin.scenario.observations import Observations

Series = dict[tuple[str, tuple[tuple[str, str], ...]], list[tuple[float | None, float]]]


def parse(text: str) -> Series:
    """(sample name, sorted labels) -> [(timestamp, value)] in file order, as prometheus_client's
    OpenMetrics parser reads the text (it refuses samples not grouped by series)."""
    series: Series = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            t = None if s.timestamp is None else float(s.timestamp)
            series.setdefault((s.name, tuple(sorted(s.labels.items()))), []).append((t, s.value))
    return series


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    return generate_lab(tmp_path_factory.mktemp("om") / "lab", "om")


def live_run(lab: Lab, name: str) -> Observations:
    """A netns-shaped run: counters every second for 5 s, BGP and FIBs at its end."""
    tx = {leaf: [100 * (i + 1) for i in range(len(ports))] for leaf, ports in uplinks(lab).items()}
    return SyntheticRun(lab, name=name, uplink_tx=tx).write()


def assert_loadable(text: str) -> Series:
    """Parsed, ends with # EOF, every sample timestamped, each series in time order."""
    assert text.endswith("# EOF\n")
    series = parse(text)
    assert series
    for key, points in series.items():
        times = [t for t, _ in points if t is not None]
        assert len(times) == len(points), key
        assert times == sorted(times) and len(set(times)) == len(times), key
    return series


def test_a_live_run_exports_every_sample_timestamped_and_grouped_by_series(lab: Lab) -> None:
    obs = live_run(lab, "live")
    series = assert_loadable(openmetrics(of_run(obs, lab)).decode())
    samples = obs.counters["samples"]
    leaf, ports = next(iter(uplinks(lab).items()))
    key = ("sonic_interface_transmit_packets_total", (("port", ports[0]), ("switch", leaf)))
    tx = COUNTER_FIELDS.index("tx_packets")
    want = [(float(s["t"]), float(s["c"][f"{leaf}:{ports[0]}"][tx])) for s in samples]
    assert series[key] == want and len(want) > 1
    ended = float(obs.run["ended"])
    (info,) = (p for (n, _), p in series.items() if n == "twin_info")
    assert info == [(ended, 1.0)]  # what has no time of its own: at the run's end
    assert any(n == "sonic_bgp_session_established" for n, _ in series)


def test_a_hybrid_run_exports_the_simulators_counts_over_the_run(lab: Lab) -> None:
    obs = live_run(lab, "hybrid")
    leaf, ports = next(iter(uplinks(lab).items()))
    row = {
        "port": f"{leaf}:{ports[0]}",
        "priority": 3,
        "pause_sent": 7,
        "pause_received": 0,
        "paused_s": 0.5,
        "ecn_marks": 2,
        "drops": {"lossless": 0, "lossy": 1},
    }
    (obs.path / "pfc.json").write_text(json.dumps([row]))
    queues = {"interval": 1e-5, "queues": {row["port"]: {"3": [0, 900, 400]}}, "pgs": {}}
    (obs.path / "queues.json").write_text(json.dumps(queues))
    series = assert_loadable(openmetrics(of_run(Observations.open(obs.path), lab)).decode())
    labels = (("port", ports[0]), ("priority", "3"), ("switch", leaf))
    started, ended = float(obs.run["started"]), float(obs.run["ended"])
    counted = [(started, 0.0), (ended, 7.0)]  # from 0 at the start: increase() has two samples
    assert series[("sonic_pfc_pause_frames_sent_total", labels)] == counted
    watermark = (("port", ports[0]), ("queue", "3"), ("switch", leaf))
    assert series[("sonic_queue_watermark_bytes", watermark)] == [(ended, 900.0)]


@pytest.mark.parametrize("epoch", [None, 1_800_000_000.0])
def test_a_simulator_run_is_put_on_its_epoch(lab: Lab, epoch: float | None) -> None:
    obs = live_run(lab, "simulated")
    run = {**obs.run, "backend": "sim", "started": 0.0, "ended": 0.002}
    samples = [{**s, "t": i * 0.001} for i, s in enumerate(obs.counters["samples"])]
    samples.insert(1, {**samples[0], "t": 0.0002})  # within the first sample's millisecond
    (obs.path / "run.json").write_text(json.dumps(run))
    (obs.path / "counters.json").write_text(json.dumps({**obs.counters, "samples": samples}))
    written = (obs.path / "run.json").stat().st_mtime
    series = assert_loadable(openmetrics(of_run(Observations.open(obs.path), lab, epoch)).decode())
    zero = written if epoch is None else epoch
    leaf, ports = next(iter(uplinks(lab).items()))
    key = ("sonic_interface_transmit_packets_total", (("port", ports[0]), ("switch", leaf)))
    times = [t for t, _ in series[key]]
    # Prometheus keeps milliseconds: the samples at 0 and 0.2 ms are one
    want = [round((zero + 0.001 * i) * 1e3) / 1e3 for i in range(len(samples) - 1)]
    assert times == pytest.approx(want, abs=1e-4, rel=0)


def test_the_sonic_exporter_flavour_names_and_labels_as_the_exporter(lab: Lab) -> None:
    obs = live_run(lab, "flavour")
    ours = parse(openmetrics(of_run(obs, lab)).decode())
    theirs = assert_loadable(openmetrics(of_run(obs, lab), "sonic-exporter").decode())
    leaf, ports = next(iter(uplinks(lab).items()))
    port = (("port", ports[0]), ("switch", leaf))
    device = (("device", ports[0]), ("switch", leaf))
    pairs = [
        ("sonic_interface_transmit_packets_total", (*device, ("method", "ucast"))),
        ("sonic_interface_receive_bytes_total", device),
        ("sonic_interface_receive_errs_total", (*device, ("type", "discard"))),
    ]
    for twin_name, (name, labels) in zip(
        (
            "sonic_interface_transmit_packets_total",
            "sonic_interface_receive_bytes_total",
            "sonic_interface_receive_dropped_packets_total",
        ),
        pairs,
        strict=True,
    ):
        assert theirs[(name, tuple(sorted(labels)))] == ours[(twin_name, port)]
    assert not any(k == "port" for _, labels in theirs for k, _ in labels)
    assert not any("dropped_packets" in name for name, _ in theirs)


def test_the_sonic_exporter_flavour_has_watermarks_as_its_counters() -> None:
    snap = Snapshot(
        "lab",
        "sim",
        {"leaf1"},
        [],
        watermarks={"queues": {"leaf1:Ethernet0": {"3": 10}}, "pgs": {}},
        at=1_800_000_000.0,
    )
    text = openmetrics(snap, "sonic-exporter").decode()
    assert "# TYPE sonic_queue_watermark_bytes counter" in text
    labels = {"device": "Ethernet0", "queue": "3", "switch": "leaf1"}
    labels |= {"type": "persistent", "watermark": "shared"}
    key = ("sonic_queue_watermark_bytes_total", tuple(sorted(labels.items())))
    assert parse(text)[key] == [(1_800_000_000.0, 10.0)]


def test_ecmp_width_is_exported_to_other_leaves_subnets_down_to_one(lab: Lab) -> None:
    obs = live_run(lab, "ecmp")
    snap = of_run(obs, lab)
    assert snap.fib is not None and snap.subnets is not None
    fib: Fib = {node: dict(routes) for node, routes in snap.fib.items()}
    leaf = "leaf1"
    own = str(lab.graph.nodes[leaf]["subnet"])
    (other, *_) = snap.subnets[leaf]
    assert own not in snap.subnets[leaf]  # a connected route is no ECMP group
    route = IPv4Network(other)
    fib[leaf][route] = fib[leaf][route][:1]  # an uplink lost
    snap.fib = fib
    series = parse(openmetrics(snap).decode())
    width = series[("sonic_route_ecmp_width", (("prefix", other), ("switch", leaf)))]
    assert [v for _, v in width] == [1.0]


class Reads:
    """A live twin's observer whose BGP and FIB reads block until `released` (a slow vtysh
    on a loaded machine), and refuse to run on the scraping thread."""

    def __init__(self, released: threading.Event, gone: bool = False) -> None:
        self.released, self.gone = released, gone

    def _slow(self) -> None:
        if threading.current_thread() is threading.main_thread():
            raise AssertionError("BGP or FIB read on the scrape's path")
        self.released.wait()

    def counters(self) -> dict[str, list[int]]:
        if self.gone:
            raise FileNotFoundError("no namespace: the twin was destroyed")
        return {"leaf1:Ethernet0": list(range(len(COUNTER_FIELDS)))}

    def bgp(self) -> list[Session]:
        self._slow()
        return [Session("leaf1", "10.0.0.1", "spine1", "Established", 3, 1000)]

    def fib(self) -> Fib:
        self._slow()
        return {}

    def watch(self) -> object:
        raise NotImplementedError


class Twin:
    """A `twin.outputs.metrics.Source` whose observer is `Reads`."""

    name = "netns"
    capabilities = frozenset({"counters", "bgp", "fib"})

    def __init__(self, reads: Reads) -> None:
        self.reads = reads

    def observer(self, lab: Lab) -> Observer:
        observer: Observer = self.reads  # type: ignore[assignment]  # watch() unused here
        return observer


def scrape(live: Live) -> Series:
    """What a scrape accepting OpenMetrics is answered (`twin.outputs.metrics.Server`)."""
    body, kind = live.exposition(True)
    assert kind.startswith("application/openmetrics-text")
    return parse(body.decode())


def test_a_scrape_serves_the_counters_while_bgp_and_fib_reads_block(lab: Lab) -> None:
    released = threading.Event()
    live = Live(lab, Twin(Reads(released)))
    live.start()
    try:
        got = scrape(live)
        tx = (
            "sonic_interface_transmit_packets_total",
            (("port", "Ethernet0"), ("switch", "leaf1")),
        )
        assert got[tx] == [(None, float(COUNTER_FIELDS.index("tx_packets")))]
        assert not any(name.startswith("sonic_bgp") for name, _ in got)
    finally:
        released.set()
        live.stop()
    got = scrape(live)  # the reads released: their values served too
    up = (
        "sonic_bgp_session_established",
        (("peer", "10.0.0.1"), ("peer_name", "spine1"), ("switch", "leaf1")),
    )
    assert got[up] == [(None, 1.0)]
    assert {dict(labels)["part"] for n, labels in got if n == "twin_read_timestamp_seconds"} == {
        "bgp",
        "counters",
        "fib",
    }


def test_a_destroyed_twin_is_scraped_as_down_with_no_values(lab: Lab) -> None:
    released = threading.Event()
    released.set()
    live = Live(lab, Twin(Reads(released, gone=True)))
    live.start()
    live.stop()
    got = scrape(live)
    assert got[("twin_up", ())] == [(None, 0.0)]
    assert not any(
        name.startswith("sonic_interface") and got[(name, labels)] for name, labels in got
    )
