"""Prometheus and OpenMetrics: a simulator run exported with `twin report --openmetrics` (its
values equal the run's files), the exports of simulator, live and hybrid runs backfilled by
the real promtool and queried through a real Prometheus with every query of the Grafana
dashboard, the live endpoint of `twin deploy --metrics` on the fake backend, and `twin run
--metrics` scraped, by this test and by a real Prometheus, while a real netns twin of the
small fabric plays a scenario, checked against the counters that run recorded, and
Prometheus's range query of it imported as production (root and FRR; under the heavy
lock)."""

from __future__ import annotations

import base64
import contextlib
import json
import re
import secrets
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import lab_name, twin_cli, write_lab
from tests.simlab import paused_incast
from tests.synthetic import SyntheticRun, full_fib, generate_lab, uplinks
from twin.lab.directory import Lab
from twin.pytest_plugin import Twin
from twin.scenario.observations import Observations

TWIN = Path(sys.executable).with_name("twin")
REPO = Path(__file__).parents[2]
DASHBOARD = REPO / "examples" / "grafana" / "fabric-twin.json"
FLAVOUR = ("--metrics-flavour", "sonic-exporter")
"""The dashboard's (docs/metrics.md)."""
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str) -> Samples:
    """(sample name, sorted labels) -> value, of an exposition (Prometheus or OpenMetrics)."""
    if text.rstrip().endswith("# EOF"):
        from prometheus_client.openmetrics.parser import (
            text_string_to_metric_families as openmetrics_families,
        )

        families = openmetrics_families(text)
    else:
        families = text_string_to_metric_families(text)
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}


def port(node: str, name: str, **more: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted({"switch": node, "port": name, **more}.items()))


def device(node: str, name: str) -> tuple[tuple[str, str], ...]:
    """A port's packet counter labels in the sonic-exporter flavour (the dashboard's)."""
    return tuple(sorted({"switch": node, "device": name, "method": "ucast"}.items()))


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory: pytest.TempPathFactory) -> Observations:
    """A lossless incast on the small lab in simulated time; pool shrunk so PFC pauses."""
    run = paused_incast(tmp_path_factory.mktemp("om") / "lab", [], {"pfc_behaviour": {}})
    return Observations.open(run)


def test_openmetrics_export_of_a_sim_run_equals_its_files(sim_run: Observations) -> None:
    out = sim_run.path.parent / "metrics.om"
    done = subprocess.run(
        [str(TWIN), "report", str(sim_run.path), "--openmetrics", str(out)],
        capture_output=True,
        text=True,
    )
    assert done.returncode in (0, 1) and done.stderr == "", done.stderr
    text = out.read_text()
    assert text.endswith("# EOF\n")
    got = samples(text)
    last = sim_run.counters["samples"][-1]["c"]
    fields = sim_run.counters["fields"]
    key = next(k for k in last if k.startswith("leaf1:"))
    node, name = key.split(":")
    for field, metric in (
        ("tx_packets", "sonic_interface_transmit_packets_total"),
        ("rx_bytes", "sonic_interface_receive_bytes_total"),
    ):
        assert got[(metric, port(node, name))] == last[key][fields.index(field)]
    assert not any(
        k.startswith("server") for (_, labels) in got for _, k in labels if _ == "switch"
    )
    paused = [r for r in sim_run.extra("pfc") if r["pause_sent"] > 0]
    assert paused
    for r in paused:
        node, name = r["port"].split(":")
        if node.startswith("server"):
            continue
        labels = port(node, name, priority=str(r["priority"]))
        assert got[("sonic_pfc_pause_frames_sent_total", labels)] == r["pause_sent"]
    queues = sim_run.extra("queues")["queues"]
    key, by = next(iter(queues.items()))
    q, values = next(iter(by.items()))
    node, name = key.split(":")
    assert got[("sonic_queue_watermark_bytes", port(node, name, queue=q))] == max(values)
    report = json.loads((sim_run.path / "report.json").read_text())["results"]
    for r in (r for r in report if r["status"] != "info"):  # information is no verdict
        value = got[
            (
                "twin_validator_passed",
                tuple(sorted({"validator": r["validator"], "scope": r["scope"]}.items())),
            )
        ]
        assert value == {"pass": 1, "fail": 0}.get(r["status"], -1)
    informational = {(r["validator"], r["scope"]) for r in report if r["status"] == "info"}
    assert informational  # config_drift: information, no metric
    judged = {
        (d["validator"], d["scope"])
        for n, d in ((n, dict(lb)) for n, lb in got)
        if n == "twin_validator_passed"
    }
    assert not judged & informational
    assert not any(name.startswith("sonic_bgp") for name, _ in got)  # the sim has no BGP
    widths = {labels: v for (n, labels), v in got.items() if n == "sonic_route_ecmp_width"}
    assert widths and max(widths.values()) == 2  # two spines


@pytest.fixture(scope="module")
def live_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Observations, Observations]:
    """A live-shaped run of the small lab (counters every second, BGP, FIBs: leaf1 left with
    one next hop to leaf3's subnet) and a hybrid-shaped one (the same with what the simulator
    counted), both reported (a verdict to export)."""
    lab = generate_lab(tmp_path_factory.mktemp("om") / "lab", "omlive")
    subnet = str(lab.graph.nodes["leaf3"]["subnet"])
    tx = {leaf: [1000, 2000] for leaf in uplinks(lab)}
    live = SyntheticRun(lab, name="live", uplink_tx=tx, fib_end=full_fib(lab, ("leaf1", subnet)))
    hybrid = SyntheticRun(lab, name="hybrid", uplink_tx=tx, fib_end=live.fib_end)
    runs = live.write(), hybrid.write()
    port = f"leaf1:{uplinks(lab)['leaf1'][0]}"
    drops = {"lossless": 0, "lossy": 3}
    row = {"port": port, "priority": 3, "pause_sent": 7, "pause_received": 0, "paused_s": 0.1}
    (runs[1].path / "pfc.json").write_text(json.dumps([{**row, "ecn_marks": 5, "drops": drops}]))
    occupancy = {"queues": {port: {"3": [0, 900]}}, "pgs": {port: {"3": [0, 700]}}}
    (runs[1].path / "queues.json").write_text(json.dumps({"interval": 1e-5, **occupancy}))
    for obs in runs:
        assert twin_cli("report", str(obs.path)).returncode in (0, 1)
    return runs


def export(run: Path, out: Path, *options: str) -> str:
    """`twin report RUN --openmetrics OUT` and what it wrote."""
    done = subprocess.run(
        [str(TWIN), "report", str(run), "--openmetrics", str(out), *options],
        capture_output=True,
        text=True,
    )
    assert done.returncode in (0, 1) and done.stderr == "", done.stderr
    return out.read_text()


def backfill(export: Path, db: Path) -> int:
    """The real promtool's backfill of an export into `db`: the samples it wrote."""
    done = subprocess.run(
        ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(export), str(db)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # a row per block: ULID, min time, max time, duration, samples, chunks, series, size
    rows = [line.split() for line in done.stdout.splitlines() if re.match(r"[0-9A-Z]{26} ", line)]
    return sum(int(row[4]) for row in rows)


@pytest.mark.parametrize("flavour", ["twin", "sonic-exporter"])
def test_promtool_backfills_every_sample_of_sim_live_and_hybrid_exports(
    sim_run: Observations,
    live_runs: tuple[Observations, Observations],
    tmp_path: Path,
    flavour: str,
) -> None:
    for obs in (sim_run, *live_runs):
        out = tmp_path / f"{obs.path.name}.om"
        text = export(obs.path, out, "--metrics-flavour", flavour)
        lines = [line for line in text.splitlines() if line and not line.startswith("#")]
        assert backfill(out, tmp_path / f"db-{obs.path.name}") == len(lines)


def test_the_example_prometheus_config_is_valid() -> None:
    config = REPO / "examples" / "grafana" / "prometheus.yml"
    done = subprocess.run(["promtool", "check", "config", str(config)], capture_output=True)
    assert done.returncode == 0, done.stdout + done.stderr


class Prometheus:
    """The real Prometheus serving a TSDB directory on 127.0.0.1 behind basic auth (no other
    local user reads it without the password), scraping `target` (HOST:PORT) every second
    when given, until `stop`."""

    def __init__(self, db: Path, work: Path, target: str | None = None) -> None:
        with warnings.catch_warnings():  # crypt: deprecated, the one bcrypt at hand
            warnings.simplefilter("ignore", DeprecationWarning)
            import crypt

        password = secrets.token_hex(16)
        hashed = crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH))
        (work / "web.yml").write_text(yaml.safe_dump({"basic_auth_users": {"twin": hashed}}))
        config: dict[str, object] = {"global": {"scrape_interval": "1s"}}
        if target is not None:
            job = {"job_name": "fabric-twin", "static_configs": [{"targets": [target]}]}
            config["scrape_configs"] = [job]
        (work / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.url = f"http://127.0.0.1:{free_port()}"
        token = base64.b64encode(f"twin:{password}".encode()).decode()
        self.auth = {"Authorization": f"Basic {token}"}
        self.log = work / "prometheus.log"
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                [
                    "prometheus",
                    f"--config.file={work / 'prometheus.yml'}",
                    f"--web.config.file={work / 'web.yml'}",
                    f"--storage.tsdb.path={db}",
                    "--storage.tsdb.retention.time=100y",
                    f"--web.listen-address={self.url.removeprefix('http://')}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        for _ in range(600):  # until ready (it loads the blocks first)
            assert self.process.poll() is None, self.log.read_text()
            with contextlib.suppress(OSError):
                self.get("/-/ready")
                return
            time.sleep(0.2)
        raise AssertionError(f"Prometheus never ready: {self.log.read_text()}")

    def get(self, path: str) -> bytes:
        asked = urllib.request.Request(self.url + path, headers=self.auth)
        with urllib.request.urlopen(asked, timeout=30) as answer:
            body: bytes = answer.read()
            return body

    def query(self, expr: str, at: float) -> list[dict[str, Any]]:
        """An instant query's result vector at `at` (its HTTP API, /api/v1/query)."""
        args = urllib.parse.urlencode({"query": expr, "time": f"{at:.3f}"})
        answer = json.loads(self.get(f"/api/v1/query?{args}"))
        assert answer["status"] == "success", answer
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)


@pytest.fixture
def prometheus(
    sim_run: Observations, live_runs: tuple[Observations, Observations], tmp_path: Path
) -> Iterator[tuple[Prometheus, dict[str, float]]]:
    """The simulator and hybrid runs exported in the sonic-exporter flavour (the dashboard's),
    backfilled into one TSDB, served by Prometheus; with each run's end (where the dashboard
    is looked at)."""
    db, ends = tmp_path / "db", {}
    for kind, obs in (("simulator", sim_run), ("live", live_runs[1])):
        out = tmp_path / f"{kind}.om"
        text = export(obs.path, out, *FLAVOUR)
        assert backfill(out, db) > 0
        (info,) = (s for f in samples_of(text) for s in f.samples if s.name == "twin_info")
        assert info.timestamp is not None
        ends[kind] = float(info.timestamp)
    served = Prometheus(db, tmp_path)
    try:
        yield served, ends
    finally:
        served.stop()


def samples_of(text: str) -> list[Metric]:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse

    return list(parse(text))


def test_prometheus_answers_each_dashboard_query_from_the_run_its_panel_names(
    prometheus: tuple[Prometheus, dict[str, float]],
) -> None:
    served, ends = prometheus
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        kind = "simulator" if "Needs the simulator" in panel["description"] else "live"
        for target in panel["targets"]:
            expr = target["expr"].replace("$switch", ".*").replace("$__range", "1h")
            assert served.query(expr, ends[kind]), (panel["title"], kind)
    (ecmp,) = (p for p in json.loads(DASHBOARD.read_text())["panels"] if "ECMP" in p["title"])
    expr = ecmp["targets"][0]["expr"].replace("$switch", ".*")
    widths = {r["metric"]["switch"]: r["value"][1] for r in served.query(expr, ends["live"])}
    assert widths["leaf1"] == "1" and widths["leaf2"] == "2"  # an uplink lost: width 1, kept


def scrape(url: str, timeout: float = 5) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        text: str = answer.read().decode()
        return text


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_deploy_serves_metrics_until_the_twin_is_destroyed(tmp_path: Path) -> None:
    path = write_lab(tmp_path / "lab", lab_name("met"))
    where = f"127.0.0.1:{free_port()}"
    serving = subprocess.Popen(
        [str(TWIN), "deploy", str(path), "--backend", "fake", "--metrics", where],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        text = ""
        for _ in range(100):
            try:
                text = scrape(f"http://{where}/metrics")
                break
            except OSError:
                time.sleep(0.1)
        got = samples(text)
        lab = Lab.open(path)
        assert got[("twin_info", (("backend", "fake"), ("lab", lab.name)))] == 1
        widths = {labels: v for (n, labels), v in got.items() if n == "sonic_route_ecmp_width"}
        assert widths and max(widths.values()) == 2
    finally:
        twin_cli("destroy", str(path))
        _, err = serving.communicate(timeout=30)
    assert serving.returncode == 0, err
    assert f"metrics of {Lab.open(path).name} on http://{where}/metrics" in err


def test_prometheus_scrapes_a_live_twin_in_the_dashboards_flavour(tmp_path: Path) -> None:
    path = write_lab(tmp_path / "lab", lab_name("met"))
    where = f"127.0.0.1:{free_port()}"
    serving = subprocess.Popen(
        [str(TWIN), "deploy", str(path), "--backend", "fake", "--metrics", where, *FLAVOUR],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        served = Prometheus(tmp_path / "db", tmp_path, where)
        try:
            widths: list[dict[str, Any]] = []
            for _ in range(300):  # until it has scraped the twin (FIBs read in the background)
                widths = served.query("sonic_route_ecmp_width", time.time())
                if widths:
                    break
                time.sleep(0.2)
            assert widths, served.log.read_text()
            now = time.time()
            for expr in ('up{job="fabric-twin"}', "twin_up", 'twin_info{backend="fake"}'):
                assert [r["value"][1] for r in served.query(expr, now)] == ["1"], expr
            assert {r["metric"]["switch"] for r in widths} == set(Lab.open(path).switches())
        finally:
            served.stop()
    finally:
        twin_cli("destroy", str(path))
        _, err = serving.communicate(timeout=30)
    assert serving.returncode == 0, err


def test_a_bad_metrics_address_is_refused_before_anything_starts(tmp_path: Path) -> None:
    path = write_lab(tmp_path / "lab", lab_name("met"))
    done = twin_cli("deploy", str(path), "--backend", "fake", "--metrics", "nowhere")
    assert done.returncode == 2 and "'nowhere' is not [HOST]:PORT" in done.stderr
    assert not (path / "state.json").exists() and twin_cli("inspect", str(path)).returncode == 2


@pytest.mark.parametrize("verb", ["deploy", "run"])
def test_a_metrics_port_in_use_is_refused_before_anything_starts(tmp_path: Path, verb: str) -> None:
    import socket

    path = write_lab(tmp_path / "lab", lab_name("met"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        where = f"127.0.0.1:{taken.getsockname()[1]}"
        done = twin_cli(verb, str(path), "--backend", "fake", "--metrics", where)
    try:
        assert done.returncode == 2, done.stderr
        assert f"--metrics: cannot serve on {where}" in done.stderr
        assert not (path / "state.json").exists() and not (path / "events.jsonl").exists()
        assert not (path / "runs").exists()
    finally:
        twin_cli("destroy", str(path))


SHORT = {
    "name": "scraped",
    "settle": 0,
    "traffic": [{"at": 0, "duration": 16, "kind": "backup", "src": "server1", "dst": "server3"}],
    "validate": {"bgp_health": {}},
}
"""Long enough for several scrapes on a loaded machine."""
MARGIN = 0.5
"""Seconds a counter sample may take to read after its timestamp."""
READ_AT = 'twin_read_timestamp_seconds{part="counters"}'
"""When the counters a scrape served were read."""


def between(
    series: list[Any], key: str, column: int, value: float, read: float, answered: float
) -> bool:
    """Assert a served counter lies between the run's samples of it taken before it was read
    and those taken after it was answered; whether any bounded it."""
    before = [s["c"][key][column] for s in series if s["t"] < read - MARGIN]
    after = [s["c"][key][column] for s in series if s["t"] > answered + MARGIN]
    assert max(before, default=value) <= value <= min(after, default=value), key
    return bool(before or after)


def test_run_metrics_scraped_during_a_live_run_agree_with_its_counters(
    small_twin: Twin, tmp_path: Path
) -> None:
    scenario = tmp_path / "scraped.yaml"
    scenario.write_text(yaml.safe_dump(SHORT))
    where = f"127.0.0.1:{free_port()}"
    served = Prometheus(tmp_path / "db", tmp_path, where)  # scrapes it too, every second
    try:
        playing = subprocess.Popen(
            [
                str(TWIN),
                "run",
                str(small_twin.lab.path),
                str(scenario),
                "--metrics",
                where,
                *FLAVOUR,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        scrapes: list[tuple[float, Samples]] = []  # answered at, what it said
        while playing.poll() is None:
            with contextlib.suppress(OSError):  # before the server is up, after it is down
                got = samples(scrape(f"http://{where}/metrics"))
                scrapes.append((time.time(), got))
            time.sleep(0.3)
        out, err = playing.communicate()
        scraped = {
            expr: served.query(f"{expr}[5m]", time.time())
            for expr in ("sonic_interface_transmit_packets_total", READ_AT)
        }
        answer = served.get(
            "/api/v1/query_range?"
            + urllib.parse.urlencode(
                {
                    "query": '{__name__=~"sonic_interface_.*"}',
                    "start": f"{time.time() - 300:.3f}",
                    "end": f"{time.time():.3f}",
                    "step": "1",
                }
            )
        )
    finally:
        served.stop()
    assert playing.returncode in (0, 1), err
    assert scrapes, out + err  # at least one answered; `checked` below: one within the run
    run = next(
        line.split("reports in ")[1].split("/report.md")[0]
        for line in out.splitlines()
        if "reports in" in line
    )
    obs = Observations.open(Path(run))
    column = obs.counters["fields"].index("tx_packets")
    series = obs.counters["samples"]
    first, last = series[0], series[-1]
    switches = set(small_twin.lab.switches())
    # Counters only grow: a scrape's value (read when its `twin_read_timestamp_seconds` says)
    # is at least every sample read before that and at most every sample read after it,
    # wherever the scrape lies in the run. MARGIN covers a sample's own read.
    checked = 0
    for answered, got in scrapes:
        read = got.get(("twin_read_timestamp_seconds", (("part", "counters"),)))
        for key in last["c"]:
            node, name = key.split(":")
            value = got.get(("sonic_interface_transmit_packets_total", device(node, name)))
            if node not in switches or key not in first["c"] or value is None or read is None:
                continue
            checked += between(series, key, column, value, read, answered)
    assert checked > 0
    # What the real Prometheus scraped agrees with the same counters, sample by sample.
    reads = {p[0]: float(p[1]) for r in scraped[READ_AT] for p in r["values"]}
    assert scraped["sonic_interface_transmit_packets_total"], served.log.read_text()
    agreed = 0
    for r in scraped["sonic_interface_transmit_packets_total"]:
        key = f"{r['metric']['switch']}:{r['metric']['device']}"
        for at, text in r["values"]:
            value, read = float(text), reads.get(at)
            if key not in first["c"] or read is None:
                continue
            agreed += between(series, key, column, value, read, at)
    assert agreed > 0
    # Its range query, imported as production: the ports' counters over the scraped window.
    ranged = tmp_path / "range.json"
    ranged.write_bytes(answer)
    production = tmp_path / "production"
    done = twin_cli("import", str(ranged), "--lab", str(small_twin.lab.path), "-o", str(production))
    assert done.returncode == 0, done.stderr
    imported = json.loads((production / "counters.json").read_text())["samples"]
    grew = [k for k, v in imported[-1]["c"].items() if v[column] > imported[0]["c"][k][column]]
    assert grew and set(json.loads((production / "run.json").read_text())["windows"]) == switches
    busiest = max(
        (
            v
            for (n, labels), v in scrapes[-1][1].items()
            if n == "sonic_interface_transmit_bytes_total"
        ),
    )
    assert busiest > 0
    sessions = obs.bgp["end"]
    up = {
        labels: v
        for (n, labels), v in scrapes[-1][1].items()
        if n == "sonic_bgp_session_established"
    }
    assert len(up) == len(sessions) and sum(up.values()) == sum(
        s.state == "Established" for s in sessions
    )
    leaf1 = [
        v
        for (n, labels), v in scrapes[-1][1].items()
        if n == "sonic_route_ecmp_width" and ("switch", "leaf1") in labels
    ]
    assert max(leaf1) == 2  # a next hop per spine to the other leaves' subnets
    # Every query of a dashboard panel that says it fills from a live twin finds its metric
    # in what this live twin served; the panels that need the simulator do not.
    served_names = {name.removesuffix("_total") for name, _ in scrapes[-1][1]}
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        asked = {
            name.removesuffix("_total")
            for t in panel["targets"]
            for name in re.findall(r"\b(?:sonic|twin)_\w+", t["expr"])
        }
        live = "live twin" in panel["description"] and "Needs" not in panel["description"]
        assert (asked <= served_names) == live, (panel["title"], asked - served_names)


def test_each_dashboard_panel_asks_for_what_its_description_says_fills_it() -> None:
    """A panel that says it fills from a live twin asks only for what a live twin serves (in
    the dashboard's flavour, sonic-exporter); one that says it needs the simulator or a run's
    export asks for something a live twin does not serve, and a run's export has."""
    import dataclasses

    from labs.backend import Session
    from twin.outputs.metrics import Snapshot, families

    row = {
        "port": "leaf1:Ethernet0",
        "priority": 3,
        "pause_sent": 1,
        "pause_received": 0,
        "paused_s": 0.0,
        "ecn_marks": 2,
        "drops": {"lossless": 0},
    }
    live = Snapshot(
        "lab",
        "netns",
        {"leaf1"},
        [(None, {"leaf1:Ethernet0": [0.0] * 6})],
        sessions=[Session("leaf1", "10.0.0.1", "spine1", "Established", 3, 1000)],
        fib={},
        subnets={"leaf1": ("10.2.0.0/27",)},
        up=True,
        reads={"counters": 0.0},
    )
    run = dataclasses.replace(
        live,
        pfc=[row],
        watermarks={"queues": {"leaf1:Ethernet0": {"3": 10}}, "pgs": {}},
        verdict=[{"validator": "mtu", "scope": "run", "status": "pass"}],
    )

    def names(snap: Snapshot) -> set[str]:
        found = set()
        for family in families(snap, "sonic-exporter"):
            found |= {family.name, f"{family.name}_total"}
        return found

    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        exprs = [t["expr"] for t in panel["targets"]]
        asked = {name for e in exprs for name in re.findall(r"\b(?:sonic|twin)_\w+", e)}
        assert asked and asked <= names(run), (panel["title"], asked - names(run))
        if "Needs" in panel["description"]:
            assert not asked <= names(live), panel["title"]
        else:
            assert "live twin" in panel["description"], panel["title"]
            assert asked <= names(live), (panel["title"], asked - names(live))
