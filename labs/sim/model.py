"""The experiment description: nodes, links, QoS, routes, flows and faults as typed dataclasses.

Units are SI throughout: seconds, bits per second, bytes. Ports are named ``node:port``
(``leaf0:Ethernet0``). Defaults and their sources are listed in docs/simulator.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from labs.sim.flows import FlowTable, Replay, Ring

NPRIO = 8
"""Priorities (traffic classes), queues and priority groups per port."""

DEFAULT_DSCP_TO_TC: Mapping[int, int] = {3: 3, 4: 4, 26: 3, 46: 5, 48: 6}
"""DSCP to traffic class; unlisted DSCPs map to 0. RoCE (26) and SONiC's 3 and 4 are lossless,
48 is the CNP (NVIDIA default)."""


def alpha_from_dynamic_th(n: int) -> float:
    """The dynamic-threshold factor of SAI/SONiC ``dynamic_th`` n: 2**n, unlimited from 7.

    >>> alpha_from_dynamic_th(-3), alpha_from_dynamic_th(7)
    (0.125, inf)
    """
    return math.inf if n >= 7 else 2.0**n


@dataclass(frozen=True)
class PgParams:
    """Ingress accounting of one priority group against the switch's shared pool."""

    reserved: int = 0
    """Bytes guaranteed to the PG before it draws on the shared pool."""
    headroom: int | None = None
    """Bytes absorbed after XOFF (lossless PGs); None sizes it by the headroom formula
    (docs/physics.md 1.3)."""
    xon: int = 0
    """XON floor (SAI XON_TH): XON is sent once shared use is at most max(xon, threshold -
    xon_offset) and the headroom is empty."""
    xon_offset: int = 18432
    """XON hysteresis (SAI XON_OFFSET_TH): how far below the threshold shared use must fall."""
    alpha: float = 1.0
    """Dynamic threshold: the PG may use alpha x (free shared pool); SONiC dynamic_th n = log2."""
    static_threshold: int | None = None
    """A fixed shared-pool limit in bytes instead of the dynamic threshold."""


@dataclass(frozen=True)
class QueueParams:
    """One egress queue: its scheduler and WRED/ECN (marked where QosProfile.ecn_at says)."""

    strict: bool = False
    weight: int = 1
    """DWRR weight; the quantum is weight x QosProfile.dwrr_quantum bytes."""
    ecn: bool = False
    wred_drop: bool = False
    """Drop (instead of mark) packets that are not ECN-capable, lossy classes only."""
    kmin: int = 0
    kmax: int = 0
    pmax: float = 0.0
    max_bytes: int = 0
    """Tail-drop limit of a lossy queue in bytes; 0 for none (the ingress pool still limits)."""


@dataclass(frozen=True)
class Watchdog:
    """PFC watchdog (SONiC pfcwd): storm detection, action and restoration."""

    detection: float = 0.2
    restoration: float = 0.2
    action: Literal["drop", "forward"] = "drop"


def _default_pgs() -> Mapping[int, PgParams]:
    return {0: PgParams(alpha=8.0), 3: PgParams(alpha=0.125), 4: PgParams(alpha=0.125)}


def _default_queues() -> Mapping[int, QueueParams]:
    ecn = QueueParams(ecn=True, kmin=150_000, kmax=1_500_000, pmax=0.05)
    return {3: ecn, 4: ecn, 6: QueueParams(strict=True)}


@dataclass(frozen=True)
class QosProfile:
    """Classification, buffer and scheduling parameters of a port (the same on every port
    of a switch unless overridden)."""

    dscp_to_tc: Mapping[int, int] = field(default_factory=lambda: dict(DEFAULT_DSCP_TO_TC))
    tc_to_queue: tuple[int, ...] = (0, 1, 2, 3, 4, 5, 6, 7)
    tc_to_pg: tuple[int, ...] = (0, 0, 0, 3, 4, 0, 0, 0)
    lossless: frozenset[int] = frozenset({3, 4})
    pgs: Mapping[int, PgParams] = field(default_factory=_default_pgs)
    """Per PG; a PG not listed gets PgParams()."""
    queues: Mapping[int, QueueParams] = field(default_factory=_default_queues)
    """Per queue; a queue not listed gets QueueParams() (DWRR weight 1, no ECN)."""
    pause_quanta: int = 0xFFFF
    refresh_fraction: float = 0.5
    """XOFF is re-sent after this fraction of the pause time while the PG stays congested."""
    dwrr_quantum: int = 9216
    watchdog: Watchdog | None = None
    pfc_response_quanta: int | None = None
    """How long this port's MAC takes to act on a pause frame it receives, in quanta (512 bit
    times) of its speed: it starts no new frame of a paused priority from then on (a frame
    already started finishes). None: the most IEEE 802.3 Annex 31B.3.7 allows, which
    802.1Qbb's PFC refers to and the headroom formula budgets for; 0: at once."""
    ecn_at: Literal["dequeue", "enqueue"] = "dequeue"
    """Where the egress queues decide ECN marks: dequeue (from the queue the packet leaves
    behind, as HPCC's ns-3 switch and the CoNEXT'16 model) or enqueue (from the queue it joins)."""

    def pg(self, index: int) -> PgParams:
        return self.pgs.get(index, PgParams())

    def queue(self, index: int) -> QueueParams:
        return self.queues.get(index, QueueParams())


@dataclass(frozen=True)
class Switch:
    """A switch with one shared buffer pool; routes map a destination host name or IPv4 prefix
    to egress port names (ECMP over several). Destinations without a route take every
    shortest path."""

    name: str
    buffer_bytes: int = 32_000_000
    qos: QosProfile = field(default_factory=QosProfile)
    port_qos: Mapping[str, QosProfile] = field(default_factory=dict)
    routes: Mapping[str, Sequence[str]] = field(default_factory=dict)
    cell_bytes: int = 1
    """The ASIC's buffer cell: a frame holds ceil((frame + cell_descriptor) / cell_bytes)
    cells of its PG, the shared pool and its egress queue (1: bytes). Labs take it from their
    SKU's ASIC (twin/platforms/asics.yml)."""
    cell_descriptor: int = 0
    """Bytes of packet metadata the first cell also holds."""


@dataclass(frozen=True)
class Host:
    """A server NIC (or several ports of one); its profile maps a flow's DSCP to its priority
    and says which priorities it honours pauses on (all of them); its DCQCN parameters and
    ECN settings are its own when given (else the experiment's)."""

    name: str
    address: str | None = None
    qos: QosProfile = field(default_factory=QosProfile)
    dcqcn: Dcqcn | None = None


@dataclass(frozen=True)
class Link:
    """A full-duplex cable between two ports ``node:port``."""

    a: str
    b: str
    speed: float
    length_m: float = 2.0
    delay: float | None = None
    """One-way propagation delay in seconds; None derives it from length_m at 5 ns/m."""

    @property
    def propagation(self) -> float:
        return self.delay if self.delay is not None else self.length_m * 5e-9


@dataclass(frozen=True)
class Flow:
    """A RoCEv2 queue pair (cc dcqcn) or an open-loop source (cc none), over a transport:
    open (nothing acknowledged or resent: what is lost is lost), rc (RoCEv2's reliable
    connection: ACK, NAK, go-back-N, timeout) or tcp (DCTCP on ECN marks, halving on loss).

    size None is open-ended (until stop or the end of the run); rate paces an open-loop flow
    (None: line rate, i.e. a burst) or caps a DCQCN flow. A flow listing `after` starts
    `after_delay` seconds after the last of those flows completes (but not before `start`).
    """

    name: str
    src: str
    dst: str
    size: int | None = None
    rate: float | None = None
    start: float = 0.0
    stop: float | None = None
    dscp: int = 26
    priority: int | None = None
    """The NIC's priority; None takes the source host's dscp_to_tc."""
    cc: Literal["dcqcn", "none"] = "dcqcn"
    ecn_capable: bool | None = None
    """ECT on the packets; None means cc == "dcqcn"."""
    packet_bytes: int | None = None
    ttl: int = 64
    after: Sequence[str] = ()
    after_delay: float = 0.0
    src_port: str | None = None
    """``host:port`` to send from; None picks one of the host's ports by hash."""
    transport: Literal["open", "rc", "tcp"] = "open"


@dataclass(frozen=True)
class Dcqcn:
    """DCQCN reaction and notification point parameters (docs/physics.md 3.2)."""

    g: float = 1 / 256
    alpha_period: float = 55e-6
    timer: float = 55e-6
    byte_counter: int = 10_000_000
    f: int = 5
    r_ai: float = 40e6
    r_hai: float = 400e6
    min_rate: float = 100e6
    cnp_interval: float = 50e-6
    cnp_mode: Literal["window", "holdoff"] = "window"
    """window: at most one CNP per cnp_interval window (each flow's windows at a random
    phase), sent at the window's first marked packet, which is the fluid model's NP;
    holdoff: at a marked packet unless one was sent less than cnp_interval ago."""
    initial_alpha: float = 1.0
    clamp_after_increase: bool = False
    """True: on a CNP the target rate takes the current rate only if the rate was increased
    since the last CNP (NVIDIA clamp_tgt_rate_after_time_inc = 1); False: on every CNP (the
    DCQCN paper and its fluid model)."""
    cnp_dscp: int = 48
    cnp_priority: int = 6
    reaction: bool = True
    """The NIC's ECN as a sender (reaction point): False, it counts CNPs and ignores them."""
    notification: bool = True
    """The NIC's ECN as a receiver (notification point): False, it sends no CNPs."""
    ect: bool = True
    """The NIC marks its DCQCN flows' packets ECN-capable (its traffic class's ECN bits);
    False, switches cannot mark them."""


@dataclass(frozen=True)
class Transports:
    """Parameters of the reliable transports (docs/simulator.md, Transports)."""

    rc_ack_every: int = 16
    """An RC responder's ACK covers this many packets (and a message's last packet is always
    acknowledged); the IB spec lets a responder coalesce ACKs; Linux's hfi1 driver acks
    every 16 (HFI1_PSN_CREDIT); htsim's RoCE acks every packet (1)."""
    rc_timeout_exponent: int = 14
    """The local ACK timeout is 4.096 us x 2**exponent (IB spec 9.7.6.1.3): 14 (67 ms) is
    perftest's default; NCCL's NCCL_IB_TIMEOUT defaults higher (18-20)."""
    tcp_ack_every: int = 2
    """Delayed ACKs: at least every second segment (RFC 5681 4.2)."""
    dupack_threshold: int = 3
    tcp_rto_min: float = 200e-6
    """Minimum retransmission timeout (the RTO is RFC 6298's SRTT + 4 RTTVAR, doubled per
    timeout in a row); 200 us as the fine-grained datacenter RTO of Vasudevan et al.
    (SIGCOMM'09); Linux's default is 200 ms."""
    tcp_rto_max: float = 0.2
    tcp_rto_initial: float = 1e-3
    """The RTO before a flow's first RTT sample (RFC 6298's 1 s scaled to a datacenter)."""
    tcp_initial_window: int = 10
    """Packets (RFC 6928)."""
    dctcp_g: float = 1 / 16
    """DCTCP's EWMA gain for alpha (Alizadeh et al., SIGCOMM'10)."""
    trace: bool = False
    """Log every NAK, timeout and window cut as events (transport_nak, transport_timeout,
    fast_retransmit, ecn_cut)."""

    @property
    def rc_timeout(self) -> float:
        return 4.096e-6 * 2.0**self.rc_timeout_exponent


@dataclass(frozen=True)
class LinkFault:
    """The link with endpoint `port` (``node:port``) goes down at `down` and, if set, up again
    at `up`."""

    port: str
    down: float
    up: float | None = None


@dataclass(frozen=True)
class PfcStorm:
    """A port (a hung NIC, a broken switch port) that keeps sending pause frames."""

    port: str
    start: float
    end: float
    priorities: tuple[int, ...] = (3,)
    quanta: int = 0xFFFF
    interval: float | None = None
    """Seconds between frames; None re-sends at half the pause time."""


@dataclass(frozen=True)
class TxOff:
    """A port whose transmitter is disabled from `start` to `end` (SAI's port TX disable,
    how sonic-mgmt's buffer tests hold an egress port): it starts no frame meanwhile, what it
    holds stays queued, and no pause frame is sent or counted."""

    port: str
    start: float
    end: float


@dataclass(frozen=True)
class Monitor:
    """What is sampled every `interval` seconds (0: nothing): queue and PG bytes of the listed
    ports (empty: every switch port) and each flow's delivered bytes. With `max_samples`, a run
    that reaches 2 x max_samples + 1 samples keeps every other one from then on at twice the
    interval (`Result.sample_interval` is the last), so a run of unknown length has between
    max_samples + 1 and 2 x max_samples + 1."""

    interval: float = 0.0
    ports: Sequence[str] = ()
    flows: bool = True
    max_samples: int = 0


@dataclass(frozen=True)
class Checks:
    """Periodic checks every `interval`: pause storms (a priority paused longer than
    `pause_storm`), the PFC watchdogs, and deadlock (a cycle of paused, non-empty queues with
    no departure for `stall`)."""

    interval: float = 100e-6
    deadlock: bool = True
    stall: float = 2e-3
    stop_on_deadlock: bool = False
    pause_storm: float = 5e-3


@dataclass(frozen=True)
class PacketLoss:
    """Data frames arriving at `port` (``node:port``) from `start` until `end` are lost: each
    with probability `probability`, and the first `count` of them (a deliberate drop).
    Control frames (ACK, NAK, CNP) pass; counted as link drops."""

    port: str
    start: float = 0.0
    end: float | None = None
    probability: float = 0.0
    count: int = 0


Fault = LinkFault | PfcStorm | PacketLoss | TxOff


@dataclass(frozen=True)
class Experiment:
    """Everything one simulation run needs."""

    switches: Sequence[Switch]
    hosts: Sequence[Host]
    links: Sequence[Link]
    flows: Sequence[Flow] = ()
    faults: Sequence[Fault] = ()
    dcqcn: Dcqcn = field(default_factory=Dcqcn)
    transports: Transports = field(default_factory=Transports)
    duration: float = 1.0
    stop_when_done: bool = True
    """End as soon as every flow has completed (open-ended flows: stopped)."""
    packet_bytes: int = 4096
    """Payload bytes per packet of flows that do not set their own."""
    header_bytes: int = 62
    """Headers a data frame adds to its payload, held in buffers and sent: Ethernet 14 + FCS 4
    + IPv4 20 + UDP 8 + InfiniBand BTH 12 + ICRC 4 (RoCEv2)."""
    gap_bytes: int = 20
    """What every frame also takes on the wire, never in a buffer: preamble and SFD 8 +
    inter-frame gap 12."""
    monitor: Monitor = field(default_factory=Monitor)
    checks: Checks = field(default_factory=Checks)
    name: str = "experiment"
    table: FlowTable | None = None
    """More flows, as columns (`labs.sim.flows.FlowTable`), after `flows`: for the many
    flows of collectives, whose results come back as columns too (`Result.table`)."""
    collectives: Sequence[Ring | Replay] = ()
    """Collectives the core makes step by step (rings) or iteration by iteration (replays),
    their flows rows of `table`."""
