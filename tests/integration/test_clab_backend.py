"""The clab backend against a fake `containerlab` and a fake Docker Engine (no Docker here).

tests/fake_clab.py stands in for the containerlab CLI (containers are network namespaces of
this machine holding the topology's veths), tests/fake_docker.py for the Docker Engine API on
a unix socket (answering docker-sonic-vs commands from the configs bound into each container);
both record every call, and the tests check the calls are what containerlab and Docker would
be asked. Host configuration really runs: pyroute2 in each server's namespace, entered
through the pid the fake engine reports. What these tests cannot show (real SONiC-VS start-up,
real BGP in the image) is listed in docs/containerlab.md.
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import yaml

from labs import processes, registry, state
from labs.backend import Fault, FlowSpec, Phase, ProbePair
from labs.clab import backend as clab_backend
from labs.clab import tools
from tests import fake_clab, fake_docker, fake_vs
from tests.conftest import lab_name, wait_for, write_lab
from twin.errors import LabError
from twin.lab.directory import Lab
from twin.render import sonic_vs

PUSH = ["timeout", "-k", "5", "60", "vtysh", "-f", "/etc/twin/frr.conf"]
SWITCH_STARTUP = [
    ["redis-cli", "ping"],
    ["supervisorctl", "status", "orchagent"],
    ["sonic-cfggen", "-d", "-v", "DEVICE_METADATA.localhost.hostname"],
    ["supervisorctl", "status", "bgpd"],
    ["/usr/lib/frr/bfdd", "-d", "-A", "127.0.0.1", "-P", "0"],
    ["vtysh", "-c", "show daemons"],
    PUSH,  # vtysh waits while bgpcfgd holds the config lock, as FRR >= 10.0 does
    ["vtysh", "-c", "show bgp summary json"],
]
"""What the backend runs in each switch at deploy."""

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")


@dataclass
class Fakes:
    """A lab directory, the fakes' state, the fake engine and the switches' routing."""

    lab: Lab
    state: Path
    engine: fake_docker.Engine
    routing: fake_vs.Routing

    def clab_calls(self) -> list[list[str]]:
        return fake_clab.calls()

    def execs(self, node: str) -> list[list[str]]:
        name = f"clab-{self.lab.name}-{node}"
        return [argv for box, argv in self.engine.executed() if box == name]

    def ns(self, node: str, *argv: str) -> str:
        done = subprocess.run(
            ["ip", "-n", f"{self.lab.name}.{node}", *argv], capture_output=True, text=True
        )
        return done.stdout


@pytest.fixture
def fakes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Fakes]:
    """A small lab with a name of its own, the fake containerlab on PATH and a fake Docker
    engine at DOCKER_HOST; whatever a test leaves deployed is destroyed by the fake."""
    name = lab_name("ck")
    lab = Lab.open(write_lab(tmp_path / name, name))
    topology = lab.path / "topology.clab.yml"
    with fake_docker.with_containerlab(tmp_path, monkeypatch, topology) as (fake, engine, server):
        try:
            yield Fakes(lab, fake, engine, server.routing)
        finally:  # a twin a test left deployed: its run directory (the fake removes the rest)
            registry.get("clab").cleanup(name, lab.path)


# --------------------------------------------------------------------------- deploy, faults
def test_deploy_configures_everything_then_a_link_fault_then_destroy(fakes: Fakes) -> None:
    lab = fakes.lab
    backend = registry.get("clab")
    up = backend.deploy(lab, lambda _: None)
    topo = str(lab.path / "topology.clab.yml")
    assert fakes.clab_calls() == [
        ["inspect", "-t", topo, "--format", "json"],
        ["deploy", "-t", topo],
    ]
    peers = 2 * sum(1 for *_, e in lab.graph.edges(data=True) if e["kind"] == "fabric")
    assert (up.backend, up.nodes, up.sessions) == ("clab", 10, peers)
    assert backend.running(lab) and state.load(lab.path) is not None
    # Docker: pinged, both images looked up, nothing pulled; containerlab created the lab's
    # own management network, at the topology's subnet.
    gets = [p for m, p, _ in fakes.engine.requests if m == "GET"]
    assert "/_ping" in gets
    assert {f"/images/{image}/json" for image in fake_docker.IMAGES} <= set(gets)
    made = [p for m, p, _ in fakes.engine.requests if "create" in p or "pull" in p]
    assert made == ["/networks/create"]
    mgmt = yaml.safe_load((lab.path / "topology.clab.yml").read_text())["mgmt"]
    net = fakes.engine.networks[f"twin-{lab.name}"]
    assert net["IPAM"]["Config"] == [{"Subnet": mgmt["ipv4-subnet"]}]
    # Each switch: readiness, bfdd (detached), the daemons reached, frr.conf pushed with
    # vtysh (again once bgpcfgd's lock is released), then BGP polled.
    for switch in lab.switches():
        assert fakes.execs(switch)[: len(SWITCH_STARTUP)] == SWITCH_STARTUP, switch
    assert fakes.engine.held == [] and len(fakes.engine.bfdd) == len(lab.switches())
    hostnames = {fake_vs.config(b)["DEVICE_METADATA"]["localhost"]["hostname"]
                 for b in fake_clab.load_state().values() if b["kind"] == "sonic-vs"}  # fmt: skip
    assert hostnames == set(lab.switches())  # start.sh loaded the bound config_db.json
    # Servers: set up through their namespace, nothing run in the container.
    assert fakes.execs("server1") == []
    addresses = json.loads(fakes.ns("server1", "-j", "addr"))
    held = {(a["ifname"], f"{i['local']}/{i['prefixlen']}") for a in addresses
            for i in a["addr_info"] if i["family"] == "inet"}  # fmt: skip
    host = json.loads((lab.path / "clab" / "server1" / "host.json").read_text())
    assert ("lo", host["address"]) in held
    assert {(nic["name"], nic["address"]) for nic in host["interfaces"]} <= held
    default = json.loads(fakes.ns("server1", "-j", "route", "show", "default"))[0]
    assert default["prefsrc"] == host["address"].split("/")[0]
    assert sorted(h["gateway"] for h in default["nexthops"]) == sorted(
        nic["gateway"] for nic in host["interfaces"]
    )
    links = json.loads(fakes.ns("server1", "-j", "link"))
    assert {x["ifname"]: x["mtu"] for x in links if x["ifname"].startswith("eth")} == {
        "eth1": host["mtu"], "eth2": host["mtu"]
    }  # fmt: skip
    sysctl = ["sysctl", "-n", "net.ipv4.conf.eth1.arp_ignore"]
    arp = subprocess.run(
        ["ip", "netns", "exec", f"{lab.name}.leaf1", *sysctl], capture_output=True, text=True
    )
    assert arp.stdout.strip() == "8"

    # A link fault: both container interfaces go down, the session over it drops.
    event = backend.fault(lab, Fault("link-down", link="leaf1:spine1"))
    assert (event["fault"], event["backend"]) == ("link-down", "clab")
    assert event["ends"] == ["leaf1:Ethernet24", "spine1:Ethernet0"]
    leaf_eth = lab.ifmap["leaf1"]["Ethernet24"]["clab"]
    assert "state DOWN" in fakes.ns("leaf1", "link", "show", leaf_eth)
    observer = backend.observer(lab)
    down = {(s.node, s.name) for s in observer.bgp() if s.state != "Established"}
    assert down == {("leaf1", "spine1"), ("spine1", "leaf1")}
    status = backend.status(lab)
    broken = [(x.a, x.b) for x in status.links if not x.up]
    assert broken == [("leaf1", "spine1")]
    counters = observer.counters()
    assert "leaf1:Ethernet24" in counters and "server1:nic0" in counters
    fib = observer.fib()
    assert set(fib) == set(lab.graph.nodes)
    backend.fault(lab, Fault("link-up", link="leaf1:spine1"))
    wait_for(lambda: all(s.state == "Established" for s in observer.bgp()), "BGP back", 10)

    removed = backend.destroy(lab)
    assert removed == {"containers": 10, "processes": 0}
    assert fakes.clab_calls()[-1] == ["destroy", "-t", topo, "--cleanup"]
    assert not backend.running(lab) and state.load(lab.path) is None
    assert fake_clab.load_state() == {}
    assert set(fakes.engine.networks) == {"bridge"}


def test_labs_side_by_side_get_management_networks_of_their_own(fakes: Fakes) -> None:
    """Docker refuses a network overlapping another: with containerlab's default network and
    one at the very block the lab's name hashes to, the lab deploys on a free subnet."""
    lab = fakes.lab
    nodes = lab.graph.number_of_nodes()
    hashed = sonic_vs.mgmt_subnet(lab.name, nodes)
    assert fakes.engine.add_network("clab", "172.20.20.0/24") is None
    assert fakes.engine.add_network("other-lab", hashed) is None
    registry.get("clab").deploy(lab, lambda _: None)
    subnet = yaml.safe_load((lab.path / "topology.clab.yml").read_text())["mgmt"]["ipv4-subnet"]
    assert subnet not in (hashed, "172.20.20.0/24")
    assert fakes.engine.networks[f"twin-{lab.name}"]["IPAM"]["Config"] == [{"Subnet": subnet}]
    records = {r.node: r.mgmt_ipv4 for r in tools.inspect(lab)}
    net = ipaddress.IPv4Network(subnet)
    assert all(ipaddress.IPv4Interface(a).ip in net for a in records.values()), records
    registry.get("clab").destroy(lab)
    assert set(fakes.engine.networks) == {"bridge", "clab", "other-lab"}


def _hops(fakes: Fakes, node: str, address: str) -> set[str]:
    """The interfaces of a switch's kernel route to `address` (none when it has none)."""
    routes = json.loads(fakes.ns(node, "-j", "route", "show", f"{address}/32") or "[]")
    return {h.get("dev", "") for r in routes for h in r.get("nexthops", [r])}


def test_a_server_link_fault_withdraws_the_server_from_its_leaf(fakes: Fakes) -> None:
    """The image's port keeps its carrier when `ethN` goes (the fake models it so): the
    fault also turns the leaf port's carrier off, so zebra drops the server's /32 and the
    spines route to the server only through the other leaf; the restore brings both back."""
    lab = fakes.lab
    backend = registry.get("clab")
    backend.deploy(lab, lambda _: None)
    host = json.loads((lab.path / "clab" / "server1" / "host.json").read_text())
    address = host["address"].split("/")[0]
    nic = next(n for n in host["interfaces"] if n["nic"] == "nic0")
    leaf, port = nic["peer"], nic["peer_port"]
    both = _hops(fakes, "spine1", address)
    assert len(both) == 2, both
    event = backend.fault(lab, Fault("link-down", link="server1:nic0"))
    assert event["ends"] == ["server1:nic0", f"{leaf}:{port}"]
    wait_for(lambda: len(_hops(fakes, "spine1", address)) == 1, "spine1 withdraws a leaf", 10)
    assert ["ip", "link", "set", "dev", port, "carrier", "off"] in fakes.execs(leaf)
    wait_for(lambda: port not in _hops(fakes, leaf, address), f"{leaf} drops the /32", 10)
    backend.fault(lab, Fault("link-up", link="server1:nic0"))
    assert fakes.execs(leaf)[-1] == ["ip", "link", "set", "dev", port, "carrier", "on"]
    wait_for(lambda: _hops(fakes, "spine1", address) == both, "spine1 routes both again", 10)
    backend.destroy(lab)


def test_a_server_down_is_withdrawn_by_both_leaves(fakes: Fakes) -> None:
    """node-down of a server: the leaves' ports to it keep their carrier in the image, so the
    backend turns them off; no switch routes to the server until it is back."""
    lab = fakes.lab
    backend = registry.get("clab")
    backend.deploy(lab, lambda _: None)
    host = json.loads((lab.path / "clab" / "server1" / "host.json").read_text())
    address = host["address"].split("/")[0]
    both = _hops(fakes, "spine1", address)
    backend.fault(lab, Fault("node-down", node="server1"))
    wait_for(lambda: not _hops(fakes, "spine1", address), "spine1 withdraws server1", 10)
    backend.fault(lab, Fault("node-up", node="server1"))
    wait_for(lambda: _hops(fakes, "spine1", address) == both, "spine1 routes both again", 10)
    backend.destroy(lab)


def test_daemon_kill_and_node_restart(fakes: Fakes) -> None:
    lab = fakes.lab
    backend = registry.get("clab")
    backend.deploy(lab, lambda _: None)
    backend.fault(lab, Fault("daemon-kill", node="spine1"))
    assert fakes.execs("spine1")[-1] == ["supervisorctl", "signal", "KILL", "bgpd"]
    assert {s.node for s in backend.observer(lab).bgp() if s.state != "Established"} >= {"spine1"}
    backend.fault(lab, Fault("daemon-restart", node="spine1"))
    assert fakes.execs("spine1")[-4:] == [
        ["supervisorctl", "start", "bgpd"],
        SWITCH_STARTUP[4],  # bfdd
        ["vtysh", "-c", "show daemons"],
        PUSH,
    ]
    backend.fault(lab, Fault("node-down", node="leaf2"))
    backend.fault(lab, Fault("node-up", node="leaf2"))
    topo = str(lab.path / "topology.clab.yml")
    assert fakes.clab_calls()[-2:] == [
        ["stop", "-t", topo, "--node", "leaf2"],
        ["start", "-t", topo, "--node", "leaf2"],
    ]
    detached = [r for r in fakes.engine.requests if r[0] == "POST" and r[2] and r[2].get("Cmd")]
    assert ["supervisord"] in [r[2]["Cmd"] for r in detached]
    # After the restart (a new namespace in the fake: ECMP hashed on addresses, ARP replies
    # on): the kernel set again, and frr.conf pushed again once.
    after = fakes.execs("leaf2")[fakes.execs("leaf2").index(["supervisord"]) :]
    assert after.count(PUSH) == 1
    assert _sysctl(lab, "leaf2", "net.ipv4.fib_multipath_hash_policy") == "3"
    for eth in lab.ifmap["leaf2"].values():
        assert _sysctl(lab, "leaf2", f"net.ipv4.conf.{eth['clab']}.arp_ignore") == "8", eth
    observer = backend.observer(lab)
    wait_for(lambda: all(s.state == "Established" for s in observer.bgp()), "BGP back", 10)
    backend.destroy(lab)


def _sysctl(lab: Lab, node: str, key: str) -> str:
    done = subprocess.run(["ip", "netns", "exec", f"{lab.name}.{node}", "sysctl", "-n", key],
                          capture_output=True, text=True)  # fmt: skip
    return done.stdout.strip()


def _start_bodies(fakes: Fakes) -> dict[str, dict[str, object]]:
    """Exec id -> the body its start was posted with."""
    return {
        path.split("/")[2]: body
        for method, path, body in fakes.engine.requests
        if method == "POST" and path.endswith("/start")
    }


def test_bfdd_is_started_detached(fakes: Fakes) -> None:
    """An attached `bfdd -d` never ends (it keeps the exec's pipes open): the fake holds it."""
    registry.get("clab").deploy(fakes.lab, lambda _: None)
    bodies = _start_bodies(fakes)
    bfdd = [i for i, e in fakes.engine.execs.items() if e["argv"][0] == "/usr/lib/frr/bfdd"]
    assert len(bfdd) == len(fakes.lab.switches())
    assert all(bodies[i].get("Detach") is True for i in bfdd)
    assert fakes.engine.held == []


def test_traffic_in_the_server_containers_then_destroy_ends_its_workers(fakes: Fakes) -> None:
    from labs.clab.containers import Containers
    from labs.clab.traffic import servers
    from labs.flows import start_receivers
    from traffic.collectives import flow_id

    lab = fakes.lab
    backend = registry.get("clab")
    assert "flows" in backend.capabilities
    backend.deploy(lab, lambda _: None)
    # Deploy returned once every switch routes to every server (they follow the sessions).
    where = servers(Containers(lab))
    wanted = {host["address"].split("/")[0] for host in where.hosts.values()}
    assert all(wanted <= set(fakes.ns(sw, "route").split()) for sw in lab.switches())
    receivers = start_receivers(where)
    try:
        # One receiver per server, tagged with the lab, inside that server's container.
        workers = processes.tagged(lab.name)
        boxes = fake_clab.load_state()
        inside = {
            os.stat(f"/proc/{boxes[f'clab-{lab.name}-{s}']['pid']}/ns/net").st_ino
            for s in lab.nodes("server")
        }
        assert len(workers) == 4
        assert {os.stat(f"/proc/{pid}/ns/net").st_ino for pid in workers} == inside
        fid = flow_id("server1", "server3", 0)
        flow = FlowSpec(fid, "server1", "server3", 0)
        phase = Phase(0, "p", "all_to_all", "roce", {"server1": 26}, [flow], 0.0, 1.0, 512, 200)
        traffic = backend.traffic(lab, phase)
        traffic.start()
        sent = traffic.stop()
        counted = receivers.pop("server3").stop().flows
        assert sent[fid] > 150 and counted[fid].packets == sent[fid]
        assert counted[fid].dscp == {26: sent[fid]}
        # An ECMP probe: 64 UDP 5-tuples out of server1's nic0 into leaf1, which spreads them
        # over both its uplinks (the fake's kernel hashes L4, as SONiC does).
        observer = backend.observer(lab)
        uplinks = ["leaf1:Ethernet24", "leaf1:Ethernet32"]
        before = observer.counters()
        probe = ProbePair(99, "leaf1", "server1", "nic0", "server3", 0xC000, 64)
        probing = backend.traffic(lab, replace(phase, kind="ecmp_probe", flows=[], probe=[probe]))
        probing.start()
        probed = probing.stop()[99]
        after = observer.counters()
        tx = [after[u][1] - before[u][1] for u in uplinks]  # tx_packets
        assert probed > 150 and sum(tx) >= probed
        assert all(n > 0.2 * probed for n in tx), tx
        # Destroy ends the workers still running (the other receivers), by the lab's tag.
        assert backend.destroy(lab) == {"containers": 10, "processes": 3}
        assert processes.tagged(lab.name) == []
    finally:
        for receiver in receivers.values():
            receiver.close()


# --------------------------------------------------------------------------- bad input
def _refused(lab: Lab) -> str:
    with pytest.raises(LabError) as info:
        registry.get("clab").deploy(lab, lambda _: None)
    message = str(info.value)
    assert "\n" not in message
    assert state.load(lab.path) is None
    assert fake_clab.load_state() == {}
    return message


def test_no_containerlab_binary(fakes: Fakes, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    assert _refused(fakes.lab).startswith("containerlab is not installed")
    assert fakes.clab_calls() == [] and fakes.engine.requests == []


def test_no_docker_daemon(fakes: Fakes, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/none.sock")
    assert _refused(fakes.lab).startswith(f"no Docker daemon at unix://{tmp_path}/none.sock")
    assert fakes.clab_calls() == []


def test_image_missing(fakes: Fakes) -> None:
    fakes.engine.images.discard("docker-sonic-vs:latest")
    assert _refused(fakes.lab).startswith("image docker-sonic-vs:latest is not loaded in Docker")
    assert fakes.clab_calls() == []


def test_no_routes_after_the_sessions_is_judged_not_refused(fakes: Fakes) -> None:
    """A fabric that does not converge (sessions up, no routes installed) is left running and
    says what it lacked, as on netns: the run judges it."""
    fakes.routing.stop()  # sessions come up, but nothing installs their routes
    backend = registry.get("clab")
    up = backend.deploy(fakes.lab, lambda _: None, timeout=2)
    assert "spine1: no route to 10.2.0.3" in up.unconverged
    assert up.lacking().startswith(f"lab {fakes.lab.name} did not converge in 2 s: ")
    assert backend.running(fakes.lab) and state.load(fakes.lab.path) is not None
    assert backend.destroy(fakes.lab)["containers"] == 10
    assert fake_clab.load_state() == {}


def test_a_switch_that_never_starts_is_refused(
    fakes: Fakes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A switch whose SONiC never comes up is a twin that cannot be used: one line naming it,
    and what was deployed is removed."""
    monkeypatch.setattr(clab_backend, "BOOT_ALLOWANCE", 0.0)
    fakes.engine.stopped[f"clab-{fakes.lab.name}-leaf1"] = {"orchagent"}
    with pytest.raises(LabError) as info:
        registry.get("clab").deploy(fakes.lab, lambda _: None, timeout=1)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"lab {fakes.lab.name} did not come up")
    assert "leaf1: orchagent not running" in message
    assert state.load(fakes.lab.path) is None and fake_clab.load_state() == {}


def test_a_config_lock_never_released(fakes: Fakes) -> None:
    """FRR >= 10's vtysh waits for a held configuration lock for ever: the push is bounded and
    says why it failed; what was deployed is removed."""
    fakes.engine.stuck.add(f"clab-{fakes.lab.name}-leaf1")
    with pytest.raises(LabError) as info:
        registry.get("clab").deploy(fakes.lab, lambda _: None, timeout=2)
    message = str(info.value)
    assert "\n" not in message
    assert message.endswith(
        "leaf1: /etc/twin/frr.conf not pushed: FRR's configuration lock was still held by"
        " another session after 60 s"
    ), message
    assert state.load(fakes.lab.path) is None and fake_clab.load_state() == {}


def test_fabric_too_large(fakes: Fakes, tmp_path: Path) -> None:
    fabric = yaml.safe_load((fakes.lab.path / "fabric.yaml").read_text())
    fabric["leaves"].update(ports=128, uplinks_per_spine=36)
    fabric["spines"]["ports"] = 256
    source = tmp_path / "wide.yaml"
    source.write_text(yaml.safe_dump(fabric))
    from twin.intent import fabric as intent
    from twin.lab import directory as labdir

    labdir.generate(intent.load(source), tmp_path / "wide", str(source))
    lab = Lab.open(tmp_path / "wide")
    message = _refused(lab)
    assert message.startswith(f"{lab.path}: cannot run on containerlab: spine1: 144 ports ")
    assert "beyond the port tables of the image's SKUs" in message
    assert fakes.clab_calls() == [] and fakes.engine.requests == []
