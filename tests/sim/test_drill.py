"""Failure drills: fault sets (random draws without repeats), a small drill on the simulator
through the drill's own TLS cluster (and through a TLS scheduler given by address; a plain
one refused), a drill whose fault breaks the fabric (exit 1, one JUnit case per fault and
failing validator), cases kept when the workers die, and a serial drill on the fake
backend, restored and checked after each fault."""

from __future__ import annotations

import json
import os
import signal
import stat
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from tests.simlab import small_lab
from twin.cli import main as cli
from twin.drill.cases import fault_sets
from twin.errors import InputError
from twin.intent import fabric as intent
from twin.lab import directory as labdir
from twin.lab.directory import Lab


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_lab(tmp_path_factory.mktemp("drill") / "small")


@pytest.fixture(scope="module")
def single_homed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The deadlock incident's fabric: one NIC per server, one leaf each."""
    source = REPO / "examples" / "incidents" / "3-deadlock" / "fabric.yaml"
    out = tmp_path_factory.mktemp("drill") / "single"
    labdir.generate(intent.load(source), out, str(source))
    return out


@pytest.fixture(scope="module")
def scheduler() -> Iterator[list[str]]:
    """A Dask cluster of its own over TLS, reached by address and credentials as a real one
    would be: the `twin drill` options that name it."""
    from twin.drill import cluster as drillcluster

    with drillcluster.local(1) as (cluster, tls):
        files = ["--tls-ca", str(tls.ca), "--tls-cert", str(tls.cert), "--tls-key", str(tls.key)]
        yield ["--scheduler", str(cluster.scheduler_address), *files]


def test_fault_sets(small: Path, tmp_path: Path) -> None:
    lab = Lab.open(small)
    edges = lab.graph.number_of_edges()
    assert len(fault_sets(lab, "links")) == edges == 18
    server = fault_sets(lab, "server-links")
    assert len(server) == 8 and server == fault_sets(lab, "links:server")
    assert {c.faults[0]["link"].split(":")[0] for c in server} == {
        "leaf1",
        "leaf2",
        "leaf3",
        "leaf4",
    }
    assert [c.faults[0]["node"] for c in fault_sets(lab, "switches")] == lab.switches()
    drawn = fault_sets(lab, "random:2x3", seed=5)
    assert len(drawn) == 3 and all(len(c.faults) == 2 for c in drawn)
    assert drawn == fault_sets(lab, "random:2x3", seed=5) != fault_sets(lab, "random:2x3", seed=6)
    assert len(fault_sets(lab, "random:1")) == 10
    listed = tmp_path / "faults.yaml"
    listed.write_text(
        "- {name: two uplinks, faults: [{fault: link-down, link: uplink of leaf1}, "
        "{fault: link-down, link: uplink 1 of leaf1}]}\n"
    )
    (case,) = fault_sets(lab, str(listed))
    assert case.label == "two uplinks" and len(case.faults) == 2


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("everything", "one of links, links:KIND"),
        ("links:optical", "no link kind 'optical'"),
        ("random:99", "K from 1 to 18 links"),
        ("random:x", "write random:K or random:KxN"),
        ("random:1x19", "19 draws, but 18 links make 18 sets of 1"),
        ("random:16x154", "154 draws, but 18 links make 153 sets of 16"),
    ],
)
def test_bad_fault_sets_are_one_line(small: Path, spec: str, problem: str) -> None:
    with pytest.raises(InputError) as refused:
        fault_sets(Lab.open(small), spec)
    assert problem in refused.value.problem


def test_random_draws_never_repeat(small: Path) -> None:
    """`random:1xN` is N different links (all of them at N = links), `random:KxN` N different
    sets; more draws than sets are refused (test_bad_fault_sets_are_one_line)."""
    lab = Lab.open(small)
    every = {c.faults[0]["link"] for c in fault_sets(lab, "links")}
    for seed in range(5):
        drawn = [c.faults[0]["link"] for c in fault_sets(lab, "random:1x18", seed)]
        assert sorted(drawn) == sorted(every)
        pairs = [frozenset(f["link"] for f in c.faults) for c in fault_sets(lab, "random:2x40")]
        assert len(set(pairs)) == 40 and all(len(p) == 2 for p in pairs)
    assert len(fault_sets(lab, "random:17")) == 10


def test_a_cluster_given_by_address_must_be_tls(
    small: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plain tcp:// scheduler runs code for any process that reaches it: refused in one
    line before anything runs, as is a TLS one without its credentials."""
    argv = ["drill", str(small), "--faults", "links", "--out", str(tmp_path / "d")]
    capsys.readouterr()
    assert cli.main([*argv, "--scheduler", "tcp://127.0.0.1:1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "tcp://127.0.0.1:1" in err and "tls://HOST:PORT" in err and "\n" not in err
    assert cli.main([*argv, "--scheduler", "tls://127.0.0.1:1"]) == 2
    assert "needs --tls-ca" in capsys.readouterr().err
    key = tmp_path / "key.pem"
    key.write_text("")
    key.chmod(0o644)
    tls = ["--tls-ca", str(key), "--tls-cert", str(key), "--tls-key", str(key)]
    assert cli.main([*argv, "--scheduler", "tls://127.0.0.1:1", *tls]) == 2
    assert "readable by others" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()


def test_the_local_cluster_is_the_drills_own() -> None:
    """Its credentials made for it in a directory only this user reads, the key 0600, the
    CA's key not written at all; its workers' directories in there too, the workers without
    a capability (as root) and no way to gain one; all gone with the cluster."""
    from distributed import Client

    from twin.drill import cluster as drillcluster

    with drillcluster.local(1) as (cluster, tls):
        assert str(cluster.scheduler_address).startswith("tls://127.0.0.1:")
        assert stat.S_IMODE(tls.key.parent.stat().st_mode) == 0o700
        assert stat.S_IMODE(tls.key.stat().st_mode) == 0o600
        assert sorted(p.name for p in tls.key.parent.iterdir()) == [
            "ca.pem",
            "cert.pem",
            "key.pem",
            "workers",
        ]
        with Client(cluster, security=tls.security()) as client:
            (seen,) = client.run(_status).values()
        assert seen["local"].startswith(str(tls.key.parent / "workers"))
        assert seen["NoNewPrivs"] == "1"
        if os.geteuid() == 0:
            assert {seen[c] for c in ("CapEff", "CapPrm", "CapBnd")} == {"0000000000000000"}
    assert not tls.key.parent.exists()


def _status(dask_worker: Any) -> dict[str, str]:
    """In a worker (given by `client.run`): its directory and its capabilities."""
    lines = Path("/proc/self/status").read_text().splitlines()
    seen = dict(line.split(":\t", 1) for line in lines if ":\t" in line)
    return {**seen, "local": str(dask_worker.local_directory)}


def test_a_small_drill_through_a_local_cluster(
    small: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, junit = tmp_path / "drill", tmp_path / "junit.xml"
    argv = ["drill", str(small), "--faults", "links:fabric", "--out", str(out)]
    assert cli.main([*argv, "--workers", "2", "--junit", str(junit), "--json"]) == 0
    printed = capsys.readouterr()
    data = json.loads((out / "drill.json").read_text())
    assert json.loads(printed.out) == data  # --json: the drill's result on stdout
    kept = [json.loads(line) for line in (out / "cases.jsonl").read_text().splitlines()]
    assert sorted(c["case"] for c in kept) == list(range(9))  # each case, as it ended
    assert len(data["faults"]) == 8 and data["baseline"]["label"] == "no fault"
    assert data["baseline"]["iteration_mean_ms"] > 0
    assert all(f["verdict"] == "pass" and f["slowdown"] > 0.5 for f in data["faults"])
    labels = {f["label"] for f in data["faults"]}
    assert "link leaf1:Ethernet24 - spine1:Ethernet0" in labels
    assert ET.parse(junit).getroot().findall(".//testcase") == []
    assert (out / "heatmap.png").stat().st_size > 10_000
    assert "| fault | verdict | worst loss window (ms) |" in (out / "drill.md").read_text()
    assert "8 faults in" in printed.err
    assert not (small / "runs").exists()  # nothing written into the lab


def test_a_fault_that_breaks_the_fabric_fails(
    single_homed: Path, tmp_path: Path, scheduler: list[str]
) -> None:
    """On a single-homed fabric a server's only link going down cuts it off: the collective
    cannot finish and the drill says so, one JUnit case per failing validator of that fault."""
    listed = tmp_path / "faults.yaml"
    listed.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "cut server1",
                    "faults": [{"fault": "link-down", "link": "server link of servers[0]"}],
                },
                {"name": "spine2 down", "faults": [{"fault": "node-down", "node": "spines[-1]"}]},
            ]
        )
    )
    out = tmp_path / "drill"
    argv = ["drill", str(single_homed), "--faults", str(listed), "--out", str(out)]
    assert cli.main([*argv, *scheduler]) == 1
    data = json.loads((out / "drill.json").read_text())
    worst, other = data["faults"]
    assert worst["label"] == "cut server1" and worst["verdict"] == "fail"
    assert other["verdict"] == "pass"
    cases = ET.parse(out / "junit.xml").getroot().findall(".//testcase")
    failing = {v for v, s in {(r[0], r[2]) for r in worst["results"]} if s == "fail"}
    assert sorted(c.get("classname", "") for c in cases) == sorted(failing)
    assert {c.get("name") for c in cases} == {"cut server1"}


def test_a_serial_drill_on_the_fake_backend_restores_each_fault(
    small: Path, tmp_path: Path
) -> None:
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(
        "name: ring\ntraffic:\n  - {name: ring, at: 0, duration: 2, kind: all_reduce, "
        "servers: all, qps: 1, pps: 50}\nvalidate:\n  failover: {}\n"
    )
    out = tmp_path / "drill"
    argv = ["drill", str(small), str(scenario), "--faults", "links:fabric", "--backend", "fake"]
    assert cli.main([*argv, "--out", str(out), "--at", "0.5"]) == 0
    data = json.loads((out / "drill.json").read_text())
    assert len(data["faults"]) == 8
    windows = [f["loss_window_ms"] for f in data["faults"]]
    assert all(w is not None for w in windows)  # failover judged each one from its probes
    assert not (small / "state.json").exists()  # the twin the drill deployed is gone


def test_an_existing_report_directory_is_refused_first(
    small: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "x").write_text("")
    capsys.readouterr()
    argv = ["drill", str(small), "--faults", "links", "--out", str(tmp_path)]
    assert cli.main(argv) == 2
    assert "--out: exists and is not empty" in capsys.readouterr().err


def test_cases_finished_before_the_workers_die_are_kept(
    small: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both worker processes SIGKILLed (by pid: the ones this drill started) once three
    cases are done: those three are kept, the cases running on the dead workers are error
    rows (no retry allowed here), the others run on the restarted workers; drill.json and
    the report are written and the exit code is the verdict's, not 3."""
    import dask
    import distributed  # noqa: F401  (its defaults loaded first: the set below restores them)
    import psutil

    from twin.cli.verbs import drill as verb

    killed: list[int] = []
    others = {c.pid for c in psutil.Process().children(recursive=True)}  # not this drill's

    def kill_workers_at_three(message: str) -> None:
        if message.startswith("3/") and not killed:
            for child in psutil.Process().children(recursive=True):
                if child.pid not in others and "spawn_main" in " ".join(child.cmdline()):
                    os.kill(child.pid, signal.SIGKILL)
                    killed.append(child.pid)

    monkeypatch.setattr(verb, "progress", kill_workers_at_three)
    out = tmp_path / "drill"
    argv = ["drill", str(small), "--faults", "links", "--out", str(out), "--workers", "2"]
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        code = cli.main(argv)
    assert len(killed) == 2
    data = json.loads((out / "drill.json").read_text())
    assert code == 1 == data["exit_code"]
    rows = [data["baseline"], *data["faults"]]
    assert len(rows) == 19
    lost = [r for r in rows if r["error"]]
    assert lost and all("lost with its worker" in r["error"] for r in lost)
    done = [r for r in rows if not r["error"]]
    assert len(done) >= 3 and all(r["results"] for r in done)
    kept = [json.loads(line) for line in (out / "cases.jsonl").read_text().splitlines()]
    assert sorted(c["case"] for c in kept) == list(range(19))
    assert (out / "drill.md").is_file() and (out / "heatmap.png").is_file()


def test_cases_left_without_a_worker_are_error_rows(small: Path) -> None:
    """A cluster given by address whose only worker is retired after the first case (the
    lab's data goes with it): the cases still waiting are error rows, the finished one is
    kept, and the drill returns."""
    from twin.cli.verbs.drill import DEFAULT_SCENARIO
    from twin.drill import cases as drill
    from twin.drill import cluster as drillcluster
    from twin.drill import run as drillrun
    from twin.intent.inputs import strict_yaml

    lab = Lab.open(small)
    cases = fault_sets(lab, "links:fabric")
    with drillcluster.local(1) as (cluster, tls):

        def retire_after_one(message: str) -> None:
            if message.startswith("1/"):
                cluster.scale(0)

        where = (str(cluster.scheduler_address), tls.security())
        when = drill.When(0.0005)
        scenario = strict_yaml(DEFAULT_SCENARIO)
        done = drillrun.on_dask(lab, scenario, cases, when, 1, where, retire_after_one)
    assert len(done) == 9
    lost = [o for o in done if o.error]
    assert lost and all("lost with its worker" in (o.error or "") for o in lost)
    assert any(o.results for o in done)
