"""`twin ... --backend clab` from the command line, against the fakes of test_clab_backend.

A new `twin` process per verb, as a user runs them: deploy, inspect, a fault, a faults-only
scenario and a RoCEv2 all-reduce across a link fault played on the wall clock (`twin run`:
real frames through the fake switches, which forward as tests/fake_vs.py describes),
destroy; and the one-line refusals with exit code 2 when containerlab, Docker or an image is
missing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from labs import processes
from tests import fake_clab, fake_docker
from tests.conftest import lab_name, write_lab

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")

SCENARIO = """\
name: clab-link-fault
faults:
  - {at: 1, fault: link-down, link: "leaf1:spine1"}
  - {at: 3, fault: link-up, link: "leaf1:spine1"}
validate:
  bgp_health: {}
"""

ALLREDUCE = """\
name: clab-allreduce-link-fault
traffic:
  - {name: allreduce, at: 0, duration: 5, kind: all_reduce, algorithm: ring, servers: all,
     order: interleaved, qps: 8, pps: 100}
faults:
  - {at: 1.5, fault: link-down, link: "leaf1:spine1"}
  - {at: 3.5, fault: link-up, link: "leaf1:spine1"}
validate:
  bgp_health: {}
"""


class Cli:
    """The `twin` command with the fakes in its environment."""

    def __init__(self, lab: Path, env: dict[str, str], engine: fake_docker.Engine) -> None:
        self.lab, self.env, self.engine = lab, env, engine

    def __call__(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "twin.cli.main", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env,
            check=False,
        )


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    """A small lab of its own, the fake containerlab on PATH, a fake Docker engine."""
    name = lab_name("cc")
    lab = write_lab(tmp_path / name, name)
    state = tmp_path / "fake-state"
    state.mkdir()
    socket = tmp_path / "docker.sock"
    engine, server = fake_docker.serve(socket)
    env = dict(os.environ)
    env.update(
        PATH=f"{fake_clab.install(tmp_path / 'bin')}:{os.environ['PATH']}",
        FAKE_CLAB_STATE=str(state),
        DOCKER_HOST=f"unix://{socket}",
        PYTHONPATH=str(Path(__file__).resolve().parents[2]),
    )
    old = os.environ.get("FAKE_CLAB_STATE")
    os.environ["FAKE_CLAB_STATE"] = str(state)
    run = Cli(lab, env, engine)
    try:
        yield run
    finally:
        left = run("cleanup", str(lab))  # a test that fails before destroy leaves its record
        if fake_clab.load_state():
            fake_clab.main(["destroy", "-t", str(lab / "topology.clab.yml"), "--cleanup"])
        server.shutdown()
        server.server_close()
        if old is None:
            del os.environ["FAKE_CLAB_STATE"]
        else:
            os.environ["FAKE_CLAB_STATE"] = old
        assert left.returncode == 0, left.stderr


def test_deploy_inspect_fault_scenario_destroy(cli: Cli, tmp_path: Path) -> None:
    lab = str(cli.lab)
    up = cli("deploy", lab, "--backend", "clab")
    assert up.returncode == 0, up.stderr
    assert "16 BGP sessions Established" in up.stdout and "(clab)" in up.stdout
    seen = cli("inspect", lab, "--json")
    assert seen.returncode == 0, seen.stderr
    status = json.loads(seen.stdout)
    assert status["backend"] == "clab"
    images = {node: shown["image"] for node, shown in status["addresses"].items()}
    assert images["leaf1"] == "docker-sonic-vs:latest" and images["server1"] in fake_docker.IMAGES
    table = cli("inspect", lab).stdout.splitlines()
    assert table[2].split() == ["node", "role", "state", "address", "image"]
    fault = cli("fault", lab, "link-down", "leaf1:spine1", "--watch", "0.5")
    assert fault.returncode == 0, fault.stderr
    assert cli("fault", lab, "link-up", "leaf1:spine1", "--watch", "0.5").returncode == 0
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(SCENARIO)
    played = cli("run", lab, str(scenario))
    assert played.returncode in (0, 1), played.stderr
    runs = sorted((cli.lab / "runs").iterdir())
    assert runs, played.stderr
    down = cli("destroy", lab)
    assert down.returncode == 0, down.stderr
    calls = fake_clab.calls()
    topo = str(cli.lab / "topology.clab.yml")
    assert ["deploy", "-t", topo] in calls
    assert calls[-1] == ["destroy", "-t", topo, "--cleanup"]
    assert fake_clab.load_state() == {}


@pytest.mark.parametrize("broken", ["containerlab", "docker", "sdk", "image"])
def test_refusals_are_one_line_exit_2(cli: Cli, broken: str, tmp_path: Path) -> None:
    if broken == "containerlab":
        cli.env["PATH"] = "/usr/bin:/bin"
    elif broken == "docker":
        cli.env["DOCKER_HOST"] = f"unix://{tmp_path}/none.sock"
    elif broken == "sdk":
        shadow = tmp_path / "no-sdk" / "docker"
        shadow.mkdir(parents=True)
        (shadow / "__init__.py").write_text("raise ImportError('no docker SDK here')\n")
        cli.env["PYTHONPATH"] = f"{shadow.parent}:{cli.env['PYTHONPATH']}"
    else:
        cli.engine.images.clear()
    done = cli("deploy", str(cli.lab), "--backend", "clab")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("twin: ")
    assert broken != "sdk" or "Docker SDK is not installed" in done.stderr
    assert fake_clab.calls() == []
    assert not (cli.lab / "state.json").exists()


def _namespaces(lab: str) -> list[str]:
    listed = subprocess.run(["ip", "-j", "netns", "list"], capture_output=True, text=True)
    return [n["name"] for n in json.loads(listed.stdout or "[]") if n["name"].startswith(lab)]


def test_allreduce_across_a_link_fault(cli: Cli, tmp_path: Path) -> None:
    lab = str(cli.lab)
    name = cli.lab.name
    assert cli("deploy", lab, "--backend", "clab").returncode == 0
    scenario = tmp_path / "allreduce.yaml"
    scenario.write_text(ALLREDUCE)
    played = cli("run", lab, str(scenario), "--no-sim")  # what clab observes, alone
    assert played.returncode in (0, 1), played.stderr
    (run_dir,) = sorted((cli.lab / "runs").iterdir())
    run = json.loads((run_dir / "run.json").read_text())
    assert run["backend"] == "clab" and "flows" in run["capabilities"]
    flows = json.loads((run_dir / "flows.json").read_text())
    # Ring all-reduce over 4 servers, interleaved across the leaf pairs, 8 QPs each.
    assert len(flows) == 4 * 8
    assert {(f["src"], f["dst"]) for f in flows} == {
        ("server1", "server3"), ("server3", "server2"), ("server2", "server4"),
        ("server4", "server1"),
    }  # fmt: skip
    for f in flows:
        # Every frame sent is either received or counted lost in a gap (none lost before the
        # first received, none after the last): how many fall in the outage is timing.
        assert f["sent"] > 300 and f["received"] > 0, f
        assert f["received"] + f["lost"] == f["sent"], f
        assert f["dscp_received"] == {str(f["dscp_sent"]): f["received"]}, f
    # Frames hashed onto leaf1-spine1 are lost only between the link going down and the
    # fake's routing moving them (its next poll: whether a frame was on the link then is
    # timing, so their number may be 0, and on a loaded machine it is hundreds); none before,
    # none after it came back.
    down, up = (fault["began"] for fault in run["faults"])
    gaps = [(t, n) for f in flows for t, n in f["gaps"]]
    assert sum(f["lost"] for f in flows) == sum(n for _, n in gaps)
    assert all(down < t < up for t, _ in gaps), (down, up, gaps)
    assert all(f["tail_lost"] == 0 for f in flows)
    # Counters by SONiC port: leaf1's uplink to spine1 carried frames, and none while down.
    counters = json.loads((run_dir / "counters.json").read_text())
    tx = counters["fields"].index("tx_packets")
    uplink = [(c["t"], c["c"]["leaf1:Ethernet24"][tx]) for c in counters["samples"]]
    assert uplink[-1][1] > uplink[0][1]
    # (A loaded machine may take no sample while the link is down: then there is none to see.)
    during = {n for t, n in uplink if down + 0.5 < t < up}
    assert len(during) <= 1, uplink

    assert cli("destroy", lab).returncode == 0
    assert processes.tagged(name) == []
    assert _namespaces(name) == []
    assert fake_clab.load_state() == {}


def test_a_fabric_that_does_not_converge_is_deployed_and_judged(cli: Cli, tmp_path: Path) -> None:
    """The first leaf pair originates none of its rack's prefixes (a config SONiC accepts):
    the deploy leaves the twin running and exits 1 saying what it lacked; the run judges it,
    failing `bgp_health routes`, with its reports; destroy removes it."""
    lab = str(cli.lab)
    for leaf in ("leaf1", "leaf2"):
        conf = cli.lab / "configs" / leaf / "frr.conf"
        conf.write_text("".join(
            line for line in conf.read_text().splitlines(keepends=True)
            if not line.strip().startswith("network 10.2.")
        ))  # fmt: skip
    up = cli("deploy", lab, "--backend", "clab", "--timeout", "3")
    assert up.returncode == 1, up.stderr
    assert "left running, not converged" in up.stdout
    assert f"lab {cli.lab.name} did not converge in 3 s: " in up.stdout
    assert "no route to 10.2.0." in up.stdout
    assert json.loads((cli.lab / "state.json").read_text())["status"] == "running"
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "run"
    played = cli("run", lab, str(scenario), "--no-sim", "--out", str(out))
    assert played.returncode == 1, played.stderr
    results = json.loads((out / "report.json").read_text())["results"]
    routes = next(r for r in results if (r["validator"], r["scope"]) == ("bgp_health", "routes"))
    assert routes["status"] == "fail" and "10.2.0." in json.dumps(routes), routes
    assert (out / "report.md").is_file()
    assert cli("destroy", lab).returncode == 0
    assert fake_clab.load_state() == {}
