"""Send frames from inside a network namespace on a raw AF_PACKET socket, paced.

Each flow's frames are stamped at send time (sequence number, PSN, send timestamp), so a
flow can run for any count or duration. A job may be spread over several processes:
process ``p`` of ``P`` sends flows ``p, p+P, ...`` at its share of the job's rate. All
processes of all jobs given to :func:`run_senders` start at the same instant.
"""

import errno
import json
import socket
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection

from traffic.endpoints import NextHop
from traffic.frames import FrameSource
from traffic.nsproc import NetnsChild, packet_socket
from traffic.pacing import Pacing, Unpaced

_START_DELAY_NS = 50_000_000
_ENOBUFS_BACKOFF_S = 0.0001


@dataclass(frozen=True)
class SendJob:
    """Send ``flows`` round-robin from ``iface`` in ``netns`` (a name or a path).

    ``count`` is frames per flow; ``duration_s`` caps the run time; give at least one.
    ``pacing`` is the whole job's rate. ``lab`` tags the processes (see
    :class:`~traffic.nsproc.NetnsChild`).
    """

    netns: str
    iface: str
    flows: tuple[FrameSource, ...]
    pacing: Pacing = field(default_factory=Unpaced)
    count: int | None = None
    duration_s: float | None = None
    processes: int = 1
    standby: tuple[NextHop, ...] = ()
    lab: str | None = None

    def __post_init__(self) -> None:
        if self.count is None and self.duration_s is None:
            raise ValueError("give count or duration_s")
        if not 1 <= self.processes <= len(self.flows):
            raise ValueError("need 1 <= processes <= number of flows")


@dataclass(frozen=True)
class SenderResult:
    """What a sender put on the wire; ``retries`` counts sends the kernel refused (ENOBUFS)."""

    packets: int
    bytes: int
    elapsed_s: float
    retries: int
    flow_packets: dict[int, int]

    @property
    def pps(self) -> float:
        """Packets per second over the run."""
        return self.packets / self.elapsed_s if self.elapsed_s else 0.0

    @property
    def bps(self) -> float:
        """Frame bits per second (FCS, preamble and gap not counted)."""
        return 8 * self.bytes / self.elapsed_s if self.elapsed_s else 0.0

    def to_json(self) -> str:
        """JSON text with ``pps`` and ``bps`` added."""
        return json.dumps(asdict(self) | {"pps": self.pps, "bps": self.bps})

    @staticmethod
    def merge(parts: Sequence["SenderResult"]) -> "SenderResult":
        """Totals of processes that ran at the same time."""
        flows: dict[int, int] = {}
        for part in parts:
            for fid, n in part.flow_packets.items():
                flows[fid] = flows.get(fid, 0) + n
        return SenderResult(
            packets=sum(p.packets for p in parts),
            bytes=sum(p.bytes for p in parts),
            elapsed_s=max(p.elapsed_s for p in parts),
            retries=sum(p.retries for p in parts),
            flow_packets=flows,
        )


class Egress:
    """Where a job's frames leave: a raw socket, and standby next hops to move to when the
    interface goes down, the way a bond moves traffic to a surviving member.

    Frames that meet a down interface with no standby left are counted as sent and lost.
    """

    def __init__(self, sock: socket.socket, standby: Sequence[NextHop] = ()) -> None:
        self.sock, self.standby = sock, list(standby)
        self.header = b""
        self.lost = 0

    def _fail_over(self) -> bool:
        if not self.standby:
            return False
        hop = self.standby.pop(0)
        self.sock.close()
        self.sock = packet_socket(hop.iface, 0, receive=False)
        self.header = bytes.fromhex(hop.dst_mac.replace(":", "") + hop.src_mac.replace(":", ""))
        return True

    def send(self, frame: bytes) -> int:
        """Send one frame, waiting out a full queue; returns the number of refusals."""
        refused = 0
        if self.header:
            frame = self.header + frame[12:]
        while True:
            try:
                self.sock.send(frame)
                return refused
            except OSError as exc:
                if exc.errno in (errno.ENETDOWN, errno.ENXIO):
                    if self._fail_over():
                        frame = self.header + frame[12:]
                        continue
                    self.lost += 1
                    return refused
                if exc.errno != errno.ENOBUFS:
                    raise
                refused += 1
                time.sleep(_ENOBUFS_BACKOFF_S)


def send_loop(
    sock: socket.socket | Egress,
    flows: Sequence[FrameSource],
    pacing: Pacing,
    count: int | None,
    duration_s: float | None,
    start_ns: int,
) -> SenderResult:
    """Send until each flow sent ``count`` frames or ``duration_s`` passed (frames lost to
    a down interface count as sent).

    ``start_ns`` is on CLOCK_MONOTONIC; frames are stamped with CLOCK_REALTIME.
    """
    egress = sock if isinstance(sock, Egress) else Egress(sock)
    mono, wall, offset = time.monotonic_ns, time.time_ns, pacing.offset_s
    n = len(flows)
    seqs = [0] * n
    total = None if count is None else count * n
    end_ns = None if duration_s is None else start_ns + int(duration_s * 1e9)
    i = nbytes = retries = 0
    while total is None or i < total:
        due = start_ns + int(offset(i) * 1e9)
        now = mono()
        if end_ns is not None and max(due, now) >= end_ns:
            break
        if due > now:
            time.sleep((due - now) / 1e9)
        k = i % n
        frame = flows[k].frame(seqs[k], wall())
        retries += egress.send(frame)
        seqs[k] += 1
        nbytes += len(frame)
        i += 1
    elapsed = max(mono(), start_ns) - start_ns
    per_flow: dict[int, int] = {}
    for flow, sent in zip(flows, seqs, strict=True):
        per_flow[flow.flow_id] = per_flow.get(flow.flow_id, 0) + sent
    return SenderResult(i, nbytes, elapsed / 1e9, retries, per_flow)


def _worker(
    conn: Connection,
    iface: str,
    flows: Sequence[FrameSource],
    pacing: Pacing,
    count: int | None,
    duration_s: float | None,
    standby: tuple[NextHop, ...],
) -> None:
    egress = Egress(packet_socket(iface, 0, receive=False), standby)
    try:
        conn.send(("ready", None))
        _, start_ns = conn.recv()
        conn.send(("result", send_loop(egress, flows, pacing, count, duration_s, start_ns)))
    finally:
        egress.sock.close()


def run_senders(jobs: Sequence[SendJob]) -> list[SenderResult]:
    """Run all ``jobs`` at once (one process per job share) and return their results."""
    children: list[tuple[int, NetnsChild]] = []
    try:
        for j, job in enumerate(jobs):
            for p in range(job.processes):
                share = job.flows[p :: job.processes]
                args = (
                    job.iface,
                    share,
                    job.pacing.scaled(len(share) / len(job.flows)),
                    job.count,
                    job.duration_s,
                    job.standby,
                )
                children.append((j, NetnsChild(job.netns, _worker, args, job.lab)))
        for _, child in children:
            child.expect("ready", timeout_s=30)
        start_ns = time.monotonic_ns() + _START_DELAY_NS
        for _, child in children:
            child.send("go", start_ns)
        parts: list[list[SenderResult]] = [[] for _ in jobs]
        for j, child in children:
            parts[j].append(child.expect("result"))
        return [SenderResult.merge(p) for p in parts]
    finally:
        for _, child in children:
            child.close()


def run_sender(
    netns: str,
    iface: str,
    flows: Sequence[FrameSource],
    pacing: Pacing | None = None,
    *,
    count: int | None = None,
    duration_s: float | None = None,
    processes: int = 1,
) -> SenderResult:
    """Send ``flows`` from ``iface`` in ``netns``; see :class:`SendJob` for the arguments."""
    job = SendJob(netns, iface, tuple(flows), pacing or Unpaced(), count, duration_s, processes)
    return run_senders([job])[0]
