"""Count RoCEv2 frames arriving in a network namespace, in a background process.

The receiver reads a raw AF_PACKET socket rather than a UDP socket on port 4791: it sees
whole frames, so it can check the ICRC and read DSCP/ECN straight from the IP header, it
counts frames whatever their destination address, and arrival times come from the
kernel (SO_TIMESTAMPNS, CLOCK_REALTIME) so receiver scheduling does not inflate latency.
While it runs it also holds a UDP socket on port 4791, like an RDMA NIC would, so the
kernel does not answer every frame with an ICMP port-unreachable.

Given the addresses it may answer (``answer``: the lab's servers), it is also the
responder of the queue pairs whose data it receives: it sends an RC ACK back for every
message (:mod:`traffic.responder`). ACKs arriving for this namespace's own senders are
counted apart from data (``ReceiverResult.acks``).

Use (as root, in namespaces you created)::

    with Receiver("lab-b", "eth0", answer=["10.0.0.1"]) as rx:
        run_sender("lab-a", "eth0", flows, ConstantRate(20_000), count=1000)
        result = rx.stop()
"""

import dataclasses
import select
import socket
import struct
import time
from collections.abc import Iterable
from multiprocessing.connection import Connection
from types import TracebackType

from traffic.flowstats import ReceiverResult, Tally
from traffic.layout import ETH_P_IP, ROCE_UDP_PORT
from traffic.nsproc import NetnsChild, packet_socket
from traffic.responder import Responder

SO_TIMESTAMPNS = 35  # asm-generic value; Python's socket module lacks the constant
_TIMESPEC = struct.Struct("@qq")
_ANCILLARY = socket.CMSG_SPACE(_TIMESPEC.size)
_PACKET_OUTGOING = 4
_IDLE_POLL_MS = 200
_BATCH = 512  # frames read between looks at the control pipe
_SINK_BUFFER = 4096


def _arrival_ns(ancdata: list[tuple[int, int, bytes]]) -> int:
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            sec, nsec = _TIMESPEC.unpack(data[: _TIMESPEC.size])
            return int(sec) * 1_000_000_000 + int(nsec)
    return time.time_ns()


def _udp_sink() -> socket.socket:
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sink.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _SINK_BUFFER)
    sink.bind(("0.0.0.0", ROCE_UDP_PORT))
    return sink


def receive_loop(
    sock: socket.socket,
    conn: Connection,
    quiet_s: float,
    drain_s: float,
    responder: Responder | None = None,
) -> Tally:
    """Tally frames (and answer them with ``responder``) until told to stop, then until
    ``quiet_s`` passes without a frame, but no longer than ``drain_s``."""
    tally = Tally()
    buf = bytearray(65536)
    view = memoryview(buf)
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    poller.register(conn.fileno(), select.POLLIN)
    stop_by: float | None = None
    while True:
        events = poller.poll(_IDLE_POLL_MS if stop_by is None else quiet_s * 1000)
        if stop_by is None and conn.poll():
            conn.recv()
            poller.unregister(conn.fileno())
            stop_by = time.monotonic() + drain_s
        elif stop_by is not None and (not events or time.monotonic() > stop_by):
            return tally
        for _ in range(_BATCH):
            try:
                n, ancdata, _, addr = sock.recvmsg_into([buf], _ANCILLARY)
            except BlockingIOError:
                break
            if addr[2] != _PACKET_OUTGOING:
                frame = view[:n]
                if tally.add(frame, _arrival_ns(ancdata)) and responder is not None:
                    responder.answer(frame)


def _worker(
    conn: Connection, iface: str | None, quiet_s: float, drain_s: float, answer: frozenset[str]
) -> None:
    responder = Responder(answer) if answer else None
    try:
        with packet_socket(iface, ETH_P_IP, receive=True) as sock, _udp_sink():
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            sock.setblocking(False)
            conn.send(("ready", None))
            result = receive_loop(sock, conn, quiet_s, drain_s, responder).result()
    finally:
        if responder is not None:
            responder.close()
    if responder is not None:
        result = dataclasses.replace(
            result, acks_sent=responder.sent, acks_withheld=responder.withheld
        )
    conn.send(("result", result))


class Receiver:
    """A receiver counting on ``iface`` (all interfaces if None) of ``netns`` (a name or a
    path), ready when constructed (or after :meth:`ready`); :meth:`stop` returns what it
    counted.

    It ACKs the messages it receives from the addresses in ``answer`` (none: no ACKs); its
    process is tagged with ``lab`` (see :class:`~traffic.nsproc.NetnsChild`).
    """

    def __init__(
        self,
        netns: str,
        iface: str | None = None,
        *,
        quiet_s: float = 0.1,
        drain_s: float = 5.0,
        answer: Iterable[str] = (),
        lab: str | None = None,
        wait: bool = True,
    ) -> None:
        self._child = NetnsChild(netns, _worker, (iface, quiet_s, drain_s, frozenset(answer)), lab)
        if wait:
            self.ready()

    def ready(self) -> None:
        """Wait until it counts (done when constructed unless ``wait=False``: many receivers
        started first come up side by side)."""
        try:
            self._child.expect("ready", timeout_s=30)
        except BaseException:
            self._child.close()
            raise

    def stop(self) -> ReceiverResult:
        """Stop after the frames in flight have arrived; return the counts."""
        self.tell_stop()
        return self.result()

    def tell_stop(self) -> None:
        """Tell it to stop once the frames in flight have arrived (`result` collects): many
        receivers told first drain side by side."""
        self._child.send("stop")

    def result(self) -> ReceiverResult:
        """The counts, once it has stopped (after `tell_stop`)."""
        try:
            result: ReceiverResult = self._child.expect("result")
        finally:
            self._child.close()
        return result

    def close(self) -> None:
        """End the child if :meth:`stop` was never called (or failed)."""
        if self._child.process.is_alive():
            self._child.close(timeout_s=0)

    def __enter__(self) -> "Receiver":
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
