"""Frame building speed, and (as root) sender rates over one veth and across the fabric.

Compares our sender with scapy's ``sendp`` and, when installed, ``tcpreplay --topspeed``,
all sending the same frames: first from ``twbench-<pid>-a`` to ``twbench-<pid>-b`` over one
veth pair, then from server1 to server4 of a deployed small fabric (server, leaf, spine, leaf,
server). Prints figures only.

Run: ``.venv/bin/python bench/bench_traffic_frames.py``
"""

import contextlib
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.connection import Connection
from pathlib import Path

from pyroute2 import IPRoute, netns

from traffic.endpoints import Endpoint
from traffic.jobs import FlowFactory, TrafficClass
from traffic.nsproc import NetnsChild
from traffic.receiver import Receiver
from traffic.roce import RoceFlowSpec, roce_flow
from traffic.sender import run_sender

BUILD_COUNT = 10_000
SEND_COUNT = 20_000
FLOWS = 4
TCPREPLAY = Path("/usr/bin/tcpreplay")


def bench_build() -> None:
    """Time one flow's scapy templates and 10,000 stamped frames."""
    spec = RoceFlowSpec(
        "02:00:00:00:00:01",
        "02:00:00:00:00:02",
        "10.0.0.1",
        "10.0.0.2",
        src_qpn=0x101,
        dst_qpn=0x202,
        flow_id=1,
    )
    t0 = time.perf_counter()
    flow = roce_flow(spec)
    t1 = time.perf_counter()
    frames = flow.frames(BUILD_COUNT)
    t2 = time.perf_counter()
    sizes = sorted({len(f) for f in frames})
    print(f"scapy templates (First, Middle, Last): {(t1 - t0) * 1e3:.2f} ms")
    print(
        f"{BUILD_COUNT} frames of {'/'.join(map(str, sizes))} B "
        f"({spec.message_packets}-packet messages): {(t2 - t1) * 1e3:.1f} ms "
        f"({BUILD_COUNT / (t2 - t1):,.0f} frames/s)"
    )


@contextmanager
def veth_pair() -> Iterator[list[Endpoint]]:
    """Namespaces a and b joined by one veth; always removed."""
    names = [f"twbench-{os.getpid()}-{x}" for x in "ab"]
    try:
        for name in names:
            netns.create(name)
        with IPRoute(netns=names[0], flags=0) as ipr:
            ipr.link(
                "add",
                ifname="veth-a",
                kind="veth",
                peer={"ifname": "veth-b", "net_ns_fd": names[1]},
            )
        for name, ifname, ip in zip(
            names, ("veth-a", "veth-b"), ("10.97.0.1", "10.97.0.2"), strict=True
        ):
            with IPRoute(netns=name, flags=0) as ipr:
                index = ipr.link_lookup(ifname=ifname)[0]
                ipr.addr("add", index=index, address=ip, prefixlen=24)
                ipr.link("set", index=index, state="up")
        yield [Endpoint("sa", names[0], "10.97.0.1"), Endpoint("sb", names[1], "10.97.0.2")]
    finally:
        for name in names:
            if name in netns.listnetns():
                netns.remove(name)


def _scapy_sendp(conn: Connection, iface: str, frames: Sequence[bytes]) -> None:
    from scapy.config import conf
    from scapy.packet import Raw
    from scapy.sendrecv import sendp

    conf.ifaces.reload()  # the parent's scapy cached the host's interfaces
    packets = [Raw(f) for f in frames]
    t0 = time.perf_counter()
    sendp(packets, iface=iface, verbose=False)
    conn.send(("result", time.perf_counter() - t0))


def _scapy(ns: str, iface: str, frames: Sequence[bytes]) -> float:
    child = NetnsChild(ns, _scapy_sendp, (iface, frames))
    try:
        elapsed: float = child.expect("result")
    finally:
        child.close()
    return len(frames) / elapsed


def _tcpreplay(ns: str, iface: str, frames: Sequence[bytes]) -> float:
    from scapy.layers.l2 import Ether
    from scapy.utils import wrpcap

    with tempfile.TemporaryDirectory() as tmp:
        pcap = Path(tmp) / "frames.pcap"
        wrpcap(str(pcap), [Ether(f) for f in frames])
        out = subprocess.run(
            ["ip", "netns", "exec", ns, str(TCPREPLAY), "--topspeed", "-i", iface, str(pcap)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    match = re.search(r"([\d.]+) pps", out)
    return float(match.group(1)) if match else float("nan")


@contextmanager
def small_fabric() -> Iterator[list[Endpoint]]:
    """The small example fabric deployed under a bench-only name; always destroyed."""
    from labs import registry
    from labs.netns.plan import netns_name
    from twin.intent import fabric as intent
    from twin.lab import directory as labdir

    fabric = intent.load(Path(__file__).resolve().parent.parent / "examples" / "small.yaml")
    fabric = fabric.model_copy(update={"name": f"trb{os.getpid() % 100000}"})
    with tempfile.TemporaryDirectory() as tmp:
        labdir.generate(fabric, Path(tmp) / "lab")
        lab = labdir.Lab.open(Path(tmp) / "lab")
        twin_netns = registry.get("netns")
        twin_netns.deploy(lab)
        try:
            yield [
                Endpoint(s, netns_name(lab.name, s), lab.host(s)["address"].split("/")[0])
                for s in ("server1", "server4")
            ]
        finally:
            twin_netns.destroy(lab)


def _measured(name: str, ep: list[Endpoint], send: Callable[[], float]) -> float:
    with Receiver(ep[1].netns) as rx:
        pps = send()
        got = rx.stop()
    print(f"{name:<28} {pps:>10,.0f} pps   received {got.packets:,} (bad ICRC {got.bad_icrc})")
    return pps


def bench_senders(ep: list[Endpoint], where: str) -> None:
    """Send the same frames with each sender and count what arrives."""
    with contextlib.nullcontext():
        factory = FlowFactory(ep, TrafficClass(qps_per_peer=FLOWS))
        iface, flows = factory.pair(ep[0].name, ep[1].name)
        per_flow = SEND_COUNT // FLOWS
        frames = [f for flow in flows for f in flow.frames(per_flow)]
        print(f"sending {SEND_COUNT:,} frames of {len(frames[0])} B, {FLOWS} flows, {where}")

        def ours(processes: int) -> Callable[[], float]:
            def send() -> float:
                return run_sender(
                    ep[0].netns, iface, flows, count=per_flow, processes=processes
                ).pps

            return send

        one = _measured("ours (1 process)", ep, ours(1))
        two = _measured("ours (2 processes)", ep, ours(2))
        _measured("scapy sendp(list)", ep, lambda: _scapy(ep[0].netns, iface, frames))
        if TCPREPLAY.exists():
            replay = _measured(
                "tcpreplay --topspeed", ep, lambda: _tcpreplay(ep[0].netns, iface, frames)
            )
            print(f"ours / tcpreplay: {one / replay:.2f}x (1 process), {two / replay:.2f}x (2)")
        else:
            print("tcpreplay: not installed")


if __name__ == "__main__":
    bench_build()
    if os.geteuid() == 0:
        with veth_pair() as pair:
            bench_senders(pair, "a -> b over one veth")
        with small_fabric() as servers:
            bench_senders(servers, "server1 -> server4 across the small fabric")
    else:
        print("sender rates: skipped (needs root for namespaces)")
