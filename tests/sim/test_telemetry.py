"""Production telemetry: SONiC's published COUNTERS_DB dumps read, bad sources refused in one
line, and the round trip twin -> SONiC's formats -> import -> compare on the pause-storm and
micro-burst incidents: the run agrees with itself (1.0), a different scenario scores lower.

tests/data/sonic-utilities/ holds two of sonic-utilities' mock tables (gzipped), under the
Apache License 2.0 (see its README).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import lab_name
from twin.change.incident import build, fabric_file
from twin.telemetry import counters_db

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "sonic-utilities"
SMALL = REPO / "examples" / "small.yaml"


def twin(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "twin.cli.main", *args], capture_output=True, text=True, env=env
    )


def fixture(name: str, into: Path) -> Path:
    path = into / name.removesuffix(".gz")
    path.write_bytes(gzip.decompress((DATA / name).read_bytes()))
    return path


def nonzero(dump: counters_db.Dump) -> int:
    tables: list[dict[Any, dict[str, int]]] = [dump.ports, dump.queues, dump.pgs]
    return sum(1 for t in tables for stats in t.values() for v in stats.values() if v)


def test_published_dumps_are_read(tmp_path: Path) -> None:
    """A real 34-port device's `sonic-db-dump -y` (t1) and the hand-written newest schema."""
    t1 = counters_db.read(fixture("t1_counter_db.json.gz", tmp_path))
    assert (len(t1.ports), len(t1.queues), len(t1.pgs), nonzero(t1)) == (34, 340, 272, 503)
    assert t1.first is not None and t1.last is not None and 0 < t1.last - t1.first < 1
    assert t1.ports["Ethernet0"]["SAI_PORT_STAT_IF_IN_UCAST_PKTS"] == 38882
    assert sum(1 for v in t1.pg_watermarks.values() if v) == 183
    plain = counters_db.read(fixture("counters_db.json.gz", tmp_path))
    assert (len(plain.ports), len(plain.queues), len(plain.pgs)) == (3, 30, 24)
    assert plain.first is None  # no read times in a plain dump
    ecn = sum(s.get("SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS", 0) for s in plain.queues.values())
    pfc = sum(
        v for s in plain.ports.values() for k, v in s.items() if k.startswith("SAI_PORT_STAT_PFC")
    )
    assert (ecn, pfc) == (1590, 28808)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    lab = tmp_path_factory.mktemp("small") / "lab"
    assert twin("generate", str(SMALL), "-o", str(lab)).returncode == 0
    return lab


def test_a_switch_or_port_the_lab_lacks_is_one_line(small: Path, tmp_path: Path) -> None:
    dump = fixture("t1_counter_db.json.gz", tmp_path)
    for source, said in (
        (f"leaf1={dump}", "leaf1 has no port Ethernet4 in lab small"),
        (f"spine9={dump}", "lab small has no switch spine9"),
        (
            str(tmp_path / "missing.tar"),
            "not SWITCH=FILE[,FILE], a file, a directory or an archive",
        ),
        (f"leaf1={dump},{dump},{dump}", "3 COUNTERS_DB snapshots (give 1 or 2)"),
    ):
        done = twin("import", source, "--lab", str(small), "-o", str(tmp_path / "prod"))
        assert done.returncode == 2, done.stderr
        assert said in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert not (tmp_path / "prod").exists()


def gnmi_answers(exported: list[Path]) -> list[str]:
    """Each switch's exported COUNTERS_DB snapshots as the gNMI answers (gnmic's shape) to
    sonic-gnmi's `COUNTERS/Ethernet*` and `COUNTERS/Ethernet*/Queues`, and the PGs' table
    paths (`COUNTERS_PG_NAME_MAP`, `COUNTERS/oid:...`): `SWITCH=FIRST,SECOND`."""
    sources = []
    for folder in exported:
        files = []
        for n in (1, 2):
            db = json.loads((folder / f"COUNTERS_DB_{n}.json").read_text())
            read = max(e["expireat"] - e["ttl"] for e in db.values() if "expireat" in e)

            def by_name(table: str, db: dict[str, Any] = db) -> dict[str, Any]:
                names = db[table]["value"]
                return {name: db[f"COUNTERS:{oid}"]["value"] for name, oid in names.items()}

            values = {
                "COUNTERS/Ethernet*": by_name("COUNTERS_PORT_NAME_MAP"),
                "COUNTERS/Ethernet*/Queues": by_name("COUNTERS_QUEUE_NAME_MAP"),
                "COUNTERS_PG_NAME_MAP": db["COUNTERS_PG_NAME_MAP"]["value"],
                **{
                    f"COUNTERS/{oid}": db[f"COUNTERS:{oid}"]["value"]
                    for oid in db["COUNTERS_PG_NAME_MAP"]["value"].values()
                },
            }
            updates = [{"Path": p, "values": {p: v}} for p, v in values.items()]
            answer = {"source": folder.name, "timestamp": int(read * 1e9), "updates": updates}
            files.append(folder / f"gnmi_{n}.json")
            files[-1].write_text(json.dumps(answer))
        sources.append(f"{folder.name}={files[0]},{files[1]}")
    return sources


def _run(lab: Path, scenario: Path, out: Path) -> Path:
    done = twin(
        "run", "--backend", "sim", "--no-static", str(lab), str(scenario), "--out", str(out)
    )
    assert done.returncode in (0, 1), done.stderr
    return out


def _agreement(compare_dir: Path) -> float:
    results = json.loads((compare_dir / "report.json").read_text())["results"]
    return float(next(r for r in results if r["scope"] == "agreement")["figures"]["agreement"])


@pytest.mark.parametrize("incident", ["1-pause-storm", "2-micro-bursts"])
def test_round_trip_agrees_and_another_scenario_does_not(incident: str, tmp_path: Path) -> None:
    folder = tmp_path / incident  # the incident under a lab name of this test's
    shutil.copytree(REPO / "examples" / "incidents" / incident, folder)
    fabric = yaml.safe_load(fabric_file(REPO / "examples" / "incidents" / incident).read_text())
    (folder / "fabric.yaml").write_text(yaml.safe_dump({**fabric, "name": lab_name("tel")}))
    before, _ = build(folder, tmp_path / "labs")
    seen = _run(before, folder / "scenario.yaml", tmp_path / "seen")
    exported = tmp_path / "exported"
    assert twin("export", str(seen), "--format", "sonic-db", "-o", str(exported)).returncode == 0
    archive = sorted(exported.iterdir())
    assert {p.name for p in archive[0].iterdir()} == {"COUNTERS_DB_1.json", "COUNTERS_DB_2.json"}
    production = tmp_path / "production"
    done = twin("import", *map(str, archive), "--lab", str(before), "-o", str(production))
    assert done.returncode == 0, done.stderr
    assert json.loads((production / "run.json").read_text())["kind"] == "production"
    assert twin("report", str(production)).returncode in (0, 1)  # read like any run
    same = twin("compare", str(seen), str(production), "--out", str(tmp_path / "same"))
    assert same.returncode == 0, same.stdout + same.stderr
    assert _agreement(tmp_path / "same") == 1.0
    # The same counters as gNMI answers (gnmic's shape) and as an OpenMetrics export in the
    # common exporter's names: the same agreement.
    exposition = tmp_path / "seen.om"
    flavour = ("--metrics-flavour", "sonic-exporter")
    assert twin("report", str(seen), "--openmetrics", str(exposition), *flavour).returncode < 2
    for form, sources in (("gnmi", gnmi_answers(archive)), ("om", [str(exposition)])):
        imported = tmp_path / f"production-{form}"
        done = twin("import", *sources, "--lab", str(before), "-o", str(imported))
        assert done.returncode == 0, done.stderr
        same = twin("compare", str(seen), str(imported), "--out", str(tmp_path / form))
        assert same.returncode == 0, same.stdout + same.stderr
        assert _agreement(tmp_path / form) == 1.0
    # `twin incident --from`: the starting point (what production showed) and the incident's
    # scenario played on the lab with production_agreement in its verdict: 1.0.
    reproduced = tmp_path / "reproduced"
    done = twin(
        "incident", "--from", str(production), str(folder / "scenario.yaml"), str(reproduced)
    )
    assert done.returncode in (0, 1), done.stderr  # the incident fails its other validators
    assert "production_agreement: pass, agreement 1.00" in done.stdout
    assert _agreement(reproduced / "run") == 1.0
    start = json.loads((reproduced / "start.json").read_text())
    assert start["lab"] == str(before.resolve()) and 3 in start["traffic_classes"]
    if incident == "1-pause-storm":  # the backup's pauses spread to the spines, priority 3
        assert start["lossless_seen"] == [3]
        assert any(h["port"].startswith("spine") for h in start["paused"])
    else:  # bursts beyond the leaves' cut headroom: lossless drops of priority 3
        lossless = [h for h in start["drops"] if h["reason"] == "lossless"]
        assert lossless and {h["priority"] for h in lossless} == {3}
        assert all(h["port"].startswith("leaf") for h in lossless)
    # The same fabric with only the first traffic of the incident: what production saw is
    # not what this run does.
    data = yaml.safe_load((folder / "scenario.yaml").read_text())
    data["traffic"] = data["traffic"][:1]
    other_scenario = tmp_path / "other.yaml"
    other_scenario.write_text(yaml.safe_dump(data))
    other = tmp_path / "other"
    differs = twin("incident", "--from", str(production), str(other_scenario), str(other))
    assert differs.returncode == 1, differs.stdout + differs.stderr
    assert "production_agreement: fail" in differs.stdout
    assert _agreement(other / "run") < 0.8


def test_incident_from_refuses_what_is_not_a_production_run(small: Path, tmp_path: Path) -> None:
    scenario = REPO / "examples" / "incidents" / "1-pause-storm" / "scenario.yaml"
    for given, said in (
        (small, "not a run directory"),
        (tmp_path / "nothing", "not a run directory"),
    ):
        done = twin("incident", "--from", str(given), str(scenario), str(tmp_path / "out"))
        assert done.returncode == 2 and said in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()
