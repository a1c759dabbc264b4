"""The backend interface: what every way of running a lab offers (netns, sim, clab, fake).

A backend is one folder `labs/<name>/` (Clabernetes, the clab backend's cluster target, shares
`labs/clab/`) and one line in `BACKENDS` below. Everything outside its folder (the CLI verbs,
the scenario player, the pytest plugin, the validators) uses only what this module defines,
through `labs.lifecycle.Managed` (the checks and records around every backend's verbs), and
every observation a backend returns is in the project's own neutral form: nodes by their
design names, ports by their SONiC names (`Ethernet8`, `PortChannel101`), FIBs as
`twin.model.fib.Fib`, never a tool's raw output.

A backend runs its traffic either against the wall clock (netns, clab: `traffic` starts and
stops a phase's flows while `fault` fires on the same clock; `labs.timeline` plays a scenario
from these verbs) or in simulated time (sim: `play` takes the whole timeline at once). Either
way `play` returns one `Played` record, which the scenario player saves as observations.
"""

from __future__ import annotations

import importlib
import subprocess
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from labs.ready import unready
from twin.errors import LabError
from twin.lab.directory import Lab
from twin.model.fib import Fib
from twin.scenario.records import Counters, Event, FaultRecord, FlowRecord, PhaseRecord

if TYPE_CHECKING:
    from labs.state import Record

Progress = Callable[[str], None]


def quiet(_: str) -> None:
    """Progress sink that says nothing."""


Capability = Literal[
    "fib",  # forwarding tables (Fib) at any time
    "bgp",  # BGP sessions and their state
    "counters",  # per port packet and byte counters
    "flows",  # per flow sent, received, lost, latency, DSCP/ECN received
    "pcap",  # packet captures of a link
    "probes",  # reachability and MTU probes between servers
    "failover-probes",  # paced probe flows pinned through each faulted element (FailoverProbes)
    "queues",  # per port and queue occupancy over time
    "pfc",  # pause frames sent/received, paused time per port and priority
    "ecn",  # ECN marks per port and queue
    "deadlock",  # deadlock and PFC watchdog events
    "iterations",  # collective iteration times
    "daemons",  # a switch's routing daemons that died, and when
]

FaultKind = Literal[
    "link-down",
    "link-up",
    "link-flap",
    "node-down",
    "node-up",
    "daemon-kill",
    "daemon-restart",
    "loss",
    "rate",
    "clear",
    "pfc-storm",
]


RESTORES = {"link-up": "link-down", "node-up": "node-down"}
"""A fault that gives back what one of the other kind took (the same link or node)."""


@dataclass(frozen=True)
class Fault:
    """One fault: `link` is `node:node` or `node:port` (SONiC or NIC name), `node` a device."""

    kind: FaultKind
    link: str | None = None
    node: str | None = None
    daemon: str | None = None
    percent: float | None = None
    mbit: float | None = None
    period: float = 1.0
    count: int = 1
    priority: int = 3  # pfc-storm: the priority paused
    duration: float | None = None  # pfc-storm: seconds it lasts (None: to the end)
    delay_ms: float = 0.0  # link-down: loss-of-signal detection plus FIB programming


@dataclass(frozen=True)
class Deployed:
    """A twin that came up: how big, how long it took to converge, and what it had not
    reached when its deploy stopped waiting (`unconverged`, empty once converged)."""

    lab: str
    backend: str
    nodes: int
    sessions: int
    seconds: float
    details: dict[str, Any] = field(default_factory=dict)
    unconverged: list[str] = field(default_factory=list)

    def lacking(self) -> str:
        """`lab LAB did not converge in T s: ...` (`labs.ready`), empty once converged."""
        if not self.unconverged:
            return ""
        timeout = float(self.details.get("timeout_s", self.seconds))
        return unready(self.lab, "converge", timeout, self.unconverged)


@dataclass(frozen=True)
class Session:
    """One BGP session as a switch sees it."""

    node: str
    peer: str  # the peer's address
    name: str  # the peer's node name
    state: str  # "Established", or why not
    prefixes: int
    uptime_ms: int


@dataclass(frozen=True)
class LinkState:
    """One physical link and whether both ends are up."""

    a: str
    a_port: str
    b: str
    b_port: str
    up: bool


@dataclass(frozen=True)
class Status:
    """What `twin inspect` shows: nodes, links, BGP sessions."""

    lab: str
    backend: str
    running: bool
    nodes: dict[str, str]  # node -> "up" or why not
    links: list[LinkState]
    sessions: list[Session]


@dataclass(frozen=True)
class FlowSpec:
    """One flow of a phase: a queue pair from one server to another."""

    flow_id: int
    src: str
    dst: str
    qp: int


@dataclass(frozen=True)
class ProbePair:
    """ecmp_probe: `flows` UDP flows from `src` to `dst` (destination port 4791, source ports
    `sport`, `sport` + 1, ...), sent out of `src`'s NIC `nic` into leaf `leaf`; their packets
    are counted under `flow_id`."""

    flow_id: int
    leaf: str
    src: str
    nic: str
    dst: str
    sport: int
    flows: int


@dataclass(frozen=True)
class Phase:
    """A traffic phase as a backend plays it: flows, class, pacing, time on the timeline.

    Rates: `pps` per flow for wall-clock backends, `gbps` per flow for simulated ones
    (a collective with a `message` and no rate runs as fast as the network lets it).
    """

    index: int
    label: str
    kind: str  # all_reduce, all_gather, reduce_scatter, all_to_all, backup, micro_bursts, incast,
    # ecmp_probe
    traffic_class: str
    dscp: dict[str, int]  # per source server
    flows: list[FlowSpec]
    at: float
    duration: float
    payload: int
    pps: float | None = None
    gbps: float | None = None
    message: int | None = None
    algorithm: str = "ring"
    burst: float | None = None  # micro_bursts: seconds each burst lasts
    period: float | None = None  # micro_bursts: seconds between bursts
    ranks: list[str] = field(default_factory=list)
    rails: list[int] = field(default_factory=list)  # each rank's rail: one schedule per rail
    groups: list[int] = field(default_factory=list)  # each rank's leaf group: hierarchical_ring
    iterations: int = 1  # a collective's iterations in a row (simulated time)
    probe: list[ProbePair] = field(default_factory=list)  # ecmp_probe: its pairs (no `flows`)


@dataclass(frozen=True)
class FailoverProbes:
    """Probe flows around each fault that takes something away, where the backend has
    "failover-probes": `flows` flows each way at `pps`, chosen (just before the fault, on the
    twin as it is then) among those that cross the faulted element, sending from shortly
    before the fault until the next one (or the end of the run)."""

    pps: float = 1000.0
    flows: int = 4


@dataclass(frozen=True)
class Timeline:
    """Everything a scenario asks a backend to do, in scenario time (seconds from start)."""

    scenario: str
    duration: float
    sample_interval: float
    phases: list[Phase]
    faults: list[tuple[float, Fault]]
    captures: list[str]  # links to capture (`node:node`), where the backend has "pcap"
    probes: bool  # probe every server pair at the end, where the backend has "probes"
    failover_probes: FailoverProbes | None = None  # where the backend has "failover-probes"
    files: Path | None = None  # where a backend writes files of the run (capture/*.pcap)
    sim: dict[str, Any] = field(default_factory=dict)  # the scenario's `sim:` settings
    fibs: list[tuple[float, str, Fib]] | None = None
    """FIBs a live twin recorded, (time from the start, label, FIB), for a backend with no
    control plane of its own (sim) to apply at their times; None: it computes its own."""


@dataclass
class Played:
    """What one run recorded, backend-neutral; `twin.scenario.player` saves it.

    `counters` is {"interval", "fields", "samples": [{"t", "c": {"node:port": [values]}}]};
    `fibs` maps a snapshot label to (time, Fib); `flows` are per-flow records (see
    docs/observations.md); `extra` holds what only some backends observe (pfc, queues, ecn,
    iterations), each saved as `<key>.json` by `twin.jsonio.dumps`: JSON values, or numpy
    arrays written as their lists (the simulator's queue series, `labs.sim.result.Occupancy`).
    """

    started: float
    ended: float
    phases: list[PhaseRecord]
    faults: list[FaultRecord]
    flows: list[FlowRecord]
    counters: Counters
    fibs: dict[str, tuple[float, Fib]]
    bgp: dict[str, list[Session]]
    events: list[Event]
    probes: list[dict[str, Any]] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    fault_margin: float = 0.5
    """Seconds by which a loss may begin before its fault fired (or before the next fault)
    and still be that fault's: a live twin's fault times and loss times are that coarse."""


class Observer(Protocol):
    """Reads a running twin's state, in neutral form."""

    def fib(self) -> Fib:
        """Every node's forwarding table now."""
        ...

    def counters(self) -> dict[str, list[int]]:
        """Per `node:port` (SONiC names), the values of `COUNTER_FIELDS` now."""
        ...

    def bgp(self) -> list[Session]:
        """Every switch's BGP sessions now."""
        ...

    def watch(self) -> AbstractContextManager[list[dict[str, Any]]]:
        """While inside, log state changes (BGP sessions, routes) to the lab's event log
        (`labs.events`) and collect them in the list it gives."""
        ...


class Traffic(Protocol):
    """The flows of one phase on a wall-clock backend."""

    def start(self) -> None:
        """Start sending."""
        ...

    def stop(self) -> dict[int, int]:
        """Stop sending; packets sent per flow id."""
        ...


COUNTER_FIELDS = ["rx_packets", "tx_packets", "rx_bytes", "tx_bytes", "rx_dropped", "tx_dropped"]


class Backend(Protocol):
    """One way of running a lab: what `labs/<name>/` implements. Every verb takes the lab
    directory it acts on. Nothing calls these verbs but `labs.lifecycle.Managed`, which wraps
    them (the checks before a deploy, the lab's owner, its state file and event log) and is
    what `labs.registry.get` gives everyone else."""

    name: ClassVar[str]
    capabilities: ClassVar[frozenset[str]]
    claims_name: ClassVar[bool]
    """Whether a twin holds what is named after its lab on this machine or cluster
    (namespaces, containers): then one twin of a name runs at a time, and the lifecycle
    records which lab directory deployed it."""
    computed: ClassVar[bool]
    """Whether the twin's play is a computation (sim, fake), not processes on the wall clock
    whose timing load disturbs (routing daemons, traffic): only beside a computed play does
    `twin run` judge the static validators at the same time."""

    def check(self, lab: Lab) -> None:
        """Refuse, before anything is created, a lab this backend cannot run here (a tool or
        image missing, leftovers of another run in the way)."""
        ...

    def create(
        self, lab: Lab, record: Record, progress: Progress, timeout: float | None = None
    ) -> Deployed:
        """Bring the lab up and wait (at most `timeout` s, else the backend's default for the
        lab's size) until it has converged, adding what it creates (namespaces, daemons) to
        `record` as it goes; whatever it raises, the lifecycle then calls `remove`. A twin
        still short of convergence at `timeout` may be returned up, with what it lacks in
        `Deployed.unconverged` (a lab whose configs keep it from converging is judged)."""
        ...

    def remove(self, lab: Lab) -> dict[str, int]:
        """Remove everything the twin created (by the lab's tag); what was removed."""
        ...

    def cleanup(self, lab: str) -> dict[str, int]:
        """Remove what a crashed or killed run of lab `lab` left on this machine, found by its
        name alone (its lab directory may be gone); what was removed (empty: nothing left)."""
        ...

    def running(self, lab: Lab) -> bool:
        """Whether a twin of this lab is up on this backend."""
        ...

    def status(self, lab: Lab) -> Status:
        """Nodes, links and BGP sessions."""
        ...

    def exec(self, lab: Lab, node: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
        """Run a command in a node (never through a shell)."""
        ...

    def fault(self, lab: Lab, fault: Fault) -> dict[str, Any]:
        """Inject a fault now; the event it logged."""
        ...

    def observer(self, lab: Lab) -> Observer:
        """A reader of the running twin's state."""
        ...

    def traffic(self, lab: Lab, phase: Phase) -> Traffic:
        """The prepared flows of one phase (started by the caller)."""
        ...

    def play(self, lab: Lab, timeline: Timeline, progress: Progress) -> Played:
        """Play a whole timeline: wall-clock backends through `labs.timeline`."""
        ...


BACKENDS = {
    "netns": "labs.netns.backend:NetnsBackend",
    "clab": "labs.clab.backend:ClabBackend",
    "clabernetes": "labs.clab.kube:ClabernetesBackend",
    "fake": "labs.fake.backend:FakeBackend",
    "sim": "labs.sim.backend:SimBackend",
}
"""Each backend's class by name, imported only when used."""
DEFAULT = "netns"


def load(name: str) -> Backend:
    """The backend called `name`, bare (`labs.registry.get` gives it in its lifecycle); one
    line naming the known ones otherwise."""
    if name not in BACKENDS:
        raise LabError(f"unknown backend {name!r} (known: {', '.join(sorted(BACKENDS))})")
    module, cls = BACKENDS[name].split(":")
    backend: Backend = getattr(importlib.import_module(module), cls)()
    return backend
