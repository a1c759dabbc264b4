"""The netns backend behind `labs.backend.Backend`: namespaces, veths and FRR on this machine.

Everything here wraps the modules of this folder (lifecycle, faults, observer, traffic,
probes); scenarios are played on the wall clock by `labs.timeline`, with receivers in every
server, tcpdump captures, failover probes pinned through each faulted element
(`labs.netns.failprobes`) and end-of-run probes around it.
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING, Any, ClassVar

from labs import timeline as wallclock
from labs.backend import (
    Deployed,
    Fault,
    LinkState,
    Phase,
    Played,
    Progress,
    Session,
    Status,
    Timeline,
    quiet,
)
from labs.netns import lifecycle
from labs.netns.cleanup import cleanup
from labs.netns.faults import Faults
from labs.netns.observer import NetnsObserver
from labs.netns.plan import port_names
from twin.lab.directory import Lab

if TYPE_CHECKING:
    from labs.flows import PhaseTraffic
    from labs.state import Record
    from traffic.receiver import Receiver


class NetnsBackend:
    """A lab as network namespaces, veth pairs and FRR daemons (root needed)."""

    name: ClassVar[str] = "netns"
    claims_name: ClassVar[bool] = True
    computed: ClassVar[bool] = False
    capabilities: ClassVar[frozenset[str]] = frozenset(
        {"fib", "bgp", "counters", "flows", "pcap", "probes", "failover-probes", "daemons"}
    )

    def __init__(self) -> None:
        self._playing: Faults | None = None  # the faults of the scenario being played

    def check(self, lab: Lab) -> None:
        """Refuse without root or FRR, or with leftovers of the lab's name in the way."""
        lifecycle.check(lab)

    def create(
        self, lab: Lab, record: Record, progress: Progress = quiet, timeout: float | None = None
    ) -> Deployed:
        """Build the twin and wait until BGP and ECMP have converged (or `timeout`: it is left
        up, with what it lacked)."""
        figures = lifecycle.deploy(lab, record, timeout=timeout, progress=progress)
        own = ("nodes", "bgp_sessions", "converged_s", "unconverged")
        return Deployed(
            lab.name,
            self.name,
            int(figures["nodes"]),
            int(figures["bgp_sessions"]),
            float(figures["converged_s"]),
            {k: v for k, v in figures.items() if k not in own},
            list(figures["unconverged"]),
        )

    def remove(self, lab: Lab) -> dict[str, int]:
        """Remove processes, namespaces and run directories of the lab's twin."""
        return dict(sorted(lifecycle.destroy(lab).items()))

    def cleanup(self, lab: str) -> dict[str, int]:
        """End the lab's processes and remove its namespaces and run directory, by its name."""
        lifecycle.check_root()
        return cleanup(lab)

    def running(self, lab: Lab) -> bool:
        """Whether the lab's twin is recorded and its namespaces exist."""
        return lifecycle.is_running(lab)

    def status(self, lab: Lab) -> Status:
        """Nodes, links (by SONiC port) and BGP sessions."""
        seen = lifecycle.inspect(lab)
        links = []
        for link in seen["links"]:
            (a, a_if), (b, b_if) = (end.split(":", 1) for end in (link["a"], link["b"]))
            a_port, b_port = port_names(lab, a).get(a_if, a_if), port_names(lab, b).get(b_if, b_if)
            links.append(LinkState(a, a_port, b, b_port, link["state"] == "up/up"))
        sessions = [Session(**s) for s in seen["bgp"]]
        nodes = {n["node"]: n["state"] for n in seen["nodes"]}
        return Status(lab.name, self.name, self.running(lab), nodes, links, sessions)

    def exec(self, lab: Lab, node: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
        """Run a command in a node's namespace (`vtysh` on a switch reaches its FRR)."""
        return lifecycle.exec_in(lab, node, argv)

    def fault(self, lab: Lab, fault: Fault) -> dict[str, Any]:
        """Inject a fault now; the event it logged (while a scenario plays, with the plan and
        sockets of its run: building them for every fault is slow on a loaded machine)."""
        if self._playing is not None and self._playing.lab.path == lab.path:
            return self._playing.fire(fault)
        faults = Faults(lab)
        try:
            return faults.fire(fault)
        finally:
            faults.close()

    def observer(self, lab: Lab) -> NetnsObserver:
        """FIBs, counters and BGP sessions of the running twin."""
        return NetnsObserver(lab)

    def traffic(self, lab: Lab, phase: Phase) -> PhaseTraffic:
        """A phase's sender jobs, prepared (the traffic modules are imported for traffic
        only: scapy is slow to import)."""
        from labs import ecmpprobe
        from labs.flows import PhaseTraffic, jobs
        from labs.netns.traffic import servers

        where = servers(lab)
        made = ecmpprobe.jobs(where, phase) if phase.probe else jobs(where, phase)
        return PhaseTraffic(made, phase.index)

    def play(self, lab: Lab, timeline: Timeline, progress: Progress = quiet) -> Played:
        """Play on the wall clock, with receivers in every server, captures, failover probes
        and end-of-run probes."""
        from labs import flows
        from labs.netns import probes
        from labs.netns import traffic as netns_traffic
        from labs.netns.failprobes import FailoverProber

        receivers: dict[str, Receiver] = {}
        captures: list[subprocess.Popen[bytes]] = []
        prober = None
        try:
            self._playing = Faults(lab)
            if timeline.failover_probes is not None and timeline.faults:
                prober = FailoverProber(
                    lab, timeline.failover_probes, timeline.faults, timeline.duration, progress
                )
                prober.spawn()
            receivers = flows.start_receivers(netns_traffic.servers(lab))
            if timeline.captures and timeline.files is not None:
                captures = netns_traffic.start_captures(lab, timeline.captures, timeline.files)
            played = wallclock.play(self, lab, timeline, progress, prober)
            if prober is not None:
                played.extra["failover_probes"] = prober.collect()
            received = flows.stop_receivers(receivers)
            netns_traffic.stop_captures(captures)
            played.flows = flows.flow_records(played.phases, received)
            if timeline.probes:
                progress("probing every server pair (reachability, jumbo frames with DF)")
                played.probes = probes.ping_all(lab)
        finally:
            for r in receivers.values():
                r.close()
            netns_traffic.stop_captures(captures)
            if prober is not None:
                prober.stop()
            if self._playing is not None:
                self._playing.close()
                self._playing = None
        return played
