"""What users of network tools expect of a CLI: `--version` (also stamped into run.json and
report.json), `--json` on the verbs that print data, shell completion made from the verbs'
arguments, a quiet broken pipe, and `fault --watch` (fake backend: no root)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, lab_name, write_lab
from twin.lab.directory import Lab
from validators.registry import INVARIANTS

TWIN = Path(sys.executable).with_name("twin")


def twin(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(TWIN), *argv], capture_output=True, text=True)


def version() -> str:
    return str(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"])


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_lab(tmp_path_factory.mktemp("habits") / "lab", lab_name("hab"))


def test_version_is_pyprojects_and_stamps_runs_and_reports(lab: Path, tmp_path: Path) -> None:
    done = twin("--version")
    assert done.returncode == 0 and done.stdout == f"twin {version()}\n"
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        yaml.safe_dump(
            {
                "name": "s",
                "settle": 0,
                "traffic": [
                    {"at": 0, "duration": 1, "kind": "backup", "src": "server1", "dst": "server3"}
                ],
                "validate": {"bgp_health": {}},
            }
        )
    )
    done = twin("run", str(lab), str(scenario), "--backend", "fake", "--json", "--no-static")
    assert done.returncode in (0, 1), done.stderr
    report = json.loads(done.stdout)  # --json: report.json itself
    assert report["stamp"]["twin_version"] == version() and report["stamp"]["backend"] == "fake"
    # the scenario's validator, then the invariants every run is judged on
    assert {r["validator"] for r in report["results"]} == {"bgp_health", *INVARIANTS}
    (run,) = (lab / "runs").iterdir()
    stamp = json.loads((run / "run.json").read_text())["stamp"]
    assert stamp["twin_version"] == version() and stamp["backend"] == "fake" and stamp["kernel"]
    shown = json.loads(twin("report", str(run), "--json", "--no-static").stdout)
    assert shown["results"] == report["results"]


def test_verbs_that_print_data_print_json(lab: Path, tmp_path: Path) -> None:
    out = tmp_path / "gen"
    generated = json.loads(
        twin("generate", str(REPO / "examples/small.yaml"), "-o", str(out), "--json").stdout
    )
    assert generated["figures"]["leaves"] == 4 and generated["lab"] == str(out)
    shown = json.loads(twin("show", str(out), "--json").stdout)
    assert len([n for n in shown["nodes"] if n["role"] == "leaf"]) == 4 and shown["links"]
    validated = json.loads(twin("validate", str(out), "--json").stdout)
    assert validated["results"] and "stamp" in validated
    deployed = twin("deploy", str(lab), "--backend", "fake", "--json")
    assert deployed.returncode == 0, deployed.stderr
    assert json.loads(deployed.stdout)["backend"] == "fake"
    try:
        fault = twin("fault", str(lab), "link-down", "leaf1:spine1", "--watch", "0.2", "--json")
        assert fault.returncode == 0, fault.stderr
        data = json.loads(fault.stdout)
        assert data["fault"]["fault"] == "link-down" and isinstance(data["changes"], list)
        inspected = json.loads(twin("inspect", str(lab), "--json").stdout)
        assert inspected["backend"] == "fake"
    finally:
        destroyed = twin("destroy", str(lab), "--json")
    assert destroyed.returncode == 0 and "removed" in json.loads(destroyed.stdout)


def test_fault_quiet_is_now_watch(lab: Path) -> None:
    done = twin("fault", str(lab), "link-down", "leaf1:spine1", "--quiet", "1")
    assert done.returncode == 2 and "--quiet" in done.stderr


def test_a_closed_pipe_ends_quietly() -> None:
    lab = REPO / "tests" / "golden" / "small"
    source = lab if (lab / "fabric.yaml").exists() else REPO / "examples" / "small.yaml"
    argv = ["show", str(source)] if source == lab else ["schema"]
    reader = subprocess.Popen([str(TWIN), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert reader.stdout is not None
    reader.stdout.close()  # as `| head` does once it has read enough
    _, err = reader.communicate()
    assert err == b"" and reader.returncode == 141


def _bash(script: str, words: list[str], before: str = "") -> list[str]:
    line = (
        f"{before}source {script}; COMP_WORDS=({' '.join(words)}); "
        f'COMP_CWORD={len(words) - 1}; _twin; echo "${{COMPREPLY[@]}}"'
    )
    env = {**os.environ, "PATH": f"{TWIN.parent}:{os.environ['PATH']}"}  # twin, as installed
    done = subprocess.run(["bash", "-c", line], capture_output=True, text=True, env=env)
    return done.stdout.split()


def test_bash_completion_completes_node_role_and_link_names_from_the_lab(
    lab: Path, tmp_path: Path
) -> None:
    script = tmp_path / "twin.bash"
    script.write_text(twin("completion", "bash").stdout)
    leaves = sorted(n for n in Lab.open(lab).nodes("leaf"))
    assert sorted(_bash(str(script), ["twin", "exec", str(lab), "lea"])) == [*leaves, "leaves"]
    spines = Lab.open(lab).nodes("spine")
    links = _bash(str(script), ["twin", "fault", str(lab), "link-down", "leaf1:sp"])
    assert sorted(links) == sorted(f"leaf1:{s}" for s in spines)
    ports = _bash(str(script), ["twin", "fault", str(lab), "link-down", "leaf1:Eth"])
    assert ports and all(p.startswith("leaf1:Ethernet") for p in ports)
    assert set(ports) == {f"leaf1:{p}" for p in Lab.open(lab).ifmap["leaf1"]} & set(ports)
    # As bash gives it: the word split at ':', the line whole; what follows the colon offered.
    line = f"twin fault {lab} link-down leaf1:sp"
    split = ["twin", "fault", str(lab), "link-down", "leaf1", ":", "sp"]
    typed = f"COMP_LINE='{line}'; COMP_POINT={len(line)}; "
    assert sorted(_bash(str(script), split, typed)) == sorted(spines)


def test_bash_completion_completes_verbs_options_and_choices(tmp_path: Path) -> None:
    script = tmp_path / "twin.bash"
    script.write_text(twin("completion", "bash").stdout)
    assert _bash(str(script), ["twin", "gr"]) == ["graph"]
    assert "--metrics" in _bash(str(script), ["twin", "run", "--me"])
    assert _bash(str(script), ["twin", "run", "--backend", "ne"]) == ["netns"]
    assert _bash(str(script), ["twin", "fault", "lab", "link-d"]) == ["link-down"]
    assert _bash(str(script), ["twin", "graph", "lab", "--format", "m"]) == ["mermaid"]


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts_parse(shell: str, tmp_path: Path) -> None:
    text = twin("completion", shell).stdout
    assert "graph" in text and "--metrics" in text.replace("-l metrics", "--metrics")
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed here")
    script = tmp_path / f"twin.{shell}"
    script.write_text(text)
    check = [shell, "-n", str(script)] if shell == "zsh" else ["fish", "--no-execute", str(script)]
    assert subprocess.run(check, capture_output=True).returncode == 0


def test_scenario_errors_name_their_yaml_place_and_a_near_key(lab: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    head = "name: x\nsettle: 0\ntraffic:\n"
    bad.write_text(head + "  - {at: 0, duration: 1, kind: backup, src: server1, dst: server99}\n")
    done = twin("run", str(lab), str(bad), "--backend", "fake")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "traffic.0: no server 'server99' in lab" in done.stderr
    assert done.stderr.rstrip().endswith("(line 4, column 5)")
    bad.write_text(head + "  - {at: 0, duration: 1, kind: backup, src: server1, dts: server3}\n")
    done = twin("run", str(lab), str(bad), "--backend", "fake")
    assert "traffic.0.dts: unknown key; did you mean dst? (line 4, column 54)" in done.stderr
