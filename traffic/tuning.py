"""NCCL's choice of All-Reduce algorithm by size and node count: its tuning model.

A transcription of ``ncclTopoTuneModel`` and ``ncclTopoGetAlgoTime`` in NCCL 2.30.7
(``src/graph/tuning.cc``, NVIDIA/nccl commit 5067397c), for the algorithms the twin plays
(ring and tree) and the three protocols (LL, LL128, Simple), on the machine docs/traffic.md
names: Hopper GPUs (compute capability 9.0) joined by NVLink inside a server, x86 Intel
CPUs, ``gpus`` GPUs per server, its NICs' bandwidth shared by two channels per NIC. NCCL
estimates each (algorithm, protocol) as latency + bytes / bandwidth and runs the fastest.

>>> choice(nodes=49, gpus=8, nics=2, node_gbps=800, message_bytes=8_000_000).algorithm
'tree'
>>> choice(nodes=4, gpus=8, nics=2, node_gbps=800, message_bytes=1 << 30).algorithm
'ring'
"""

from __future__ import annotations

from dataclasses import dataclass

PROTOCOLS = ("LL", "LL128", "Simple")
# tuning.cc, ncclTunerConstantsDefaults (us): baseLatencies, hwLatencies NVLINK and NET
BASE_US = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4)}
NVLINK_US = {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4)}
NET_US = {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0)}
LL_MAX_BW = 20.4  # llMaxBws[Intel][more than 2 nodes], GB/s
RING_LL128_PER_CHANNEL = 36.7  # perChMaxRingLL128Bws[Hopper][N4]
TREE_PER_CHANNEL = 36.0  # perChMaxTreeBws[Hopper][N4]
TREE_LL128_PER_CHANNEL = 29.0  # perChMaxTreeLL128Bws[Hopper][N4]
NET_OVERHEAD_US = 1.0  # getNetOverhead: x86 Intel
# treeCorrectionFactor[protocol][log2(bytes / 64)], 64 B to 256 MB
# fmt: off
TREE_CORRECTION = (
    (1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5,
     0.4, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.8, 0.8, 0.7, 0.6, 0.6,
     0.6, 0.6, 0.6, 0.6, 0.8, 0.9, 0.9, 0.9, 0.9, 1.0, 1.0, 1.0),
    (0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5,
     0.5, 0.5, 0.5, 0.6, 0.7, 0.8, 0.7, 0.7, 0.8, 0.9, 0.9, 0.9),
)
# fmt: on


@dataclass(frozen=True)
class Estimate:
    """NCCL's estimate for one algorithm and protocol: microseconds, and its parts."""

    algorithm: str
    protocol: str
    latency_us: float
    bandwidth_gbytes: float
    time_us: float


def log2i(n: int) -> int:
    """NCCL's log2i: floor(log2(n)), -1 for 0."""
    return n.bit_length() - 1


def estimates(
    nodes: int, gpus: int, nics: int, node_gbps: float, message_bytes: int
) -> list[Estimate]:
    """NCCL's time for an All-Reduce of `message_bytes` by ring and tree in each protocol,
    over `nodes` servers of `gpus` GPUs (at least one) and `nics` NICs of `node_gbps` Gb/s
    in all."""
    ppn = max(gpus, 1)
    ranks = nodes * ppn
    channels = 2 * nics
    per_channel = node_gbps / 8 / channels  # GB/s: graphs[a]->bwInter
    n_steps = 2 * (ranks - 1)
    found = []
    for a in ("tree", "ring"):
        for p, proto in enumerate(PROTOCOLS):
            bus = channels * per_channel
            if a == "ring" and proto == "LL":
                bus = min(LL_MAX_BW, bus * 0.5)
            if a == "ring" and proto == "LL128":
                bus = min(bus * 0.92, channels * RING_LL128_PER_CHANNEL)
            if a == "tree":
                bus = min(bus * 0.92, channels * TREE_PER_CHANNEL)
                if proto == "LL":
                    bus = min(bus / 3.8, LL_MAX_BW)
                if proto == "LL128":
                    ll128 = 7.0 / 9.0 if nodes == 1 else 120.0 / 128.0
                    bus = min(bus * ll128, channels * TREE_LL128_PER_CHANNEL)
            bw = bus * (ranks / n_steps if a == "ring" else 0.5)
            intra = NVLINK_US[a][p]
            inter = NET_US["tree" if ppn == 1 else a][p]
            latency = BASE_US[a][p]
            if a == "ring":
                overhead = NET_OVERHEAD_US * (3 if proto == "Simple" else 1) if nodes > 1 else 0.0
                inter_steps = 0 if nodes == 1 else 2 * (nodes - 1)
                latency += (n_steps - inter_steps) * max(intra, overhead) + inter_steps * inter
            else:
                latency += 2 * ((ppn - 1) * intra + log2i(nodes) * inter)
            # ncclTopoGetAlgoTime
            log_size = log2i(message_bytes >> 6)
            if a == "tree" and 0 <= log_size < 23:
                bw *= TREE_CORRECTION[p][log_size]
            plateau = message_bytes // (channels * ranks) >= 64
            if a == "ring" and proto == "Simple" and nodes > 1 and plateau:
                latency *= 1.4
            time = latency + message_bytes / (1000 * bw)
            found.append(Estimate(a, proto, latency, bw, time))
    return found


def choice(nodes: int, gpus: int, nics: int, node_gbps: float, message_bytes: int) -> Estimate:
    """The fastest of `estimates` (the first on a tie, tree before ring, as NCCL's loop)."""
    if nodes < 2:
        raise ValueError("an All-Reduce across the fabric needs two servers or more")
    return min(estimates(nodes, gpus, nics, node_gbps, message_bytes), key=lambda e: e.time_us)
