"""RC exchanges on a running netns twin, as a capture shows them: RDMA WRITE First, Middle and
Last with PSNs counting on per QP, and the receiving server's ACKs coming back.

server1 sends to server3 (the other MLAG pair: across leaf, spine, leaf) with the backend's
own receivers running in every server; tcpdump records both of server1's links (data leaves
on one NIC, ACKs may come back on either).
"""

from __future__ import annotations

import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
from scapy.contrib.roce import AETH, BTH
from scapy.layers.inet import IP
from scapy.packet import Packet
from scapy.utils import rdpcap

from labs.flows import start_receivers
from labs.netns import traffic as netns_traffic
from labs.netns.faults import resolve_link
from labs.netns.plan import build, netns_name
from traffic.checksums import icrc_ok
from traffic.endpoints import Endpoint
from traffic.frames import PSN_MASK
from traffic.jobs import FlowFactory, TrafficClass
from traffic.layout import (
    RC_ACKNOWLEDGE,
    RC_WRITE_FIRST,
    RC_WRITE_LAST,
    RC_WRITE_MIDDLE,
)
from traffic.pacing import ConstantRate
from traffic.roce import RETH, ROCE_DSCP
from traffic.sender import run_sender
from twin.pytest_plugin import Twin

SRC, DST = "server1", "server3"
QPS, MESSAGE, MESSAGES = 2, 4, 5
MESSAGE_OPCODES = [RC_WRITE_FIRST] + [RC_WRITE_MIDDLE] * (MESSAGE - 2) + [RC_WRITE_LAST]


def _tcpdump(twin: Twin, link: str, pcap: Path) -> subprocess.Popen[str]:
    """tcpdump on server1's end of `link`, returned once it listens."""
    end, _ = resolve_link(twin.lab, build(twin.lab), link)
    netns = netns_name(twin.name, end.node)
    # Immediate mode: without it, frames still in the kernel's capture ring when tcpdump is
    # stopped (up to its 1 s block timeout) never reach the file.
    argv = ["tcpdump", "--immediate-mode", "-U", "-i", end.ifname, "-w", str(pcap)]
    proc = subprocess.Popen(
        ["ip", "netns", "exec", netns, *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if "listening on" in line:
            return proc
    proc.wait()
    pytest.fail(f"tcpdump on {link} did not start (exit {proc.returncode})")


def _roce(pcaps: list[Path]) -> list[Packet]:
    """Every RoCEv2 packet of the captures, by capture time."""
    packets = [p for pcap in pcaps for p in rdpcap(str(pcap)) if BTH in p]
    return sorted(packets, key=lambda p: float(p.time))


def test_messages_and_acks_on_the_wire(small_twin: Twin, tmp_path: Path) -> None:
    servers = small_twin.servers()
    endpoints = [Endpoint(s, netns_name(small_twin.name, s), ip) for s, ip in servers.items()]
    factory = FlowFactory(endpoints, TrafficClass(qps_per_peer=QPS, message_packets=MESSAGE))
    iface, flows = factory.pair(SRC, DST)
    links = [f"{SRC}:{leaf}" for leaf in sorted(small_twin.pair_of(SRC))]
    pcaps = [tmp_path / f"{link.replace(':', '_')}.pcap" for link in links]
    receivers = start_receivers(netns_traffic.servers(small_twin.lab))
    dumps: list[subprocess.Popen[str]] = []
    try:
        dumps = [_tcpdump(small_twin, link, pcap) for link, pcap in zip(links, pcaps, strict=True)]
        sent = run_sender(
            endpoints[0].netns, iface, flows, ConstantRate(1000), count=MESSAGE * MESSAGES
        )
        got = {s: r.stop() for s, r in receivers.items()}
        receivers.clear()
    finally:
        for r in receivers.values():
            r.close()
        for proc in dumps:
            proc.terminate()
            proc.wait(timeout=10)
    assert sent.packets == QPS * MESSAGE * MESSAGES

    # The receivers: data counted where it arrived, ACKs apart where they came back.
    for stats in got[DST].flows.values():
        n = MESSAGE * MESSAGES
        assert (stats.packets, stats.lost, stats.dscp) == (n, 0, {ROCE_DSCP: n})
    assert (got[DST].acks_sent, got[DST].acks_withheld) == (QPS * MESSAGES, 0)
    assert got[SRC].flows == {}
    acks_back = QPS * MESSAGES
    assert (got[SRC].acks.packets, got[SRC].acks.dscp) == (acks_back, {ROCE_DSCP: acks_back})

    # The wire: per QP, whole messages with continuing PSNs, and one ACK per message.
    packets = _roce(pcaps)
    assert all(icrc_ok(bytes(p)) for p in packets)
    data: dict[int, list[Packet]] = defaultdict(list)
    acks: dict[int, list[Packet]] = defaultdict(list)
    for p in packets:
        if p[IP].src == servers[SRC]:
            data[p[BTH].dqpn].append(p)
        else:
            assert (p[IP].src, p[IP].dst) == (servers[DST], servers[SRC])
            acks[p[BTH].dqpn].append(p)
    assert len(data) == len(acks) == QPS
    for flow in flows:
        [frames] = [d for d in data.values() if d[0][BTH].psn == flow.psn0]
        assert [p[BTH].opcode for p in frames] == MESSAGE_OPCODES * MESSAGES
        assert [p[BTH].psn for p in frames] == [
            (flow.psn0 + i) & PSN_MASK for i in range(MESSAGE * MESSAGES)
        ]
        firsts = [p for p in frames if p[BTH].opcode == RC_WRITE_FIRST]
        assert all(RETH in p and p[RETH].dlen == flow.dma_len for p in firsts)
        assert not any(RETH in p for p in frames if p[BTH].opcode != RC_WRITE_FIRST)
        answers = acks[flow.src_qpn]
        assert [p[BTH].opcode for p in answers] == [RC_ACKNOWLEDGE] * MESSAGES
        assert [p[BTH].psn for p in answers] == [
            p[BTH].psn for p in frames if p[BTH].opcode == RC_WRITE_LAST
        ]
        assert [p[AETH].msn for p in answers] == list(range(1, MESSAGES + 1))
        assert {p[IP].tos >> 2 for p in answers} == {ROCE_DSCP}
