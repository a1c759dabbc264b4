"""A lab directory as the simulator's network: switches, NICs, links and routes read from the
configs under test (config_db.json, host.json), never from the intent alone.

Per switch port (SONiC CONFIG_DB):

- classification: DSCP_TO_TC_MAP, TC_TO_QUEUE_MAP, TC_TO_PRIORITY_GROUP_MAP (as PORT_QOS_MAP
  names them); a TC is lossless when PORT_QOS_MAP's `pfc_enable` lists it and the port's
  MAP_PFC_PRIORITY_TO_QUEUE and PFC_PRIORITY_TO_PRIORITY_GROUP_MAP (when given) send its
  pauses to the TC's own queue and PG; otherwise its pauses would stop another queue, and it
  is simulated as lossy;
- buffers: the ingress pool of BUFFER_POOL (the one lossless profiles draw on) is the
  switch's shared pool; BUFFER_PG's profile gives a PG its headroom (`xoff`), reserved bytes
  (`size` - `xoff`), XON floor (`xon`) and offset (`xon_offset`; absent, the model's
  default, as SAI leaves it to the ASIC) and threshold (`dynamic_th` n: alpha 2^n, or
  `static_th`); a lossless PG without a profile has no headroom; a lossy queue's
  BUFFER_QUEUE profile caps it (`static_th`, or its `size` and alpha/(1+alpha) of its pool);
- scheduling and marking: QUEUE's SCHEDULER (STRICT or DWRR weight) and WRED_PROFILE (green
  thresholds and drop probability; `ecn` ecn_green/ecn_all marks, else WRED drops lossy
  packets);
- PFC_WD per port: detection and restoration times, action drop or forward (alert: none);
- the link: PORT speed, CABLE_LENGTH (5 ns/m), and admin_status (down from the start);
- the ASIC (`asic`): DEVICE_METADATA's `hwsku` looked up in twin/platforms/asics.yml gives
  the buffer cell and descriptor every frame is counted in, and where ECN is decided.

Per server (host.json): its NICs and their speeds, the DSCP its RDMA stack marks (priority
`pfc_priority`), the CNP DSCP (priority 6), and its own DCQCN: the parameters of
`rdma.dcqcn`, `rdma.ecn` (off: as a sender it ignores CNPs, as a receiver it sends none) and
the ECN bits of `rdma.traffic_class` (Not-ECT: switches cannot mark its RoCE packets).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Interface
from typing import Any

from labs.sim.model import (
    Dcqcn,
    Host,
    Link,
    LinkFault,
    PgParams,
    QosProfile,
    QueueParams,
    Switch,
    Watchdog,
)
from twin.configs.host import dscp, either, real, section, whole
from twin.configs.qos import by_port, pfc_enabled, qos_map
from twin.design.asic import asic
from twin.lab.directory import Lab
from twin.model.fib import Fib, Hops, Lpm
from twin.model.wiring import Wiring, links
from twin.render.config_db import ConfigDb
from twin.render.host_conf import ECT0

CNP_PRIORITY = 6
DEFAULT_CABLE_M = 5.0


@dataclass
class Network:
    """The simulator's view of a lab: nodes (each NIC with its DCQCN), cables, the default
    DCQCN set (the first server's) and the admin-down ports."""

    switches: list[Switch]
    hosts: list[Host]
    links: list[Link]
    dcqcn: Dcqcn
    down: list[LinkFault] = field(default_factory=list)
    addresses: dict[str, IPv4Address] = field(default_factory=dict)


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(str(value).rstrip("m"))
    except ValueError:
        return default


def _alpha(profile: Mapping[str, Any]) -> float:
    n = _int(profile.get("dynamic_th"), 0)
    return math.inf if n >= 7 else 2.0**n


def _profile(db: ConfigDb, entry: Mapping[str, Any] | None) -> dict[str, Any]:
    name = (entry or {}).get("profile", "")
    found: dict[str, Any] = db.get("BUFFER_PROFILE", {}).get(str(name).strip("[]"), {})
    return found


def _lossless(db: ConfigDb, port: str, tc_to_queue: list[int], tc_to_pg: list[int]) -> set[int]:
    to_queue = qos_map(db, port, "pfc_to_queue_map")
    to_pg = qos_map(db, port, "pfc_to_pg_map")
    return {
        p
        for p in pfc_enabled(db, port)
        if 0 <= p < 8
        and (to_queue is None or to_queue.get(p) == tc_to_queue[p])
        and (to_pg is None or to_pg.get(p) == tc_to_pg[p])
    }


def _pgs(
    db: ConfigDb, entries: dict[int, dict[str, Any]], lossless_pgs: set[int]
) -> dict[int, PgParams]:
    pgs: dict[int, PgParams] = {}
    for pg in range(8):
        prof = _profile(db, entries.get(pg))
        xoff = _int(prof.get("xoff"))
        headroom = xoff if pg in lossless_pgs else 0
        static = prof.get("static_th")
        pgs[pg] = PgParams(
            reserved=max(0, _int(prof.get("size")) - xoff),
            headroom=headroom,
            xon=_int(prof.get("xon"), 0),
            xon_offset=_int(prof.get("xon_offset"), PgParams.xon_offset),
            alpha=_alpha(prof),
            static_threshold=None if static is None else _int(static),
        )
    return pgs


def _queues(
    db: ConfigDb,
    queue: dict[int, dict[str, Any]],
    buffers: dict[int, dict[str, Any]],
    lossless_queues: set[int],
) -> dict[int, QueueParams]:
    pools = db.get("BUFFER_POOL", {})
    out: dict[int, QueueParams] = {}
    for q in range(8):
        entry = queue.get(q, {})
        sched = db.get("SCHEDULER", {}).get(str(entry.get("scheduler", "")).strip("[]"), {})
        wred = db.get("WRED_PROFILE", {}).get(str(entry.get("wred_profile", "")).strip("[]"), {})
        green = str(wred.get("wred_green_enable", "false")) == "true"
        ecn = green and wred.get("ecn") in ("ecn_green", "ecn_all")
        prof = _profile(db, buffers.get(q))
        limit = 0
        if q not in lossless_queues and prof:
            if "static_th" in prof:
                limit = _int(prof["static_th"])
            else:
                alpha = _alpha(prof)
                pool = _int(pools.get(str(prof.get("pool", "")).strip("[]"), {}).get("size"))
                share = pool if math.isinf(alpha) else int(pool * alpha / (1 + alpha))
                limit = _int(prof.get("size")) + share  # its reserved size, then its share
        kmin, kmax = _int(wred.get("green_min_threshold")), _int(wred.get("green_max_threshold"))
        # SAI's thresholds default to 0 and an ASIC refuses a profile whose maximum is below
        # its minimum: orchagent then sets none, and the queue has no WRED (docs/simulator.md)
        green = green and kmax >= kmin
        out[q] = QueueParams(
            strict=sched.get("type") == "STRICT",
            weight=max(1, _int(sched.get("weight"), 1)),
            ecn=ecn and green,
            wred_drop=green and not ecn,
            kmin=kmin if green else 0,
            kmax=kmax if green else 0,
            pmax=_int(wred.get("green_drop_probability")) / 100 if green else 0.0,
            max_bytes=limit,
        )
    return out


def _watchdog(db: ConfigDb, port: str) -> Watchdog | None:
    wd = db.get("PFC_WD", {}).get(port)
    if not wd or wd.get("action", "drop") not in ("drop", "forward"):
        return None
    return Watchdog(
        detection=_int(wd.get("detection_time"), 200) / 1000,
        restoration=_int(wd.get("restoration_time"), 200) / 1000,
        action="forward" if wd.get("action") == "forward" else "drop",
    )


PerPort = dict[str, dict[str, dict[int, dict[str, Any]]]]
"""BUFFER_PG, QUEUE and BUFFER_QUEUE of a switch by port and index (`per_port`)."""


def per_port(db: ConfigDb) -> PerPort:
    """A switch's per-port tables, read once."""
    return {t: by_port(db, t) for t in ("BUFFER_PG", "QUEUE", "BUFFER_QUEUE")}


def port_profile(db: ConfigDb, port: str, tables: PerPort | None = None) -> QosProfile:
    """The QoS a switch port's configuration gives it."""
    tables = tables or per_port(db)
    dscp = qos_map(db, port, "dscp_to_tc_map") or {}
    to_queue = qos_map(db, port, "tc_to_queue_map") or {}
    to_pg = qos_map(db, port, "tc_to_pg_map") or {}
    tc_to_queue = [to_queue.get(tc, tc) for tc in range(8)]
    tc_to_pg = [to_pg.get(tc, 0) for tc in range(8)]
    lossless = _lossless(db, port, tc_to_queue, tc_to_pg)
    return QosProfile(
        dscp_to_tc={d: tc for d, tc in dscp.items() if 0 <= d < 64 and 0 <= tc < 8},
        tc_to_queue=tuple(tc_to_queue),
        tc_to_pg=tuple(tc_to_pg),
        lossless=frozenset(lossless),
        pgs=_pgs(db, tables["BUFFER_PG"].get(port, {}), {tc_to_pg[tc] for tc in lossless}),
        queues=_queues(
            db,
            tables["QUEUE"].get(port, {}),
            tables["BUFFER_QUEUE"].get(port, {}),
            {tc_to_queue[tc] for tc in lossless},
        ),
        watchdog=_watchdog(db, port),
    )


def port_profiles(db: ConfigDb) -> dict[str, QosProfile]:
    """The QoS of every port of a switch; ports configured alike share one profile (it is
    worked out once per distinct set of the port's own entries)."""
    tables = per_port(db)
    own: list[Mapping[str, Any]] = [
        db.get("PORT_QOS_MAP", {}),
        db.get("PFC_WD", {}),
        *tables.values(),
    ]
    found: dict[str, QosProfile] = {}
    out: dict[str, QosProfile] = {}
    for port in db.get("PORT", {}):
        key = repr([t.get(port) for t in own])
        if key not in found:
            found[key] = port_profile(db, port, tables)
        out[port] = found[key]
    return out


def pool_bytes(db: ConfigDb) -> int:
    """The shared ingress pool: the one lossless PG profiles draw on, else the first ingress."""
    pools = db.get("BUFFER_POOL", {})
    ingress = [n for n, p in pools.items() if p.get("type") == "ingress"]
    used = {
        str(p.get("pool", "")).strip("[]")
        for p in db.get("BUFFER_PROFILE", {}).values()
        if "xoff" in p
    }
    chosen = next((n for n in ingress if n in used), ingress[0] if ingress else None)
    return _int(pools[chosen].get("size")) if chosen else 32_000_000


def host_profile(host: Mapping[str, Any]) -> QosProfile:
    """A NIC's priorities: its RDMA DSCP on `pfc_priority`, CNPs on 6, the rest on 0."""
    rdma = section(host, "rdma")
    dscp_to_tc = {either(dscp(rdma, "cnp_dscp"), 48): CNP_PRIORITY}
    roce = dscp(rdma, "dscp")
    if roce is not None:
        dscp_to_tc[roce] = either(whole(rdma.get("pfc_priority"), 0, 7), 3)
    return QosProfile(dscp_to_tc=dscp_to_tc, watchdog=None)


def dcqcn(host: Mapping[str, Any]) -> Dcqcn:
    """A host file's DCQCN parameters and ECN settings (the engine's defaults where it has
    none, or one its key cannot hold: `twin.configs.host`).

    >>> off = dcqcn({"rdma": {"ecn": False, "traffic_class": 104}})
    >>> off.reaction, off.notification, off.ect
    (False, False, False)
    >>> dcqcn({"rdma": {"ecn": "no", "dcqcn": {"g": "x"}}}).g == Dcqcn().g
    True
    """
    rdma = section(host, "rdma")
    d = section(rdma, "dcqcn")
    base = Dcqcn()
    ecn = rdma.get("ecn") is not False
    return Dcqcn(
        g=real(d.get("g"), base.g),
        alpha_period=real(d.get("alpha_period_us"), base.alpha_period * 1e6) * 1e-6,
        timer=real(d.get("timer_us"), base.timer * 1e6) * 1e-6,
        byte_counter=either(whole(d.get("byte_counter"), 1, 2**63), base.byte_counter),
        f=either(whole(d.get("fast_recovery_steps"), 0, 64), base.f),
        r_ai=real(d.get("r_ai_mbps"), base.r_ai / 1e6) * 1e6,
        r_hai=real(d.get("r_hai_mbps"), base.r_hai / 1e6) * 1e6,
        min_rate=real(d.get("min_rate_mbps"), base.min_rate / 1e6) * 1e6,
        cnp_interval=real(d.get("cnp_interval_us"), base.cnp_interval * 1e6) * 1e-6,
        initial_alpha=real(d.get("initial_alpha"), base.initial_alpha),
        cnp_dscp=either(dscp(rdma, "cnp_dscp"), base.cnp_dscp),
        cnp_priority=CNP_PRIORITY,
        reaction=ecn,
        notification=ecn,
        ect=(either(whole(rdma.get("traffic_class"), 0, 255), ECT0) & 3) in (1, 2),
    )


def _cable_m(db: ConfigDb, port: str) -> float | None:
    for lengths in db.get("CABLE_LENGTH", {}).values():
        if port in lengths:
            return float(_int(lengths[port], int(DEFAULT_CABLE_M)))
    return None


def _switch(name: str, db: ConfigDb) -> Switch:
    """A switch as its configs and its ASIC make it."""
    chip = asic(db)
    profiles = port_profiles(db)
    distinct = {id(q): q for q in profiles.values()}  # ports configured alike share one
    marked = {i: dataclasses.replace(q, ecn_at=chip.ecn_at) for i, q in distinct.items()}
    ports = {p: marked[id(q)] for p, q in profiles.items()}
    return Switch(
        name=name,
        buffer_bytes=pool_bytes(db),
        port_qos=ports,
        cell_bytes=chip.cell_bytes,
        cell_descriptor=chip.descriptor,
    )


def network(lab: Lab) -> Network:
    """The lab's switches, NICs and cables as the simulator models them."""
    dbs = {s: lab.config_db(s) for s in lab.switches()}
    hosts = {h: lab.host(h) for h in lab.nodes("server")}
    switches = [_switch(s, db) for s, db in dbs.items()]
    # NICs with equal profiles share one (its repr holds every field): the core's build works
    # out its tables once, not once a server
    alike: dict[str, QosProfile] = {}
    profiles = {h: host_profile(data) for h, data in hosts.items()}
    for h, q in profiles.items():
        profiles[h] = alike.setdefault(repr(q), q)
    nics = [
        Host(
            name=h,
            address=str(IPv4Interface(data["address"]).ip),
            qos=profiles[h],
            dcqcn=dcqcn(data),
        )
        for h, data in hosts.items()
    ]
    cables: list[Link] = []
    down: list[LinkFault] = []
    for a, a_port, b, b_port in links(lab):
        speeds, lengths = [], []
        for node, port in ((a, a_port), (b, b_port)):
            if node in dbs:
                attrs = dbs[node].get("PORT", {}).get(port, {})
                speeds.append(_int(attrs.get("speed"), 0) * 1e6)
                lengths.append(_cable_m(dbs[node], port))
                if attrs.get("admin_status", "down") != "up":
                    down.append(LinkFault(f"{node}:{port}", 0.0))
            else:
                ifaces = hosts[node].get("interfaces", [])
                nic: dict[str, Any] = next((i for i in ifaces if i["name"] == port), {})
                speeds.append(real(nic.get("speed"), 0) * 1e6)
        speed = min((s for s in speeds if s > 0), default=100e9)
        length = next((m for m in lengths if m is not None), DEFAULT_CABLE_M)
        cables.append(Link(f"{a}:{a_port}", f"{b}:{b_port}", speed, length_m=length))
    first = next(iter(hosts.values()), {})
    return Network(
        switches=switches,
        hosts=nics,
        links=cables,
        dcqcn=dcqcn(first),
        down=down,
        addresses={h.name: IPv4Address(h.address) for h in nics if h.address},
    )


def routes(
    wiring: Wiring,
    fib: Fib,
    addresses: Mapping[str, IPv4Address],
    before: tuple[Fib, Mapping[str, Mapping[str, Sequence[str]]]] | None = None,
) -> dict[str, dict[str, Sequence[str]]]:
    """Per switch, per server: the physical egress ports (`node:port`) its FIB sends the
    server's address out of (a PortChannel's members cabled toward the next hop); with
    `before` (a FIB and its table), a switch whose routes did not change keeps its row. Each
    prefix length's routes are matched against the servers' addresses at once (a switch's
    longest match per server, without a lookup per server)."""
    numbers = {host: int(address) for host, address in addresses.items()}
    hosts_at: dict[int, dict[int, list[str]]] = {}  # shift -> address >> shift -> servers

    def under(shift: int) -> dict[int, list[str]]:
        if shift not in hosts_at:
            found: dict[int, list[str]] = {}
            for host, number in numbers.items():
                found.setdefault(number >> shift, []).append(host)
            hosts_at[shift] = found
        return hosts_at[shift]

    table: dict[str, dict[str, Sequence[str]]] = {}
    for switch in wiring.routers:
        own = fib.get(switch, {})
        if before is not None and switch in before[1] and before[0].get(switch, {}) == own:
            table[switch] = dict(before[1][switch])
            continue
        lpm = Lpm(own)
        matched: dict[str, Hops] = {}
        for shift in lpm.shifts:  # the longest prefixes first: the first match wins
            routes_at, servers = lpm.tables[shift], under(shift)
            for key in routes_at.keys() & servers.keys():
                for host in servers[key]:
                    matched.setdefault(host, routes_at[key])
        egress: dict[Hops | None, list[str]] = {}  # most servers share their next hops
        out: dict[str, Sequence[str]] = {}
        for host in numbers:
            hops = matched.get(host)
            if hops not in egress:
                egress[hops] = _egress(wiring, switch, hops or ())
            out[host] = egress[hops]
        table[switch] = out
    return table


def _egress(wiring: Wiring, switch: str, hops: Hops) -> list[str]:
    """The physical ports (`node:port`) of a switch that lead to these next hops."""
    ports: list[str] = []
    for hop in hops:
        for member in wiring.physical(switch, hop.port):
            peer = wiring.cable.get((switch, member))
            if peer is not None and peer[0] == hop.node:
                ports.append(f"{switch}:{member}")
    return list(dict.fromkeys(ports))
