"""`labs.sim.pgo`: the profile-guided core is trained and computes what the plain one does;
run directories compare on what they computed, not on what they cost; build failures are one
line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from labs.sim import pgo


def test_extension_is_pyprojects() -> None:
    sources, flags = pgo.extension()
    assert {s.name for s in sources} >= {"engine.c", "eventq.c", "switch.c", "nic.c"}
    assert all(s.is_file() for s in sources) and "-O3" in flags


def test_builds_trains_and_installs_an_equal_core(tmp_path: Path) -> None:
    """The guided core was trained (counts per source), came out the same as the plain one on
    the reference's default run, and is renamed over the target, nothing left beside it."""
    plain, guided, steps = pgo.build(tmp_path / "work", training=((50, "default"),))
    profiles = {p.name.rsplit("-", 1)[-1] for p in (tmp_path / "work").rglob("*.gcda")}
    assert profiles >= {"engine.gcda", "switch.gcda", "nic.gcda", "eventq.gcda"}
    assert plain.read_bytes() != guided.read_bytes()
    assert "the same as the plain core's" in steps[1]
    target = tmp_path / "core.so"
    target.write_bytes(b"the core pip built")
    pgo.install(guided, target)
    assert target.read_bytes() == guided.read_bytes() and target.stat().st_mode & 0o777 == 0o755
    assert {p.name for p in tmp_path.iterdir()} == {"work", "core.so"}


def test_run_directories_differ_on_results_not_timings(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for d, hops in ((a, 10), (b, 10)):
        d.mkdir()
        (d / "sim.json").write_text(json.dumps({"packet_hops": hops, "wall_s": hops * 0.1}))
        (d / "queues.bin").write_bytes(b"\x01\x02")
    (b / "sim.json").write_text(json.dumps({"packet_hops": 10, "wall_s": 7.0, "core_cpu_s": 1}))
    assert pgo.differing(a, b) == []  # what the run cost is not what it computed
    (b / "queues.bin").write_bytes(b"\x01\x03")
    (a / "only-here.json").write_text("{}")
    assert pgo.differing(a, b) == ["only-here.json", "queues.bin"]


def test_compiler_failure_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(pgo.PgoError, match=r"-fno-such-flag: exit 1: .*") as caught:
        pgo.compile_core(tmp_path / "x.so", ["-fno-such-flag"])
    assert "\n" not in str(caught.value)


def test_linker_failure_names_its_cause(tmp_path: Path) -> None:
    with pytest.raises(pgo.PgoError, match=r"\(plain\): exit 1: .*cannot open output file"):
        pgo.compile_core(tmp_path / "missing" / "core.so", [])


def test_a_differing_core_is_not_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """When the runs differ the command exits 2 naming the file, and the core stays."""
    target = tmp_path / "core.so"
    target.write_bytes(b"the core pip built")
    monkeypatch.setattr(pgo, "installed", lambda: target)
    monkeypatch.setattr(pgo, "differing", lambda a, b: ["queues.bin"])
    monkeypatch.setattr(pgo.build, "__defaults__", (((50, "default"),),))
    assert pgo.main([]) == 2
    err = capsys.readouterr().err
    assert "run differs: queues.bin" in err and err.count("\n") == 1
    assert target.read_bytes() == b"the core pip built"
