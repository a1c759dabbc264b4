"""The sender's loop on a local datagram socket pair (no namespaces or root needed)."""

import errno
import socket
import time

import pytest

from traffic.flowstats import Tally
from traffic.frames import RoceFlow
from traffic.pacing import ConstantRate, Unpaced
from traffic.roce import RoceFlowSpec, roce_flow
from traffic.sender import SenderResult, SendJob, send_loop


def flows(n: int) -> list[RoceFlow]:
    return [
        roce_flow(
            RoceFlowSpec(
                "02:00:00:00:00:01",
                "02:00:00:00:00:02",
                "10.1.0.1",
                "10.2.0.1",
                src_qpn=0x100 + i,
                dst_qpn=0x200,
                flow_id=i,
                payload_len=64,
            )
        )
        for i in range(n)
    ]


def receive_all(sock: socket.socket) -> Tally:
    tally = Tally()
    sock.setblocking(False)
    while True:
        try:
            tally.add(sock.recv(2048), time.time_ns())
        except BlockingIOError:
            return tally


def test_each_flow_sends_count_frames_in_sequence() -> None:
    tx, rx = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    with tx, rx:
        result = send_loop(tx, flows(3), Unpaced(), 40, None, time.monotonic_ns())
        got = receive_all(rx).result()
    assert (result.packets, result.retries) == (120, 0)
    assert result.flow_packets == {0: 40, 1: 40, 2: 40}
    assert result.bytes == 120 * 122 + 3 * 3 * 16  # seqs 0, 16, 32 start messages (RETH)
    assert sorted(got.flows) == [0, 1, 2]
    for stats in got.flows.values():
        assert (stats.packets, stats.lost, stats.reordered, stats.max_seq) == (40, 0, 0, 39)
        assert stats.latency_min_ns >= 0


def test_duration_bounds_a_paced_run() -> None:
    tx, rx = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    with tx, rx:
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        result = send_loop(tx, flows(1), ConstantRate(1000), None, 0.05, time.monotonic_ns())
    assert result.packets <= 50  # frames due at 0, 1, ... 49 ms only


class RefusingSocket:
    """Refuses the first two sends with ENOBUFS, like a full device queue."""

    def __init__(self) -> None:
        self.refusals = 2
        self.sent: list[bytes] = []

    def send(self, data: bytes) -> int:
        if self.refusals:
            self.refusals -= 1
            raise OSError(errno.ENOBUFS, "No buffer space available")
        self.sent.append(data)
        return len(data)


def test_full_queue_is_retried_not_dropped() -> None:
    sock = RefusingSocket()
    result = send_loop(sock, flows(1), Unpaced(), 5, None, time.monotonic_ns())  # type: ignore[arg-type]
    assert (result.packets, result.retries, len(sock.sent)) == (5, 2, 5)


def test_results_merge_and_serialize() -> None:
    a = SenderResult(10, 1000, 0.5, 1, {1: 10})
    b = SenderResult(20, 2000, 1.0, 0, {1: 5, 2: 15})
    m = SenderResult.merge([a, b])
    assert (m.packets, m.bytes, m.elapsed_s, m.retries) == (30, 3000, 1.0, 1)
    assert m.flow_packets == {1: 15, 2: 15}
    assert (m.pps, m.bps) == (30, 24000)
    assert '"pps": 30.0' in m.to_json()


def test_job_validation() -> None:
    with pytest.raises(ValueError, match="count or duration"):
        SendJob("ns", "eth0", tuple(flows(1)))
    with pytest.raises(ValueError, match="processes"):
        SendJob("ns", "eth0", tuple(flows(2)), count=1, processes=3)
