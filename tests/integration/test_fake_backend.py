"""The fake backend without root: FIBs from the routing model under faults, a scenario played
end to end in model time, its observations and verdicts, and the CLI verbs on it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from labs import registry, state
from labs.backend import COUNTER_FIELDS, Fault, quiet
from tests.conftest import lab_name, twin_cli, write_lab
from twin.lab.directory import Lab
from twin.model.fib import applied
from twin.model.routing import Routing
from twin.model.wiring import Wiring, links
from twin.scenario import model as scenarios
from twin.scenario import player
from twin.scenario.observations import Observations
from twin.verdict import verdict
from validators.result import Status

FAKE = registry.get("fake")


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    """The small lab (two MLAG pairs) deployed on the fake backend."""
    lab = Lab.open(write_lab(tmp_path / "lab", lab_name("fk")))
    FAKE.deploy(lab, quiet)
    yield lab
    FAKE.destroy(lab)


def play(lab: Lab, tmp: Path, scenario: dict[str, Any]) -> Observations:
    path = tmp / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return Observations.open(player.play(lab, scenarios.load(path, lab), FAKE))


ALLREDUCE = {"kind": "all_reduce", "duration": 4, "qps": 4, "pps": 100, "order": "interleaved"}
SERVER1_CUT = [
    {"at": 1, "fault": "link-down", "link": "server1:leaf1"},
    {"at": 1, "fault": "link-down", "link": "server1:leaf2"},
    {"at": 3, "fault": "link-up", "link": "server1:leaf1"},
]


def test_deploy_records_the_backend_and_refuses_a_second_deploy(lab: Lab) -> None:
    recorded = state.load(lab.path)
    assert recorded is not None and (recorded.backend, recorded.status) == ("fake", "running")
    assert FAKE.running(lab) and registry.of(lab).name == "fake"
    with pytest.raises(Exception, match="already running"):
        FAKE.deploy(lab, quiet)


def test_the_fib_is_the_routing_models_and_follows_link_faults(lab: Lab) -> None:
    wiring = Wiring(lab)
    routing = Routing(wiring)
    assert FAKE.observer(lab).fib() == routing.fib
    failed = [x for x in links(lab) if {x[0], x[2]} == {"leaf1", "spine1"}]
    expected = applied(routing.fib, routing.after(failed))
    record = FAKE.fault(lab, Fault("link-down", link="leaf1:spine1"))
    assert record["ends"] == ["leaf1:Ethernet24", "spine1:Ethernet0"]
    assert FAKE.observer(lab).fib() == expected
    assert {ls.up for ls in FAKE.status(lab).links if {ls.a, ls.b} == {"leaf1", "spine1"}} == {
        False
    }
    FAKE.fault(lab, Fault("link-up", link="leaf1:spine1"))
    assert FAKE.observer(lab).fib() == routing.fib


def test_a_cut_server_loses_its_flows_until_a_link_returns(lab: Lab, tmp_path: Path) -> None:
    obs = play(lab, tmp_path, {"name": "cut", "traffic": [ALLREDUCE], "faults": SERVER1_CUT})
    touching = [f for f in obs.flows if "server1" in (f["src"], f["dst"])]
    others = [f for f in obs.flows if f not in touching]
    assert touching and others
    assert all(f["sent"] == 400 and f["received"] == 400 for f in others)
    for f in touching:  # 2 s without a path, then delivered again
        assert (f["received"], f["lost"], f["tail_lost"]) == (200, 200, 0)
        assert [round(t - obs.run["started"], 2) for t, _ in f["gaps"]] == [3.01]
    assert [f["fault"] for f in obs.run["faults"]] == ["link-down", "link-down", "link-up"]
    assert obs.fib_labels() == [
        "start",
        "fault1-link-down",
        "fault2-link-down",
        "fault3-link-up",
        "end",
    ]

    def toward_server1(label: str) -> int:
        fib = obs.fib(label)
        return sum(
            h.node == "server1"
            for leaf in ("leaf1", "leaf2")
            for hops in fib[leaf].values()
            for h in hops
        )

    assert toward_server1("start") > 0
    assert toward_server1("fault2-link-down") == 0
    assert toward_server1("fault3-link-up") > 0


def test_counters_add_up_to_the_flows(lab: Lab, tmp_path: Path) -> None:
    obs = play(lab, tmp_path, {"name": "count", "traffic": [ALLREDUCE], "faults": SERVER1_CUT})
    assert obs.counters["fields"] == COUNTER_FIELDS
    last = obs.counters["samples"][-1]["c"]
    rx = COUNTER_FIELDS.index("rx_packets")
    tx = COUNTER_FIELDS.index("tx_packets")
    servers = lab.nodes("server")
    delivered = sum(f["received"] for f in obs.flows)
    assert sum(v[rx] for k, v in last.items() if k.split(":")[0] in servers) == delivered
    sent_ok = sum(v[tx] for k, v in last.items() if k.split(":")[0] in servers)
    assert sent_ok == delivered  # a packet without a path never leaves its server
    assert all(":" in k and not k.startswith(lab.name) for k in last)  # node:port, no netns


def test_ecmp_is_deterministic_and_spreads_over_the_spines(lab: Lab, tmp_path: Path) -> None:
    many = {"kind": "all_to_all", "duration": 2, "qps": 8, "pps": 100}  # 96 flows
    first = play(lab, tmp_path, {"name": "a", "traffic": [many]})
    second = play(lab, tmp_path, {"name": "b", "traffic": [many]})
    strip = ("gaps",)
    assert [{k: v for k, v in f.items() if k not in strip} for f in first.flows] == [
        {k: v for k, v in f.items() if k not in strip} for f in second.flows
    ]
    tx = COUNTER_FIELDS.index("tx_packets")
    last = first.counters["samples"][-1]["c"]
    for leaf, ports in first.run["uplinks"].items():
        counts = [last.get(f"{leaf}:{p}", [0] * 6)[tx] for p in ports]
        assert all(c > 0 for c in counts), (leaf, counts)


def test_validators_the_fake_cannot_feed_are_not_observable(lab: Lab, tmp_path: Path) -> None:
    scenario = {
        "name": "verdicts",
        "traffic": [ALLREDUCE],
        "faults": SERVER1_CUT,
        "validate": {"failover": {}, "bgp_health": {}, "reachability": {}, "deadlock_observed": {}},
    }
    obs = play(lab, tmp_path, scenario)
    code, results = verdict.report_run(obs.path)
    by = {(r.validator, r.scope): r for r in results}
    assert (
        by[("bgp_health", "run")].reason
        == "the fake backend does not observe bgp: run on netns or clab (--backend netns)"
    )
    assert (
        by[("reachability", "run")].reason
        == "the fake backend does not observe probes: run on netns (--backend netns)"
    )
    judged = [r for r in results if r.validator == "deadlock_observed"]
    assert judged and {r.status for r in judged} <= {Status.PASS, Status.FAIL}  # it has FIBs
    assert judged[0].figures["snapshots"] == 5
    one_nic = by[("failover", "fault1 link-down server1:leaf1")]
    assert one_nic.status is Status.PASS and one_nic.figures["loss_window_ms"] == 0.0
    assert one_nic.figures["probe_flows"] == 8  # pinned through the link by the routing model
    # The second link down leaves server1 no link of the design: nothing a fabric can fail
    # over to, so that fault is not judged (its restore is).
    cut = by[("failover", "fault2 link-down server1:leaf2")]
    assert cut.status is Status.NOT_OBSERVABLE and cut.figures["flows_loss_window_ms"] == 2000.0
    assert cut.reason.startswith("nothing to fail over to: the fault took every link the design")
    # The link-up gives back fault1's link, but fault2 came between: its probes had ended.
    back = by[("failover", "fault3 link-up server1:leaf1")]
    assert back.status is Status.NOT_OBSERVABLE
    assert back.reason == "the probe flows of fault1 ended at the fault after it, before this one"
    assert code == 1
    assert json.loads((obs.path / "run.json").read_text())["capabilities"] == [
        "counters",
        "failover-probes",
        "fib",
        "flows",
    ]


def test_the_cli_plays_a_scenario_on_the_fake_backend(tmp_path: Path) -> None:
    path = write_lab(tmp_path / "lab", lab_name("fk"))
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        yaml.safe_dump({"name": "cli", "traffic": [ALLREDUCE], "validate": {"failover": {}}})
    )
    done = twin_cli("run", str(path), str(scenario), "--backend", "fake")
    assert done.returncode == 0, done.stderr
    assert "failover" in done.stdout and "0 failed" in done.stdout
    assert not (path / "state.json").exists()  # deployed by the run, destroyed after it
    assert twin_cli("deploy", str(path), "--backend", "fake").returncode == 0
    inspect = twin_cli("inspect", str(path), "--json")  # the state names the backend
    assert inspect.returncode == 0, inspect.stderr
    assert json.loads(inspect.stdout)["backend"] == "fake"
    refused = twin_cli("exec", str(path), "server1", "--", "true")
    assert (refused.returncode, refused.stderr.count("\n")) == (2, 1)
    assert "runs no processes" in refused.stderr
    other = twin_cli("destroy", str(path), "--backend", "netns")
    assert other.returncode == 2 and "runs on the fake backend" in other.stderr
    assert twin_cli("destroy", str(path)).returncode == 0
    assert not (path / "state.json").exists()


def test_the_default_run_of_the_reference_passes_on_the_fake_backend(tmp_path: Path) -> None:
    """`twin run --backend fake` with no lab: the reference fabric and the default scenario;
    nothing fails, and what the fake cannot see (BGP, daemons, probes, the data plane's PFC,
    ECN, deadlocks and iterations, a live FIB to hold against the model's) is not-observable."""
    done = twin_cli("run", "--backend", "fake", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ", 0 failed, 9 not observable" in done.stdout
    # Each link-up is judged from the probe flows of the link-down before it, routed back.
    for scope in ("fault2 link-up leaf1:spine1", "fault4 link-up server2:nic0"):
        assert re.search(rf"failover +{scope} +pass +8 probe flows", done.stdout), scope
    assert "the fake backend does not observe probes: run on netns (--backend netns)" in done.stdout


def test_run_with_no_arguments_keeps_the_reference_and_its_earlier_runs(tmp_path: Path) -> None:
    """A second `twin run` with no lab plays in the same ./twin-reference: its design is the
    reference's, so it is not regenerated and the first run is still there."""
    first = twin_cli("run", "--backend", "fake", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    runs = tmp_path / "twin-reference" / "runs"
    before = sorted(runs.iterdir())
    assert len(before) == 1
    second = twin_cli("run", "--backend", "fake", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert "the reference fabric in twin-reference" in second.stderr
    after = sorted(runs.iterdir())
    assert len(after) == 2 and after[0] == before[0] and (after[0] / "report.md").is_file()


UPLINK_FAILURE = (
    Path(__file__).resolve().parents[2] / "examples" / "scenarios" / "uplink-failure.yaml"
)
"""A ring All-Reduce at 10 packets a second per flow while leaf1's first uplink fails and
comes back: the failover probes send a thousand a second through it."""


@pytest.mark.parametrize(
    ("leaves", "servers"),
    [(4, {"count": 16}), (2, {"count": 8, "nics": 1, "dual_homed": False})],
    ids=["16-dual-homed", "8-single-homed"],
)
def test_ecmp_spread_is_judged_without_the_failover_probes(
    tmp_path: Path, leaves: int, servers: dict[str, Any]
) -> None:
    """The fake counts its failover probes' packets on their ports, as the netns twin's
    counters do; `ecmp_spread` judges the collective's uplink counts outside the probes'
    spans, so the healthy fabric passes (16 servers: leaf1's uplinks 1.95 max/mean with
    the probes counted)."""
    name = lab_name("fk")
    fabric = {"name": name, "spines": {"count": 2}, "leaves": {"count": leaves}}
    source = tmp_path / "fabric.yaml"
    source.write_text(yaml.safe_dump({**fabric, "servers": servers}))
    generated = twin_cli("generate", str(source), "-o", str(tmp_path / name))
    assert generated.returncode == 0, generated.stderr
    done = twin_cli("run", str(tmp_path / name), str(UPLINK_FAILURE), "--backend", "fake", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads(done.stdout)["results"]
    spread = {r["scope"]: r["status"] for r in results if r["validator"] == "ecmp_spread"}
    assert spread == {"fib": "pass", **{f"leaf{i}": "pass" for i in range(1, leaves + 1)}}
    probes = json.loads(
        (sorted((tmp_path / name / "runs").iterdir())[-1] / "failover_probes.json").read_text()
    )
    assert probes[0]["flows"] and probes[0]["until"] > probes[0]["started"]
