"""The clab backend behind `labs.backend.Backend`: the lab as SONiC-VS and Linux containers.

Deploy: refuse, before anything is created, a lab that cannot run (no containerlab, no Docker
daemon, an image not loaded, a fabric beyond the image's port tables or management network);
derive the container flavour from the lab's configs as they are now (`clab/`), its management
subnet overlapping no network Docker has (labs side by side); `containerlab
deploy`; hash ECMP on the 5-tuple in each switch's kernel (`labs.kernel.ECMP_HASH`) and turn
ARP replies off on the switches' `ethN` (the image's TAP answers for the port,
containerlab pull request 3390); wait until each switch is ready, push its frr.conf; set up the
servers through their namespaces; wait until every BGP session is Established, then until
every switch has a route to every server. A switch that never comes up is a failure, and
destroys what was deployed; sessions or routes still missing at the timeout (configs that keep
the fabric from converging) leave the twin running, to be judged (`Deployed.unconverged`).
Destroy ends the lab's traffic processes (by its tag), then runs `containerlab destroy
--cleanup`. Traffic phases are sent and received by the wall-clock traffic workers
(`labs.flows`, as on netns) entered into the server containers' namespaces (`traffic.py`).
"""

from __future__ import annotations

import importlib
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, ClassVar

import yaml

from labs import processes, state
from labs.backend import (
    Deployed,
    Fault,
    LinkState,
    Phase,
    Played,
    Progress,
    Status,
    Timeline,
    quiet,
)
from labs.clab import faults, namespace, switches, tools
from labs.clab.containers import Containers
from labs.clab.observer import ClabObserver
from twin.errors import LabError
from twin.lab.directory import Lab, clab_refusal
from twin.render import clab

if TYPE_CHECKING:
    from labs.flows import PhaseTraffic
    from labs.state import Record
    from traffic.receiver import Receiver

BOOT_ALLOWANCE = 240.0
"""Seconds SONiC-VS may take to start (redis, syncd, orchagent) on top of the convergence
timeout: docker-sonic-vs starts in tens of seconds to minutes, by machine."""


def _images(lab: Lab) -> list[str]:
    topo = yaml.safe_load(tools.topology(lab).read_text())
    kinds = topo["topology"].get("kinds", {})
    images = {k["image"] for k in kinds.values() if "image" in k}
    images |= {n["image"] for n in topo["topology"]["nodes"].values() if "image" in n}
    return sorted(images)


class ClabBackend:
    """A lab as containerlab containers: docker-sonic-vs switches, Linux servers."""

    name: ClassVar[str] = "clab"
    claims_name: ClassVar[bool] = True
    computed: ClassVar[bool] = False
    capabilities: ClassVar[frozenset[str]] = frozenset({"fib", "bgp", "counters", "flows"})

    def check(self, lab: Lab) -> None:
        """Every check that can refuse the lab, in the order a user would fix them (writing
        its containerlab files, with a management subnet no Docker network has)."""
        tools.binary()
        refusal = clab_refusal(lab)
        if refusal:
            raise LabError(f"{lab.path}: cannot run on containerlab: {refusal}")
        engine = tools.client()
        clab.write(lab, tools.subnets(engine, clab.network(lab.name)))
        for image in _images(lab):
            tools.check_image(engine, image)
        if tools.inspect(lab):
            raise LabError(f"lab {lab.name} has containers already; containerlab destroy first")

    def create(
        self, lab: Lab, record: Record, progress: Progress = quiet, timeout: float | None = None
    ) -> Deployed:
        """Deploy, configure, and wait until every BGP session is Established and every switch
        routes to every server (`timeout`: 60 s by default for each, beyond the boot
        allowance)."""
        timeout = 60.0 if timeout is None else timeout
        boxes = Containers(lab, tools.client())
        start = time.monotonic()
        progress(f"containerlab deploy ({lab.graph.number_of_nodes()} containers)")
        tools.run(["deploy", "-t", str(tools.topology(lab))], timeout=timeout + 3600)
        progress("switches: ECMP hash on the 5-tuple, ARP replies off on the wires")
        for node in lab.switches():
            boxes.set_kernel(node)
        progress("servers: addresses, routes, DSCP marking")
        with ThreadPoolExecutor(8) as pool:
            rdma = set(pool.map(lambda s: faults.set_up_server(boxes, s), lab.nodes("server")))
        progress("waiting for SONiC, then pushing frr.conf, then BGP")
        sessions, lacking = switches.wait(
            boxes.run,
            lab,
            timeout,
            BOOT_ALLOWANCE,
            lambda node: switches.configure_frr(boxes.run, boxes.start, lab, node),
        )
        progress("waiting for every switch's routes to every server")
        servers = {faults.host(lab, s)["address"].split("/")[0] for s in lab.nodes("server")}
        lacking += switches.wait_routes(boxes.run, lab, servers, 0.0 if lacking else timeout)
        seconds = round(time.monotonic() - start, 2)
        details: dict[str, Any] = {
            "rdma": "; ".join(sorted(rdma)),
            "links": lab.graph.number_of_edges(),
            "timeout_s": timeout,
        }
        nodes = lab.graph.number_of_nodes()
        return Deployed(lab.name, self.name, nodes, len(sessions), seconds, details, lacking)

    def remove(self, lab: Lab) -> dict[str, int]:
        """End the lab's traffic processes (by its tag), then `containerlab destroy
        --cleanup`; the processes and containers removed."""
        workers = processes.tagged(lab.name)
        processes.end(workers, lab.name)
        before = tools.inspect(lab)
        tools.run(["destroy", "-t", str(tools.topology(lab)), "--cleanup"])
        return {"containers": len(before), "processes": len(workers)}

    def cleanup(self, lab: str) -> dict[str, int]:
        """End the lab's traffic processes, by its tag (its containers are containerlab's:
        `twin destroy DIR` removes them through the lab's topology file)."""
        workers = processes.tagged(lab)
        processes.end(workers, lab)
        return {"processes": len(workers)}

    def running(self, lab: Lab) -> bool:
        """Whether the lab's state says clab and containerlab lists its containers."""
        recorded = state.load(lab.path)
        return recorded is not None and recorded.backend == self.name and bool(tools.inspect(lab))

    def status(self, lab: Lab) -> Status:
        """Containers, links (both container interfaces up) and BGP sessions."""
        records = {r.node: r.state for r in tools.inspect(lab)}
        nodes = {n: records.get(n, "missing") for n in lab.graph.nodes}
        boxes = Containers(lab)
        up = {
            n: {eth: s["operstate"] == "UP" for eth, s in namespace.links(boxes.pid(n)).items()}
            for n, st in nodes.items()
            if st == "running"
        }
        links = []
        for _, _, e in lab.graph.edges(data=True):
            ends = [(e[x], boxes.eth[e[x]][e[f"{x}_port"]]) for x in ("a", "b")]
            ok = all(up.get(node, {}).get(eth, False) for node, eth in ends)
            links.append(LinkState(e["a"], e["a_port"], e["b"], e["b_port"], ok))
        sessions = ClabObserver(boxes).bgp()
        return Status(lab.name, self.name, self.running(lab), nodes, links, sessions)

    def exec(self, lab: Lab, node: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
        """Run a command in a node's container (`vtysh` in a switch reaches its FRR)."""
        if node not in lab.graph.nodes:
            raise LabError(f"lab {lab.name} has no node {node}")
        return Containers(lab).run(node, argv)

    def fault(self, lab: Lab, fault: Fault) -> dict[str, Any]:
        """Inject a fault now; the event it logged."""
        return faults.fire(Containers(lab), fault)

    def observer(self, lab: Lab) -> ClabObserver:
        """FIBs, counters and BGP sessions of the running twin."""
        return ClabObserver(Containers(lab))

    def traffic(self, lab: Lab, phase: Phase) -> PhaseTraffic:
        """A phase's sender jobs, prepared in the server containers' namespaces (the traffic
        modules are imported for traffic only: scapy is slow to import)."""
        from labs import ecmpprobe
        from labs.clab.traffic import servers
        from labs.flows import PhaseTraffic, jobs

        where = servers(Containers(lab))
        made = ecmpprobe.jobs(where, phase) if phase.probe else jobs(where, phase)
        return PhaseTraffic(made, phase.index)

    def play(self, lab: Lab, timeline: Timeline, progress: Progress = quiet) -> Played:
        """Play on the wall clock through `labs.timeline`, with a receiver in every server
        container when the timeline has traffic; its tallies become the flow records."""
        wallclock = importlib.import_module("labs.timeline")
        if not timeline.phases:
            played: Played = wallclock.play(self, lab, timeline, progress)
            return played
        from labs import flows
        from labs.clab.traffic import servers

        receivers: dict[str, Receiver] = {}
        try:
            receivers = flows.start_receivers(servers(Containers(lab)))
            played = wallclock.play(self, lab, timeline, progress)
            received = flows.stop_receivers(receivers)
            played.flows = flows.flow_records(played.phases, received)
        finally:
            for r in receivers.values():
                r.close()
        return played
