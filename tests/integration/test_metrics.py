"""Prometheus and OpenMetrics: a simulator run exported with `twin report --openmetrics` (its
values equal the run's files), the live endpoint of `twin deploy --metrics` on the fake
backend, and `twin run --metrics` scraped while a real netns twin of the small fabric plays a
scenario, checked against the counters that run recorded (root and FRR; under the heavy
lock)."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import lab_name, twin_cli, write_lab
from tests.simlab import paused_incast
from twin.labdir import Lab
from twin.metrics import CACHE_S
from twin.pytest_plugin import Twin
from twin.scenario.observations import Observations

TWIN = Path(sys.executable).with_name("twin")
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


def test_run_metrics_scraped_during_a_live_run_agree_with_its_counters(
    small_twin: Twin, tmp_path: Path
) -> None:
    scenario = tmp_path / "scraped.yaml"
    scenario.write_text(yaml.safe_dump(SHORT))
    where = f"127.0.0.1:{free_port()}"
    playing = subprocess.Popen(
        [str(TWIN), "run", str(small_twin.lab.path), str(scenario), "--metrics", where],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    scrapes: list[tuple[float, float, Samples]] = []  # asked at, answered at, what it said
    while playing.poll() is None:
        asked = time.time()
        with contextlib.suppress(OSError):  # before the server is up, after it is down
            # a scrape reads BGP and the FIBs of every switch: seconds on a loaded machine
            got = samples(scrape(f"http://{where}/metrics", 30))
            scrapes.append((asked, time.time(), got))
        time.sleep(0.3)
    out, err = playing.communicate()
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
    # Counters only grow: a scrape's value (read at most CACHE_S before it was asked, and
    # before it answered) is at least every sample read before that and at most every sample
    # read after it, wherever the scrape lies in the run. MARGIN covers a sample's own read.
    checked = 0
    for asked, answered, got in scrapes:
        for key in last["c"]:
            node, name = key.split(":")
            value = got.get(("sonic_interface_transmit_packets_total", port(node, name)))
            if node not in switches or key not in first["c"] or value is None:
                continue
            before = [s["c"][key][column] for s in series if s["t"] < asked - CACHE_S - MARGIN]
            after = [s["c"][key][column] for s in series if s["t"] > answered + MARGIN]
            assert max(before, default=value) <= value <= min(after, default=value), key
            checked += bool(before or after)
    assert checked > 0
    busiest = max(
        (
            v
            for (n, labels), v in scrapes[-1][2].items()
            if n == "sonic_interface_transmit_bytes_total"
        ),
    )
    assert busiest > 0
    sessions = obs.bgp["end"]
    up = {
        labels: v
        for (n, labels), v in scrapes[-1][2].items()
        if n == "sonic_bgp_session_established"
    }
    assert len(up) == len(sessions) and sum(up.values()) == sum(
        s.state == "Established" for s in sessions
    )
    leaf1 = [
        v
        for (n, labels), v in scrapes[-1][2].items()
        if n == "sonic_route_ecmp_width" and ("switch", "leaf1") in labels
    ]
    assert max(leaf1) == 2  # a next hop per spine to the other leaves' subnets


def test_the_grafana_dashboard_asks_only_for_metrics_the_twin_exports() -> None:
    from labs.backend import Session
    from twin.metrics import Snapshot, families

    row = {
        "port": "leaf1:Ethernet0",
        "priority": 3,
        "pause_sent": 1,
        "pause_received": 0,
        "paused_s": 0.0,
        "ecn_marks": 2,
        "drops": {"lossless": 0},
    }
    full = Snapshot(
        "lab",
        "sim",
        {"leaf1"},
        [(None, {"leaf1:Ethernet0": [0.0] * 6})],
        sessions=[Session("leaf1", "10.0.0.1", "spine1", "Established", 3, 1000)],
        fib={},
        subnets=("10.2.0.0/27",),
        pfc=[row],
        watermarks={"queues": {"leaf1:Ethernet0": {"3": 10}}, "pgs": {}},
        verdict=[{"validator": "mtu", "scope": "run", "status": "pass"}],
    )
    exported = set()
    for family in families(full):
        exported |= {family.name, f"{family.name}_total"}
    dashboard = Path(__file__).parents[2] / "examples" / "grafana" / "fabric-twin.json"
    exprs = [t["expr"] for p in json.loads(dashboard.read_text())["panels"] for t in p["targets"]]
    asked = {name for e in exprs for name in re.findall(r"\b(?:sonic|twin)_\w+", e)}
    assert asked and asked <= exported, asked - exported
