"""Turn an Experiment into a configured C simulator: names become indices, QoS profiles
become numeric tables, routes become next-hop lists."""

from __future__ import annotations

import ctypes
import zlib
from dataclasses import dataclass

from labs.sim import native
from labs.sim.model import (
    NPRIO,
    Experiment,
    Flow,
    Host,
    LinkFault,
    PacketLoss,
    PfcStorm,
    QosProfile,
    Switch,
)
from labs.sim.routing import forwarding, split_port
from twin.design.headroom import headroom_bytes
from twin.errors import TwinError

NEVER = 1e30
"""A time past any run (the core treats >= 9e6 s as never)."""
MAX_PORTS = 2**23
"""A packet holds its ingress port in 24 signed bits (csrc/sim.h)."""
TRANSPORTS = ("open", "rc", "tcp")
"""Flow.transport values, in the core's order."""


class ExperimentError(TwinError, ValueError):
    """An experiment that names unknown nodes, ports or flows, or has impossible values."""


@dataclass(frozen=True)
class Layout:
    """Names of the indices the core uses, to read its outputs back."""

    links: list[tuple[str, str]]
    ports: list[tuple[str, str]]
    flows: list[str]
    sampled_ports: list[int]
    flow_series: bool


@dataclass
class Built:
    handle: int
    layout: Layout


def _mtu(exp: Experiment) -> int:
    """The largest data frame (payload and headers)."""
    return max([exp.packet_bytes, *(f.packet_bytes or 0 for f in exp.flows)]) + exp.header_bytes


def profile_arrays(
    qos: QosProfile, speed: float, propagation: float, mtu: int
) -> tuple[list[int], list[float], list[float], list[float]]:
    """The numeric tables of one port's profile, lossless headroom sized when not given."""
    if not all(0 <= d < 64 and 0 <= tc < NPRIO for d, tc in qos.dscp_to_tc.items()):
        raise ExperimentError("dscp_to_tc: DSCPs are 0-63, traffic classes 0-7")
    for name, table in (("tc_to_queue", qos.tc_to_queue), ("tc_to_pg", qos.tc_to_pg)):
        if len(table) != NPRIO or not all(0 <= v < NPRIO for v in table):
            raise ExperimentError(f"{name}: 8 values of 0-7")
    if not all(0 <= tc < NPRIO for tc in qos.lossless):
        raise ExperimentError("lossless: priorities are 0-7")
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
            headroom = auto if index in lossless_pgs else 0
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
    return maps, pg, q, other


def flow_hash(seed: int, src: str, dst: str, sport: int) -> int:
    """The ECMP key of a flow's 5-tuple (UDP to 4791), salted by the seed."""
    return zlib.crc32(f"{seed}|{src}|{dst}|{sport}|4791|17".encode())


def _flow_ints(
    exp: Experiment,
    flow: Flow,
    seed: int,
    node_index: dict[str, int],
    port_index: dict[str, int],
    host_ports: dict[str, list[str]],
    hosts: dict[str, Host],
) -> list[int]:
    for end in (flow.src, flow.dst):
        if end not in hosts:
            raise ExperimentError(f"flow {flow.name}: {end!r} is not a host")
    if not host_ports.get(flow.src):
        raise ExperimentError(f"flow {flow.name}: host {flow.src} has no link")
    sport = 0xC000 | (zlib.crc32(flow.name.encode()) & 0x3FFF)
    key = flow_hash(seed, flow.src, flow.dst, sport)
    ports = host_ports[flow.src]
    port = flow.src_port or ports[key % len(ports)]
    if port not in port_index or split_port(port)[0] != flow.src:
        raise ExperimentError(f"flow {flow.name}: {port!r} is not a port of {flow.src}")
    size = flow.packet_bytes or exp.packet_bytes
    if not (0 <= flow.dscp < 64 and 0 < flow.ttl < 256 and 64 <= size <= 65535):
        raise ExperimentError(f"flow {flow.name}: dscp 0-63, ttl 1-255, packet_bytes 64-65535")
    prio = (
        flow.priority
        if flow.priority is not None
        else hosts[flow.src].qos.dscp_to_tc.get(flow.dscp, 0)
    )
    if not 0 <= prio < NPRIO:
        raise ExperimentError(f"flow {flow.name}: priority {prio} is not 0-7")
    dcqcn = flow.cc == "dcqcn"
    if flow.transport not in TRANSPORTS:
        raise ExperimentError(f"flow {flow.name}: transport is one of {', '.join(TRANSPORTS)}")
    if dcqcn and flow.transport == "tcp":
        raise ExperimentError(f"flow {flow.name}: transport tcp has its own congestion control")
    ect = dcqcn if flow.ecn_capable is None else flow.ecn_capable
    return [
        node_index[flow.src],
        node_index[flow.dst],
        port_index[port],
        flow.dscp,
        prio,
        int(dcqcn),
        int(ect),
        size,
        flow.ttl,
        len(set(flow.after)),
        key,
        TRANSPORTS.index(flow.transport),
    ]


def _check_times(exp: Experiment) -> None:
    """Periods the core divides by or repeats at must be positive (else it would spin)."""
    d, c, t = exp.dcqcn, exp.checks, exp.transports
    positive = {
        "transports.rc_ack_every": t.rc_ack_every,
        "transports.tcp_ack_every": t.tcp_ack_every,
        "transports.dupack_threshold": t.dupack_threshold,
        "transports.tcp_rto_min": t.tcp_rto_min,
        "transports.tcp_rto_initial": t.tcp_rto_initial,
        "transports.tcp_initial_window": t.tcp_initial_window,
        "duration": exp.duration,
        "dcqcn.alpha_period": d.alpha_period,
        "dcqcn.timer": d.timer,
        "dcqcn.cnp_interval": d.cnp_interval,
        "dcqcn.byte_counter": d.byte_counter,
        "checks.interval": c.interval,
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
    """A configured core for `exp` (free it with native.library().sim_free)."""
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

    handle = lib.sim_new(
        len(names), len(ports), len(exp.links), len(exp.flows), len(ports), len(hosts), seed
    )
    try:
        layout = _configure(exp, seed, lib, handle, names, own_ports, link_of, port_index)
    except BaseException:
        lib.sim_free(handle)
        raise
    return Built(handle, layout)


def _configure(
    exp: Experiment,
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
    flow_index = {f.name: i for i, f in enumerate(exp.flows)}
    for i, n in enumerate(names):
        pool = switches[n].buffer_bytes if n in switches else 0
        host_idx = i - len(switches) if n in hosts else -1
        lib.sim_set_node(handle, i, int(n in switches), host_idx, pool)
    mtu = _mtu(exp)
    lib.sim_set_wire(handle, exp.header_bytes, exp.gap_bytes)
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
            maps, pg, q, other = profile_arrays(qos, link.speed, link.propagation, mtu)
            lib.sim_set_profile(
                handle, me, native.i32(maps), native.f64(pg), native.f64(q), native.f64(other)
            )
            lib.sim_set_port(handle, me, node_index[node], peer, me, link.speed, link.propagation)

    table = forwarding(exp.switches, exp.hosts, exp.links)
    host_order = list(hosts)
    rt_start, rt_nh = [0], []
    for n in names:
        for h in host_order:
            rt_nh += [port_index[p] for p in table.get(n, {}).get(h, [])]
            rt_start.append(len(rt_nh))
    lib.sim_set_routes(handle, native.i32(rt_start), native.i32(rt_nh), len(rt_nh))

    host_ports = {h: own_ports[h] for h in hosts}
    dependents: list[list[int]] = [[] for _ in exp.flows]
    flow_ints: list[int] = []
    flow_nums: list[float] = []
    for fi, flow in enumerate(exp.flows):
        for name in sorted(set(flow.after)):
            if name not in flow_index:
                raise ExperimentError(f"flow {flow.name}: after {name!r}, which is not a flow")
            dependents[flow_index[name]].append(fi)
        flow_ints += _flow_ints(exp, flow, seed, node_index, port_index, host_ports, hosts)
        size = -1 if flow.size is None else flow.size
        stop = NEVER if flow.stop is None else flow.stop
        flow_nums += [size, flow.rate or 0.0, flow.start, stop, flow.after_delay]
    lib.sim_set_flows(handle, native.i64(flow_ints), native.f64(flow_nums))
    dep_start = [0]
    for waiting in dependents:
        dep_start.append(dep_start[-1] + len(waiting))
    lib.sim_set_dependents(
        handle, native.i32(dep_start), native.i32([f for w in dependents for f in w])
    )

    d = exp.dcqcn
    lib.sim_set_dcqcn(
        handle,
        native.f64(
            [
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
            ]
        ),
    )

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
    else:
        sampled = []
    c = exp.checks
    lib.sim_set_checks(
        handle, c.interval, int(c.deadlock), c.stall, int(c.stop_on_deadlock), c.pause_storm
    )
    return Layout(
        links=[(link.a, link.b) for link in exp.links],
        ports=[split_port(p) for p in port_index],
        flows=[f.name for f in exp.flows],
        sampled_ports=sampled,
        flow_series=exp.monitor.interval > 0 and exp.monitor.flows,
    )


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
        elif isinstance(fault, PacketLoss):
            if not (0 <= fault.probability <= 1 and fault.count >= 0):
                raise ExperimentError(f"loss {fault.port}: probability 0-1, count >= 0")
            end = NEVER if fault.end is None else fault.end
            lib.sim_set_loss(
                handle, port_index[fault.port], fault.start, end, fault.probability, fault.count
            )


def sample_width(layout: Layout) -> int:
    return len(layout.sampled_ports) * 2 * NPRIO + (len(layout.flows) if layout.flow_series else 0)
