"""Turn an Experiment into a configured C simulator: names become indices, QoS profiles
become numeric tables, routes become next-hop lists."""

from __future__ import annotations

import ctypes
import functools
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from labs.sim import native
from labs.sim.flows import TRANSPORTS, FlowTable, Replay, Ring
from labs.sim.model import (
    NPRIO,
    Dcqcn,
    Experiment,
    Host,
    LinkFault,
    PacketLoss,
    PfcStorm,
    QosProfile,
    Switch,
    TxOff,
)
from labs.sim.routing import RoutingError, forwarding, route_rows, split_port
from traffic.layout import ROCE_UDP_PORT, UDP_SPORT_MIN
from twin.design.asic import BYTES, Cells
from twin.design.headroom import headroom_bytes, response_quanta
from twin.errors import TwinError

NEVER = 1e30
"""A time past any run (the core treats >= 9e6 s as never)."""
MAX_PORTS = 2**23
"""A packet holds its ingress port in 24 signed bits (csrc/sim.h)."""
MAX_DCQCN_SETS = 2**16
"""A node holds its DCQCN set's index in 16 bits (csrc/sim.h)."""
MAX_PROFILES = 2**16
"""A port holds its QoS profile's index in 16 bits (csrc/sim.h)."""


class ExperimentError(TwinError, ValueError):
    """An experiment that names unknown nodes, ports or flows, or has impossible values."""


@dataclass(frozen=True)
class Layout:
    """Names of the indices the core uses, to read its outputs back."""

    links: list[tuple[str, str]]
    ports: list[tuple[str, str]]
    flows: FlowTable
    """Every flow the core runs: the experiment's `flows`, then its `table`'s rows."""
    sampled_ports: list[int]
    flow_series: bool


@dataclass
class Built:
    handle: int
    layout: Layout


def data_frames(exp: Experiment, flows: FlowTable) -> tuple[int, ...]:
    """The full data frames (payload and headers) the experiment's flows send, ascending:
    the last is the MTU the headroom formula takes."""
    payloads = {exp.packet_bytes, *(int(p) for p in np.unique(flows.packet_bytes) if p > 0)}
    return tuple(sorted(p + exp.header_bytes for p in payloads))


def response_time(qos: QosProfile, speed: float) -> float:
    """Seconds a port of `speed` b/s takes to act on a pause frame (QosProfile.pfc_response_quanta).

    >>> round(response_time(QosProfile(), 100e9) * 1e6, 3), response_time(QosProfile(), 400e9)
    (2.017, 1.1584e-06)
    """
    quanta = qos.pfc_response_quanta
    return (response_quanta(speed) if quanta is None else quanta) * 512 / speed


def profile_arrays(
    qos: QosProfile,
    speed: float,
    propagation: float,
    mtu: int,
    cells: Cells = BYTES,
    frames: tuple[int, ...] = (),
) -> tuple[list[int], list[float], list[float], list[float]]:
    """The numeric tables of one port's profile, lossless headroom sized when not given (the
    formula's bytes for `mtu`-byte frames as the buffer holds the data `frames` in use, in
    `cells`: the frame that holds the most cells per byte)."""
    if not all(0 <= d < 64 and 0 <= tc < NPRIO for d, tc in qos.dscp_to_tc.items()):
        raise ExperimentError("dscp_to_tc: DSCPs are 0-63, traffic classes 0-7")
    for name, table in (("tc_to_queue", qos.tc_to_queue), ("tc_to_pg", qos.tc_to_pg)):
        if len(table) != NPRIO or not all(0 <= v < NPRIO for v in table):
            raise ExperimentError(f"{name}: 8 values of 0-7")
    if not all(0 <= tc < NPRIO for tc in qos.lossless):
        raise ExperimentError("lossless: priorities are 0-7")
    _check_buffers(qos, cells)
    maps = [qos.dscp_to_tc.get(d, 0) for d in range(64)]
    maps += (
        list(qos.tc_to_queue)
        + list(qos.tc_to_pg)
        + [int(tc in qos.lossless) for tc in range(NPRIO)]
    )
    lossless_pgs = {qos.tc_to_pg[tc] for tc in qos.lossless}
    pg: list[float] = []
    for index in range(NPRIO):
        p = qos.pg(index)
        headroom = p.headroom
        if headroom is None:
            auto = headroom_bytes(speed, propagation / 5e-9, mtu)
            headroom = cells.scaled(auto, (*frames, mtu)) if index in lossless_pgs else 0
        static = -1 if p.static_threshold is None else p.static_threshold
        pg += [p.reserved, headroom, p.xon, p.xon_offset, static, p.alpha]
    q: list[float] = []
    for index in range(NPRIO):
        w = qos.queue(index)
        q += [int(w.strict), w.weight * qos.dwrr_quantum, int(w.ecn), int(w.wred_drop), w.max_bytes]
        q += [w.kmin, w.kmax, w.pmax]
    wd = qos.watchdog
    other = [float(qos.pause_quanta), qos.refresh_fraction]
    other += (
        [0, 0, 0, 0]
        if wd is None
        else [1, 1 if wd.action == "drop" else 2, wd.detection, wd.restoration]
    )
    other.append(int(qos.ecn_at == "enqueue"))
    other += [cells.size, cells.descriptor, response_time(qos, speed)]
    return maps, pg, q, other


Profile = tuple[tuple[int, ...], tuple[float, ...], tuple[float, ...], tuple[float, ...]]
_PROFILES: dict[
    tuple[int, float, float, int, Cells, tuple[int, ...]], tuple[QosProfile, Profile]
] = {}
"""`profile_arrays` by QoS object (kept with it, so that its id is not another's), speed,
propagation, MTU, cells and frames: a drill's worker builds the same ports for every case."""


def _profile(
    qos: QosProfile,
    speed: float,
    propagation: float,
    mtu: int,
    cells: Cells,
    frames: tuple[int, ...] = (),
) -> Profile:
    """`profile_arrays` as tuples, computed once per QoS object and port figures."""
    at = (id(qos), speed, propagation, mtu, cells, frames)
    kept = _PROFILES.get(at)
    if kept is not None and kept[0] is qos:
        return kept[1]
    maps, pg, q, other = profile_arrays(qos, speed, propagation, mtu, cells, frames)
    found = (tuple(maps), tuple(pg), tuple(q), tuple(other))
    if len(_PROFILES) >= 65536:
        _PROFILES.clear()
    _PROFILES[at] = (qos, found)
    return found


def _check_buffers(qos: QosProfile, cells: Cells) -> None:
    """Refuse buffer, pause and marking values no switch could have (one line, naming it)."""
    bad: list[str] = []
    for index, p in qos.pgs.items():
        sizes = [p.reserved, p.xon, p.xon_offset, p.headroom or 0, p.static_threshold or 0]
        if min(sizes) < 0 or not p.alpha >= 0:
            bad.append(f"pgs.{index}: sizes and alpha must not be negative")
    for index, w in qos.queues.items():
        if w.weight < 1 or min(w.kmin, w.kmax, w.max_bytes) < 0 or not 0 <= w.pmax <= 1:
            bad.append(f"queues.{index}: weight >= 1, sizes not negative, pmax 0-1")
        elif w.kmax < w.kmin:
            bad.append(f"queues.{index}: kmax below kmin")
    if not 0 <= qos.pause_quanta <= 0xFFFF or not 0 < qos.refresh_fraction <= 1:
        bad.append("pause_quanta 0-65535, refresh_fraction above 0 and at most 1")
    if qos.pfc_response_quanta is not None and not 0 <= qos.pfc_response_quanta <= 0xFFFF:
        bad.append("pfc_response_quanta 0-65535")
    if qos.dwrr_quantum < 1:
        bad.append("dwrr_quantum must be positive")
    if cells.size < 1 or cells.descriptor < 0:
        bad.append("cell_bytes must be positive and cell_descriptor not negative")
    if bad:
        raise ExperimentError(bad[0])


def _listed(
    exp: Experiment, host_index: dict[str, int], own_ports: dict[str, list[str]]
) -> FlowTable:
    """The experiment's `Flow`s as table rows (their names resolved and checked here)."""
    flows = exp.flows
    index = {f.name: i for i, f in enumerate(flows)}
    src, dst, src_port, after, after_start = [], [], [], [], [0]
    for flow in flows:
        for name in sorted(set(flow.after)):
            if name not in index:
                raise ExperimentError(f"flow {flow.name}: after {name!r}, which is not a flow")
            after.append(index[name])
        after_start.append(len(after))
        for end in (flow.src, flow.dst):
            if end not in host_index:
                raise ExperimentError(f"flow {flow.name}: {end!r} is not a host")
        src.append(host_index[flow.src])
        dst.append(host_index[flow.dst])
        ports = own_ports[flow.src]
        if flow.src_port is not None and flow.src_port not in ports:
            raise ExperimentError(
                f"flow {flow.name}: {flow.src_port!r} is not a port of {flow.src}"
            )
        src_port.append(-1 if flow.src_port is None else ports.index(flow.src_port))
        if flow.transport not in TRANSPORTS:
            raise ExperimentError(f"flow {flow.name}: transport is one of {', '.join(TRANSPORTS)}")
    return FlowTable.of(
        [f.name.encode() for f in flows],
        src,
        dst,
        size=[-1 if f.size is None else f.size for f in flows],
        rate=[f.rate or 0.0 for f in flows],
        start=[f.start for f in flows],
        stop=[np.inf if f.stop is None else f.stop for f in flows],
        after_delay=[f.after_delay for f in flows],
        dscp=[f.dscp for f in flows],
        priority=[-1 if f.priority is None else f.priority for f in flows],
        dcqcn=[f.cc == "dcqcn" for f in flows],
        ecn_capable=[f.cc == "dcqcn" if f.ecn_capable is None else f.ecn_capable for f in flows],
        packet_bytes=[f.packet_bytes or 0 for f in flows],
        ttl=[f.ttl for f in flows],
        transport=[TRANSPORTS.index(f.transport) for f in flows],
        src_port=src_port,
        after_start=after_start,
        after=after,
    )


def all_flows(exp: Experiment, own_ports: dict[str, list[str]]) -> FlowTable:
    """Every flow of `exp` as one table: its `flows`, then its `table`'s rows."""
    host_index = {h.name: i for i, h in enumerate(exp.hosts)}
    listed = _listed(exp, host_index, own_ports)
    if exp.table is None:
        return listed
    if not len(listed):
        return exp.table
    return FlowTable.concat([listed, exp.table])


def _first(table: FlowTable, bad: npt.NDArray[np.bool_], what: str) -> None:
    """Refuse the first row where `bad` holds, naming its flow."""
    rows = np.flatnonzero(bad)
    if rows.size:
        raise ExperimentError(f"flow {table.name(int(rows[0]))}: {what}")


KEY_TAIL = b"|%d|17" % ROCE_UDP_PORT
"""The end of a flow's 5-tuple as its ECMP key hashes it: destination UDP port and protocol."""
SPORTS = 0x10000 - UDP_SPORT_MIN
"""The source ports a name maps to (the low bits of its CRC-32): 49152-65535, five digits each."""
ZERO_TAIL = bytes(len(b"%d" % UDP_SPORT_MIN + KEY_TAIL))
"""As many zero bytes as a key's last bytes, `sport|4791|17`."""


@functools.cache
def _sport_crcs() -> npt.NDArray[np.uint32]:
    """Per source port UDP_SPORT_MIN + i: the CRC-32 of `sport|4791|17` from a zero start."""
    return np.array(
        [zlib.crc32(b"%d" % sport + KEY_TAIL) for sport in range(UDP_SPORT_MIN, 0x10000)],
        np.uint32,
    )


def _pairs(
    table: FlowTable, seed: int, hosts: Sequence[Host]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint32]]:
    """The (source, destination) pairs of a table's rows, as src * len(hosts) + dst sorted,
    and per pair what its prefix `seed|src|dst|` adds to the CRC-32 of a key's last bytes:
    the CRC is linear in its start, so `crc32(d, s) == crc32(d, 0) ^ shift(s)` for every `d`
    of that length, with `shift(s) = crc32(zeros, s) ^ crc32(zeros, 0)`.

    >>> d, s = b"51234|4791|17", 0x12345678
    >>> zlib.crc32(d) ^ zlib.crc32(ZERO_TAIL, s) ^ zlib.crc32(ZERO_TAIL) == zlib.crc32(d, s)
    True
    """
    pair = table.src.astype(np.int64)
    pair *= len(hosts)
    pair += table.dst
    pairs = np.unique(pair)
    del pair
    base = zlib.crc32(ZERO_TAIL)
    shifts = np.array(
        [
            zlib.crc32(
                ZERO_TAIL,
                zlib.crc32(
                    f"{seed}|{hosts[p // len(hosts)].name}|{hosts[p % len(hosts)].name}|".encode()
                ),
            )
            ^ base
            for p in pairs.tolist()
        ],
        np.uint32,
    )
    return pairs, shifts


@dataclass
class CoreFlows:
    """A checked flow table as the core takes it (sim_set_flows, sim_set_dependents): per flow
    12 integers (source and destination node, port, DSCP, priority, DCQCN, ECT, packet bytes,
    TTL, flows it waits for, ECMP key, transport) and 5 numbers (size, rate, start, stop, delay
    after what it waits for), made a chunk of rows at a time (the table's columns are only
    read, a chunk at a time: a column may be a read-only view, such as np.broadcast_to's);
    and where each flow's dependents start."""

    table: FlowTable
    packet_bytes: int
    switches: int
    n_hosts: int
    maps: npt.NDArray[np.int64]
    """Per host, its dscp_to_tc (the priority of a row without one)."""
    ect: npt.NDArray[np.bool_]
    """Per host, whether it marks its DCQCN flows ECN-capable (`Dcqcn.ect`)."""
    count: npt.NDArray[np.int64]
    """Per host, its ports."""
    host_ports: npt.NDArray[np.int64]
    """Per host, its ports' indices (-1 past its count)."""
    pairs: npt.NDArray[np.int64]
    shifts: npt.NDArray[np.uint32]
    """Per pair, what its prefix adds to the CRC-32 of a key's last bytes (`_pairs`)."""
    dep_start: npt.NDArray[np.int32]

    def keys(self, rows: slice, src: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
        """The ECMP keys of `rows`: their 5-tuple (UDP source port from the name, to 4791)
        hashed with the seed (CRC-32 of `seed|src|dst|sport|4791|17`, sport 49152-65535)."""
        names = self.table.names[rows].tolist()
        port = np.fromiter((zlib.crc32(n) % SPORTS for n in names), np.int64, len(names))
        pair = src.astype(np.int64) * self.n_hosts + self.table.dst[rows]
        shift = self.shifts[np.searchsorted(self.pairs, pair)]
        return (_sport_crcs()[port] ^ shift).astype(np.int64)

    def rows(self, first: int, end: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """The core's integers and numbers of rows [first, end), row-major."""
        t, rows = self.table, slice(first, end)
        src, dscp, src_port = t.src[rows], t.dscp[rows], t.src_port[rows]
        keys = self.keys(rows, src)
        position = np.where(src_port >= 0, src_port, keys % self.count[src])
        packet = t.packet_bytes[rows]
        priority = t.priority[rows]
        ints = np.column_stack(
            [
                src + self.switches,
                t.dst[rows] + self.switches,
                self.host_ports[src, position],
                dscp,
                np.where(priority >= 0, priority, self.maps[src, dscp]),
                t.dcqcn[rows],
                t.ecn_capable[rows] & (self.ect[src] | ~t.dcqcn[rows]),
                np.where(packet > 0, packet, self.packet_bytes),
                t.ttl[rows],
                np.diff(t.after_start[first : end + 1]),
                keys,
                t.transport[rows],
            ]
        ).astype(np.int64, copy=False)
        stop = t.stop[rows]
        nums = np.column_stack(
            [
                t.size[rows],
                t.rate[rows],
                t.start[rows],
                np.where(np.isinf(stop), NEVER, stop),
                t.after_delay[rows],
            ]
        ).astype(np.float64, copy=False)
        return np.ascontiguousarray(ints), np.ascontiguousarray(nums)

    def load(self, lib: ctypes.CDLL, handle: int, chunk: int = 1 << 16) -> None:
        """Pass the flows to the core, `chunk` rows at a time (to keep memory low)."""
        t, n = self.table, len(self.table)
        lib.sim_set_dependents(handle, self.dep_start.ctypes.data_as(native.PI32))
        for first in range(0, n, chunk):
            end = min(first + chunk, n)
            ints, nums = self.rows(first, end)
            edges = slice(int(t.after_start[first]), int(t.after_start[end]))
            after = np.ascontiguousarray(t.after[edges], dtype=np.int32)
            lib.sim_set_flows(
                handle,
                first,
                end - first,
                ints.ctypes.data_as(native.PI64),
                nums.ctypes.data_as(native.PF64),
                (after if len(after) else np.zeros(1, np.int32)).ctypes.data_as(native.PI32),
            )


def core_flows(
    exp: Experiment, table: FlowTable, seed: int, host_ports: list[list[int]]
) -> CoreFlows:
    """Check a table's rows (over the whole table, column by column: no column is copied)
    and what turns them into the core's columns."""
    n, n_hosts, hosts = len(table), len(exp.hosts), exp.hosts
    src, dst = table.src, table.dst
    _first(table, (src < 0) | (src >= n_hosts) | (dst < 0) | (dst >= n_hosts), "not a host")
    count = np.array([len(p) for p in host_ports] or [0], np.int64)
    rows = np.flatnonzero(count[src] == 0)
    if rows.size:
        r = int(rows[0])
        raise ExperimentError(f"flow {table.name(r)}: host {hosts[src[r]].name} has no link")
    _first(
        table,
        (table.src_port >= count[src]) | (table.src_port < -1),
        "src_port is not a port of its source",
    )
    packet, default_ok = table.packet_bytes, 64 <= exp.packet_bytes <= 65535
    _first(
        table,
        (table.dscp < 0)
        | (table.dscp > 63)
        | (table.ttl < 1)
        | (table.ttl > 255)
        | ((packet > 0) & ((packet < 64) | (packet > 65535)))
        | ((packet <= 0) & (not default_ok)),
        "dscp 0-63, ttl 1-255, packet_bytes 64-65535",
    )
    maps = np.array(
        [[h.qos.dscp_to_tc.get(d, 0) for d in range(64)] for h in hosts] or [[0] * 64], np.int64
    )
    own = table.priority >= 0
    bad_map = (maps < 0) | (maps >= NPRIO)
    rows = np.flatnonzero((own & (table.priority >= NPRIO)) | (~own & bad_map[src, table.dscp]))
    if rows.size:
        r = int(rows[0])
        prio = table.priority[r] if own[r] else maps[src[r], table.dscp[r]]
        raise ExperimentError(f"flow {table.name(r)}: priority {prio} is not 0-7")
    _first(
        table,
        (table.transport < 0) | (table.transport >= len(TRANSPORTS)),
        f"transport is one of {', '.join(TRANSPORTS)}",
    )
    _first(
        table,
        table.dcqcn & (table.transport == TRANSPORTS.index("tcp")),
        "transport tcp has its own congestion control",
    )
    bad = np.flatnonzero((table.after < 0) | (table.after >= n))
    if bad.size:
        waiter = int(np.searchsorted(table.after_start, bad[0], side="right")) - 1
        raise ExperimentError(f"flow {table.name(waiter)}: after a row not in the table")
    width = int(count.max())
    ports = np.full((max(n_hosts, 1), max(width, 1)), -1, np.int64)
    for h, own_ports in enumerate(host_ports):
        ports[h, : len(own_ports)] = own_ports
    dep_start = np.zeros(n + 1, np.int32)
    np.cumsum(np.bincount(table.after, minlength=n), out=dep_start[1:])
    pairs, shifts = _pairs(table, seed, hosts)
    ect = np.array([(h.dcqcn or exp.dcqcn).ect for h in hosts] or [True], np.bool_)
    return CoreFlows(
        table,
        exp.packet_bytes,
        len(exp.switches),
        n_hosts,
        maps,
        ect,
        count,
        ports,
        pairs,
        shifts,
        dep_start,
    )


def dcqcn_sets(exp: Experiment) -> tuple[list[Dcqcn], list[int]]:
    """The distinct DCQCN sets (the experiment's first) and each host's index into them.

    >>> from labs.sim.model import Host
    >>> off = Dcqcn(reaction=False, notification=False)
    >>> exp = Experiment([], [Host("a"), Host("b", dcqcn=off), Host("c", dcqcn=off)], [])
    >>> sets, index = dcqcn_sets(exp)
    >>> len(sets), index
    (2, [0, 1, 1])
    """
    found = {exp.dcqcn: 0}
    index = [found.setdefault(h.dcqcn or exp.dcqcn, len(found)) for h in exp.hosts]
    if len(found) > MAX_DCQCN_SETS:
        raise ExperimentError(f"{len(found)} DCQCN sets: the core holds at most {MAX_DCQCN_SETS}")
    return list(found), index


def _check_times(exp: Experiment) -> None:
    """Periods the core divides by or repeats at must be positive (else it would spin)."""
    c, t = exp.checks, exp.transports
    positive = {
        "transports.rc_ack_every": t.rc_ack_every,
        "transports.tcp_ack_every": t.tcp_ack_every,
        "transports.dupack_threshold": t.dupack_threshold,
        "transports.tcp_rto_min": t.tcp_rto_min,
        "transports.tcp_rto_initial": t.tcp_rto_initial,
        "transports.tcp_initial_window": t.tcp_initial_window,
        "duration": exp.duration,
        "checks.interval": c.interval,
    }
    for host, d in [("", exp.dcqcn)] + [
        (f"host {h.name}: ", h.dcqcn) for h in exp.hosts if h.dcqcn
    ]:
        positive |= {
            f"{host}dcqcn.alpha_period": d.alpha_period,
            f"{host}dcqcn.timer": d.timer,
            f"{host}dcqcn.cnp_interval": d.cnp_interval,
            f"{host}dcqcn.byte_counter": d.byte_counter,
        }
    positive |= {
        f"pfc_storm {f.port}: interval": f.interval
        for f in exp.faults
        if isinstance(f, PfcStorm) and f.interval is not None
    }
    for name, value in positive.items():
        if not value > 0:
            raise ExperimentError(f"{name} must be positive, not {value}")
    if not 0 <= t.rc_timeout_exponent <= 31:
        raise ExperimentError("transports.rc_timeout_exponent must be 0-31 (IB's 5-bit timeout)")
    if not (t.tcp_rto_max >= max(t.tcp_rto_min, t.tcp_rto_initial) and 0 < t.dctcp_g <= 1):
        raise ExperimentError(
            "transports: tcp_rto_max >= tcp_rto_min and tcp_rto_initial, 0 < dctcp_g <= 1"
        )
    if exp.monitor.interval < 0 or c.stall < 0:
        raise ExperimentError("monitor.interval and checks.stall must not be negative")
    if not (0 <= exp.header_bytes <= 1024 and 0 <= exp.gap_bytes <= 1024):
        raise ExperimentError("header_bytes and gap_bytes must be 0-1024")


def build(exp: Experiment, seed: int) -> Built:
    """A configured core for `exp` (free it with native.library().sim_free); a port or route
    it cannot read is an ExperimentError."""
    try:
        return _build(exp, seed)
    except RoutingError as exc:
        raise ExperimentError(str(exc)) from None


def _build(exp: Experiment, seed: int) -> Built:
    lib = native.library()
    _check_times(exp)
    switches: dict[str, Switch] = {s.name: s for s in exp.switches}
    hosts: dict[str, Host] = {h.name: h for h in exp.hosts}
    names = list(switches) + list(hosts)
    if len(set(names)) != len(names):
        raise ExperimentError("node names must be unique")
    node_index = {n: i for i, n in enumerate(names)}
    own_ports: dict[str, list[str]] = {n: [] for n in names}
    link_of: dict[str, int] = {}
    for li, link in enumerate(exp.links):
        for end in (link.a, link.b):
            node = split_port(end)[0]
            if node not in node_index:
                raise ExperimentError(f"link {link.a} - {link.b}: unknown node {node!r}")
            if end in link_of:
                raise ExperimentError(f"port {end} is on two links")
            own_ports[node].append(end)
            link_of[end] = li
    ports = [p for n in names for p in own_ports[n]]
    if len(ports) >= MAX_PORTS:
        raise ExperimentError(f"{len(ports)} ports: the core indexes at most {MAX_PORTS - 1}")
    port_index = {p: i for i, p in enumerate(ports)}
    if len({f.name for f in exp.flows}) != len(exp.flows):
        raise ExperimentError("flow names must be unique")
    flows = all_flows(exp, own_ports)

    handle = lib.sim_new(
        len(names), len(ports), len(exp.links), len(flows), len(ports), len(hosts), seed
    )
    try:
        layout = _configure(exp, flows, seed, lib, handle, names, own_ports, link_of, port_index)
    except BaseException:
        lib.sim_free(handle)
        raise
    return Built(handle, layout)


def _configure(
    exp: Experiment,
    flows: FlowTable,
    seed: int,
    lib: ctypes.CDLL,
    handle: int,
    names: list[str],
    own_ports: dict[str, list[str]],
    link_of: dict[str, int],
    port_index: dict[str, int],
) -> Layout:
    """Pass everything but the sizes to the core; the names of what it indexes."""
    switches: dict[str, Switch] = {s.name: s for s in exp.switches}
    hosts: dict[str, Host] = {h.name: h for h in exp.hosts}
    node_index = {n: i for i, n in enumerate(names)}
    sets, host_set = dcqcn_sets(exp)
    for i, n in enumerate(names):
        pool = switches[n].buffer_bytes if n in switches else 0
        host_idx = i - len(switches) if n in hosts else -1
        dcq = host_set[host_idx] if host_idx >= 0 else 0
        lib.sim_set_node(handle, i, int(n in switches), host_idx, pool, dcq)
    frames = data_frames(exp, flows)
    mtu = frames[-1]
    lib.sim_set_wire(handle, exp.header_bytes, exp.gap_bytes)
    # ports with the same tables share a profile: a few instead of one per port, which keeps
    # what every hop reads in cache on large fabrics
    profiles: dict[tuple[tuple[float, ...], ...], int] = {}
    for li, link in enumerate(exp.links):
        if link.speed <= 0:
            raise ExperimentError(f"link {link.a} - {link.b}: speed must be positive")
        a, b = port_index[link.a], port_index[link.b]
        lib.sim_set_link_ports(handle, li, a, b)
        for me, peer, end in ((a, b, link.a), (b, a, link.b)):
            node = split_port(end)[0]
            qos = (
                switches[node].port_qos.get(split_port(end)[1], switches[node].qos)
                if node in switches
                else hosts[node].qos
            )
            cells = (
                Cells(switches[node].cell_bytes, switches[node].cell_descriptor)
                if node in switches
                else Cells()
            )
            key = _profile(qos, link.speed, link.propagation, mtu, cells, frames)
            maps, pg, q, other = key
            if key not in profiles:
                if len(profiles) == MAX_PROFILES:
                    raise ExperimentError(
                        f"port {end}: more than {MAX_PROFILES} distinct port QoS profiles"
                    )
                profiles[key] = len(profiles)
                lib.sim_set_profile(
                    handle,
                    profiles[key],
                    native.i32(maps),
                    native.f64(pg),
                    native.f64(q),
                    native.f64(other),
                )
            lib.sim_set_port(
                handle, me, node_index[node], peer, profiles[key], link.speed, link.propagation
            )

    rows = route_rows(
        forwarding(exp.switches, exp.hosts, exp.links), names, list(hosts), port_index
    )
    lib.sim_set_route_rows(handle, rows.n_dest, *native.rows(rows), len(rows.hops))

    core = core_flows(exp, flows, seed, [[port_index[p] for p in own_ports[h]] for h in hosts])
    core.load(lib, handle)
    lib.sim_keep_runs(handle, len(exp.flows))  # their final rate and alpha are reported
    host_ports = [[port_index[p] for p in own_ports[h]] for h in hosts]
    for made in exp.collectives:
        if isinstance(made, Ring):
            add_ring(lib, handle, exp, made, seed, host_ports)
        else:
            add_replay(lib, handle, exp, made, seed, host_ports)

    for i, d in enumerate(sets):
        lib.sim_set_dcqcn(handle, i, native.f64(_dcqcn_numbers(d)))

    t = exp.transports
    lib.sim_set_transport(
        handle,
        native.f64(
            [
                t.rc_ack_every,
                t.tcp_ack_every,
                t.dupack_threshold,
                t.rc_timeout,
                t.tcp_rto_min,
                t.tcp_rto_max,
                t.tcp_initial_window,
                t.dctcp_g,
                int(t.trace),
                t.tcp_rto_initial,
            ]
        ),
    )
    _faults(exp, lib, handle, port_index, link_of)
    switch_ports = [port_index[p] for n in switches for p in own_ports[n]]
    for name in exp.monitor.ports:
        if name not in port_index:
            raise ExperimentError(f"monitor: unknown port {name!r}")
    sampled = [port_index[p] for p in exp.monitor.ports] or switch_ports
    if exp.monitor.interval > 0:
        lib.sim_set_monitor(
            handle, exp.monitor.interval, native.i32(sampled), len(sampled), int(exp.monitor.flows)
        )
        lib.sim_set_max_samples(handle, max(exp.monitor.max_samples, 0))
    else:
        sampled = []
    c = exp.checks
    lib.sim_set_checks(
        handle, c.interval, int(c.deadlock), c.stall, int(c.stop_on_deadlock), c.pause_storm
    )
    return Layout(
        links=[(link.a, link.b) for link in exp.links],
        ports=[split_port(p) for p in port_index],
        flows=flows,
        sampled_ports=sampled,
        flow_series=exp.monitor.interval > 0 and exp.monitor.flows,
    )


def add_ring(
    lib: ctypes.CDLL,
    handle: int,
    exp: Experiment,
    ring: Ring,
    seed: int,
    host_ports: list[list[int]],
) -> None:
    """Hand a ring collective to the core (sim_add_collective): its shape, the ranks' names,
    NIC ports and ECMP key prefixes toward the next rank (`_entries`)."""
    n, table = len(ring.hosts), exp.table
    if table is None or n < 2 or ring.first_row < 0 or ring.first_row + ring.slots > len(table):
        raise ExperimentError(f"ring of phase {ring.phase}: its slots are not rows of the table")
    if int(ring.chunks.min()) < ring.qps or len(ring.chunks) != n:
        raise ExperimentError(f"ring of phase {ring.phase}: a chunk per rank, >= 1 byte per QP")
    hosts = ring.hosts.tolist()
    names = [exp.hosts[h].name for h in hosts]
    pairs = [(a, names[(r + 1) % n]) for r, a in enumerate(names)]
    chunks = np.ascontiguousarray(ring.chunks, np.int64)
    lib.sim_add_collective(
        handle,
        len(exp.flows) + ring.first_row,
        n,
        ring.qps,
        ring.n_steps,
        ring.iterations,
        ring.phase,
        float(table.start[ring.first_row]),
        float(table.rate[ring.first_row]),
        chunks.ctypes.data_as(native.PI64),
        *_entries(seed, pairs, [name.encode() for name in names], [host_ports[h] for h in hosts]),
    )


def _entries(
    seed: int, pairs: Sequence[tuple[str, str]], names: Sequence[bytes], ports: list[list[int]]
) -> tuple[Any, ...]:
    """What the core takes of a collective's ranks (a replay's rows), as its arguments: each
    one's ECMP key prefix (CRC-32 of `seed|src|dst|`, as `_pairs`), the names one after the
    other and where each begins, the NIC ports of each (CSR)."""
    prefixes = np.array(
        [zlib.crc32(f"{seed}|{a}|{b}|".encode()) for a, b in pairs], np.uint32
    ).view(np.int32)
    name_start = np.cumsum([0, *map(len, names)]).astype(np.int32)
    port_start = np.cumsum([0, *map(len, ports)]).astype(np.int32)
    flat = np.array([p for own in ports for p in own] or [0], np.int32)
    return (
        prefixes.ctypes.data_as(native.PI32),
        b"".join(names),
        name_start.ctypes.data_as(native.PI32),
        port_start.ctypes.data_as(native.PI32),
        flat.ctypes.data_as(native.PI32),
    )


def add_replay(
    lib: ctypes.CDLL,
    handle: int,
    exp: Experiment,
    replay: Replay,
    seed: int,
    host_ports: list[list[int]],
) -> None:
    """Hand a replayed schedule to the core (sim_add_replay): what each row waits for, the
    rows' names, ECMP key prefixes and their sources' NIC ports (`_entries`)."""
    n, table = replay.slots, exp.table
    if table is None or replay.first_row < 0 or replay.first_row + 2 * n > len(table):
        raise ExperimentError(f"phase {replay.phase}: two iterations' rows are not in the table")
    hosts = [h.name for h in exp.hosts]
    src, dst = replay.src.tolist(), replay.dst.tolist()
    deps = np.ascontiguousarray(replay.deps, np.int32)
    woken = np.ascontiguousarray(replay.woken if len(replay.woken) else [0], np.int32)
    lib.sim_add_replay(
        handle,
        len(exp.flows) + replay.first_row,
        n,
        replay.iterations,
        replay.phase,
        float(table.start[replay.first_row]),
        float(table.rate[replay.first_row]),
        deps.ctypes.data_as(native.PI32),
        woken.ctypes.data_as(native.PI32),
        len(replay.woken),
        *_entries(
            seed,
            [(hosts[a], hosts[b]) for a, b in zip(src, dst, strict=True)],
            replay.names,
            [host_ports[h] for h in src],
        ),
    )


def _dcqcn_numbers(d: Dcqcn) -> list[float]:
    """A DCQCN set as sim_set_dcqcn takes it."""
    return [
        d.g,
        d.alpha_period,
        d.timer,
        d.byte_counter,
        d.f,
        d.r_ai,
        d.r_hai,
        d.min_rate,
        d.cnp_interval,
        d.initial_alpha,
        d.cnp_dscp,
        d.cnp_priority,
        int(d.cnp_mode == "window"),
        int(d.clamp_after_increase),
        int(d.reaction),
        int(d.notification),
    ]


def _faults(
    exp: Experiment,
    lib: ctypes.CDLL,
    handle: int,
    port_index: dict[str, int],
    link_of: dict[str, int],
) -> None:
    speeds = {end: link.speed for link in exp.links for end in (link.a, link.b)}
    losses = [f.port for f in exp.faults if isinstance(f, PacketLoss)]
    if len(set(losses)) != len(losses):
        raise ExperimentError("loss: one loss fault per port")
    for fault in exp.faults:
        if fault.port not in port_index:
            raise ExperimentError(f"fault: unknown port {fault.port!r}")
        if isinstance(fault, LinkFault):
            lib.sim_add_link_event(handle, link_of[fault.port], fault.down, 0)
            if fault.up is not None:
                lib.sim_add_link_event(handle, link_of[fault.port], fault.up, 1)
        elif isinstance(fault, PfcStorm):
            pause = fault.quanta * 512 / speeds[fault.port]
            interval = fault.interval if fault.interval is not None else pause / 2
            mask = sum(1 << p for p in set(fault.priorities))
            lib.sim_add_storm(
                handle, port_index[fault.port], mask, fault.quanta, fault.start, fault.end, interval
            )
        elif isinstance(fault, TxOff):
            if not 0 <= fault.start <= fault.end:
                raise ExperimentError(f"tx_off {fault.port}: 0 <= start <= end")
            # a storm entry of negative quanta: the port's transmitter held, no frames
            lib.sim_add_storm(handle, port_index[fault.port], 0, -1, fault.start, fault.end, 0.0)
        elif isinstance(fault, PacketLoss):
            if not (0 <= fault.probability <= 1 and fault.count >= 0):
                raise ExperimentError(f"loss {fault.port}: probability 0-1, count >= 0")
            end = NEVER if fault.end is None else fault.end
            lib.sim_set_loss(
                handle, port_index[fault.port], fault.start, end, fault.probability, fault.count
            )
