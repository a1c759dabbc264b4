"""A running twin, read only: what deploy waited for, jumbo pings, inspect, exec, refusals.

All these tests share one running twin (`small_twin`) and leave it as they found it.
"""

from __future__ import annotations

import itertools
import json
from concurrent.futures import ThreadPoolExecutor
from itertools import permutations

import pytest

from tests.conftest import bgp_cli, cli, namespaces, ping, plan, snapshot, tagged
from twin.pytest_plugin import Twin


def test_deploy_returned_with_every_bgp_session_established(small_twin: Twin) -> None:
    sessions = small_twin.sessions()
    # One session per leaf-spine pair (each seen from both ends), every one Established.
    fabric = [e for _, _, e in small_twin.lab.graph.edges(data=True) if e["kind"] == "fabric"]
    assert len(sessions) == 2 * len(fabric)
    assert [s for s in sessions if s.state != "Established"] == []
    # As the user sees it through twin exec: each leaf has learned the other pair's subnet
    # (and the other leaves' loopbacks) from every spine.
    leaves = small_twin.lab.nodes("leaf")
    with ThreadPoolExecutor(4) as pool:
        seen = list(pool.map(lambda leaf: bgp_cli(small_twin, leaf), leaves))
    for peers in seen:
        assert len(peers) == small_twin.spines()
        assert {p["state"] for p in peers.values()} == {"Established"}
        assert min(p["pfxRcd"] for p in peers.values()) >= 4


def test_every_leaf_has_full_width_ecmp_to_every_remote_server_subnet(small_twin: Twin) -> None:
    widths = small_twin.remote_widths()
    assert len(widths) == 4  # 4 leaves, one remote pair subnet each
    assert widths == {k: small_twin.spines() for k in widths}
    # The next hops are the spines, one per uplink.
    leaf = small_twin.lab.nodes("leaf")[0]
    subnet = small_twin.remote_subnets(leaf)[0]
    route = next(
        r
        for r in json.loads(small_twin.exec(leaf, "ip", "-j", "route").stdout)
        if r["dst"] == subnet
    )
    devices = {hop["dev"] for hop in route["nexthops"]}
    uplinks = {
        v.a_if if v.a == leaf else v.b_if
        for v in plan(small_twin).veths
        if leaf in (v.a, v.b) and v.kind == "fabric"
    }
    assert devices == uplinks


def test_jumbo_pings_with_df_between_all_servers_both_ways(small_twin: Twin) -> None:
    servers = small_twin.servers()
    pairs = list(permutations(servers, 2))
    assert len(pairs) == 12

    def probe(pair: tuple[str, str]) -> tuple[str, str, int]:
        src, dst = pair
        done = ping(small_twin, src, servers[dst], "-M", "do", "-s", "8972", "-c1", "-W1")
        if done.returncode != 0:  # the first packet may wait for ARP on a loaded machine
            done = ping(small_twin, src, servers[dst], "-M", "do", "-s", "8972", "-c1", "-W2")
        return src, dst, done.returncode

    with ThreadPoolExecutor(6) as pool:
        failed = [(s, d) for s, d, code in pool.map(probe, pairs) if code != 0]
    assert failed == []


def test_one_byte_more_than_the_server_mtu_does_not_go_with_df(small_twin: Twin) -> None:
    servers = small_twin.servers()
    src, dst = sorted(servers)[0], sorted(servers)[-1]
    done = small_twin.exec(src, "ping", "-n", "-M", "do", "-s", "8973", "-c1", "-W1", servers[dst])
    assert done.returncode != 0
    assert "message too long, mtu=9000" in done.stdout + done.stderr


def test_inspect_json_has_nodes_sessions_and_links(small_twin: Twin) -> None:
    done = cli(small_twin, "inspect", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert set(data) == {"lab", "backend", "running", "nodes", "sessions", "links", "addresses"}
    assert data["addresses"]["server1"] == {"address": small_twin.servers()["server1"]}
    loopback = str(small_twin.lab.graph.nodes["leaf1"]["loopback"]).split("/")[0]
    assert data["addresses"]["leaf1"] == {"address": loopback}
    assert (data["lab"], data["backend"], data["running"]) == (small_twin.name, "netns", True)
    assert data["nodes"] == {name: "up" for name in plan(small_twin).nodes}
    assert len(data["sessions"]) == len(small_twin.sessions())
    for session in data["sessions"]:
        assert set(session) == {"node", "peer", "name", "state", "prefixes", "uptime_ms"}
        assert session["state"] == "Established"
        assert isinstance(session["prefixes"], int) and isinstance(session["uptime_ms"], int)
    assert len(data["links"]) == len(plan(small_twin).veths)
    ports = {(n, p) for n, ports in small_twin.lab.ifmap.items() for p in ports}
    for link in data["links"]:
        assert set(link) == {"a", "a_port", "b", "b_port", "up"}
        for end in ((link["a"], link["a_port"]), (link["b"], link["b_port"])):
            assert end in ports or end[1].startswith("PortChannel"), end  # SONiC names
        assert link["up"] is True


def test_inspect_prints_tables(small_twin: Twin) -> None:
    done = cli(small_twin, "inspect")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("Established") == len(small_twin.sessions())
    assert "server1" in done.stdout and "on netns" in done.stdout
    header = done.stdout.splitlines()[2].split()
    assert header == ["node", "role", "state", "address"]
    row = next(line.split() for line in done.stdout.splitlines() if line.startswith("server1 "))
    assert row == ["server1", "server", "up", small_twin.servers()["server1"]]


@pytest.mark.parametrize("code", [0, 1, 7, 42])
def test_exec_passes_the_exit_code_through(small_twin: Twin, code: int) -> None:
    script = f"echo out; echo err >&2; exit {code}"
    done = cli(small_twin, "exec", "server1", "--", "sh", "-c", script)
    assert done.returncode == code
    assert done.stdout == "out\n"
    assert done.stderr == "err\n"


def test_exec_runs_in_the_node_namespace(small_twin: Twin) -> None:
    done = cli(small_twin, "exec", "server1", "--", "ip", "-j", "addr", "show", "dev", "nic0")
    assert done.returncode == 0, done.stderr
    address = json.loads(done.stdout)[0]["addr_info"][0]["local"]
    assert address == small_twin.servers()["server1"]


@pytest.mark.parametrize("selector", ["leaves", "leaf*", "leaf1,leaf2,leaf3,leaf4"])
def test_exec_on_several_nodes_prefixes_each_line_with_its_node(
    small_twin: Twin, selector: str
) -> None:
    done = cli(small_twin, "exec", selector, "--", "ip", "-o", "-4", "addr", "show", "dev", "lo")
    assert done.returncode == 0, done.stderr
    leaves = small_twin.lab.nodes("leaf")
    lines = done.stdout.splitlines()
    by_node = {n: list(ls) for n, ls in itertools.groupby(lines, lambda ln: ln.split(":")[0])}
    assert list(by_node) == leaves  # every leaf, each once, in order
    for leaf, own in by_node.items():
        loopback = str(small_twin.lab.graph.nodes[leaf]["loopback"]).split("/")[0]
        assert any(f" inet {loopback}/32 " in line for line in own), own


def test_exec_on_several_nodes_exits_with_the_first_failure(small_twin: Twin) -> None:
    done = cli(small_twin, "exec", "servers", "--", "sh", "-c", "echo err >&2; exit 3")
    assert done.returncode == 3
    assert done.stderr.splitlines() == [f"{s}: err" for s in small_twin.lab.nodes("server")]


def test_exec_on_an_unknown_node_is_one_line(small_twin: Twin) -> None:
    done = cli(small_twin, "exec", "nosuch", "--", "true")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "no node nosuch" in done.stderr


def test_the_state_file_records_what_was_created(small_twin: Twin) -> None:
    state = json.loads((small_twin.path / "state.json").read_text())
    assert state["lab"] == small_twin.name and state["status"] == "running"
    assert sorted(state["namespaces"]) == namespaces(small_twin.name)
    assert set(state["pids"]) == set(small_twin.lab.switches())
    recorded = {pid for daemons in state["pids"].values() for pid in daemons.values()}
    # Every tagged process of the lab is a recorded daemon, and every daemon runs.
    assert set(tagged(small_twin.name)) == recorded
    for daemons in state["pids"].values():
        assert {"zebra", "staticd", "bgpd", "bfdd"} == set(daemons)


def test_a_second_deploy_of_a_running_lab_is_refused_in_one_line(small_twin: Twin) -> None:
    before = snapshot(small_twin)
    done = cli(small_twin, "deploy")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "already running" in done.stderr and small_twin.name in done.stderr
    # ... and the running twin was not touched.
    assert snapshot(small_twin) == before
    assert small_twin.established()
