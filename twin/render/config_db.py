"""Render each switch's SONiC `config_db.json` from the design.

Tables follow SONiC's CONFIG_DB conventions: string values, plain-name references, one key per
port for QoS and buffer tables. Routed single links are INTERFACE entries; bundled links are
PORTCHANNEL + PORTCHANNEL_INTERFACE. A leaf of an MLAG pair has the peer-link bundle
(PortChannel100) carrying the keepalive VLAN 4094 and the server VLAN, one single-member
PortChannel per dual-homed server, MCLAG_DOMAIN/MCLAG_INTERFACE and a unique SVI address.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from twin.design import headroom
from twin.design.asic import sku_asic
from twin.design.graph import (
    PEER_LINK_BUNDLE,
    Design,
    Port,
    l3_interfaces,
    platform,
    port_name,
    ports_of,
)
from twin.intent.fabric import Fabric

Table = dict[str, dict[str, Any]]
ConfigDb = dict[str, Table]

MAP = "RDMA"
QOS_MAPS = {
    "dscp_to_tc_map": "DSCP_TO_TC_MAP",
    "tc_to_pg_map": "TC_TO_PRIORITY_GROUP_MAP",
    "tc_to_queue_map": "TC_TO_QUEUE_MAP",
    "pfc_to_queue_map": "MAP_PFC_PRIORITY_TO_QUEUE",
    "pfc_to_pg_map": "PFC_PRIORITY_TO_PRIORITY_GROUP_MAP",
}
"""The table of the map each PORT_QOS_MAP field names (maps of whole numbers to whole numbers)."""
KEEPALIVE_VLAN = 4094
DEVICE_TYPE = {
    "leaf": "BackEndToRRouter",
    "spine": "BackEndLeafRouter",
    "superspine": "SpineRouter",
}
RADIX = {"leaf": "leaves", "spine": "spines", "superspine": "superspines"}


def _mac(number: int) -> str:
    """A switch's system MAC from its number (`Design.number`: unique, and kept by a lab
    grown from another)."""
    return "52:54:00:{:02x}:{:02x}:{:02x}".format(*(number + 1).to_bytes(3, "big"))


def _ports_table(fabric: Fabric, role: str, used: dict[str, Port]) -> Table:
    layer = getattr(fabric, RADIX[role])
    lanes = platform()["lanes_per_speed"][layer.speed]
    table: Table = {}
    for i in range(layer.ports):
        name = port_name(i, layer.speed)
        port = used.get(name)
        table[name] = {
            "alias": f"etp{i + 1}",
            "index": str(i + 1),
            "lanes": ",".join(str(i * lanes + k) for k in range(lanes)),
            "speed": str(port.speed if port else layer.speed),
            "mtu": str(fabric.mtu.switch),
            "fec": "rs",
            "admin_status": "up" if port else "down",
        }
        if port:
            table[name]["description"] = f"{port.peer}:{port.peer_port}"
    return table


def _routing(d: Design, node: str, ports: list[Port], db: ConfigDb) -> None:
    f = d.fabric
    attrs = d.graph.nodes[node]
    db["LOOPBACK_INTERFACE"] = {"Loopback0": {}, f"Loopback0|{attrs['loopback']}": {}}
    interface: Table = {}
    portchannel: Table = {}
    members: Table = {}
    pc_interface: Table = {}
    neighbors: Table = {}
    for name, (ip, link_ports) in l3_interfaces(ports).items():
        if name.startswith("PortChannel"):
            portchannel[name] = {
                "admin_status": "up",
                "mtu": str(f.mtu.switch),
                "min_links": "1",
                "fast_rate": "true",
                "lacp_key": "auto",
            }
            members.update({f"{name}|{p.name}": {} for p in link_ports})
            pc_interface.update({name: {}, f"{name}|{ip}": {}})
        else:
            interface.update({name: {}, f"{name}|{ip}": {}})
        peer = link_ports[0]
        neighbors[str(peer.peer_ip).split("/")[0]] = {
            "asn": str(d.graph.nodes[peer.peer]["asn"]),
            "name": peer.peer,
            "local_addr": ip.split("/")[0],
            "holdtime": str(f.bgp.holdtime),
            "keepalive": str(f.bgp.keepalive),
            "admin_status": "up",
        }
    db["INTERFACE"] = interface
    db["PORTCHANNEL"] = portchannel
    db["PORTCHANNEL_MEMBER"] = members
    db["PORTCHANNEL_INTERFACE"] = pc_interface
    db["BGP_NEIGHBOR"] = neighbors


def _mlag(d: Design, node: str, ports: list[Port], db: ConfigDb) -> None:
    """Server VLAN, and for an MLAG pair the peer-link, server bundles and MCLAG tables."""
    f = d.fabric
    attrs = d.graph.nodes[node]
    vlan = f"Vlan{attrs['vlan']}"
    mtu = str(f.mtu.switch)
    db["VLAN"] = {vlan: {"vlanid": str(attrs["vlan"]), "mtu": mtu, "admin_status": "up"}}
    db["VLAN_INTERFACE"] = {vlan: {}, f"{vlan}|{attrs['svi']}": {}}
    vlan_members: Table = {}
    server_ports = [p for p in ports if p.kind == "server"]
    if attrs["mlag_peer"] is None:
        vlan_members.update(
            {f"{vlan}|{p.name}": {"tagging_mode": "untagged"} for p in server_ports}
        )
        db["VLAN_MEMBER"] = vlan_members
        return
    keepalive = f"Vlan{KEEPALIVE_VLAN}"
    peer_ports = [p for p in ports if p.kind == "peerlink"]
    source, peer = peer_ports[0].ip, peer_ports[0].peer_ip
    assert source and peer
    db["VLAN"][keepalive] = {"vlanid": str(KEEPALIVE_VLAN), "mtu": mtu, "admin_status": "up"}
    db["VLAN_INTERFACE"].update({keepalive: {}, f"{keepalive}|{source}": {}})
    db["PORTCHANNEL"][PEER_LINK_BUNDLE] = {
        "admin_status": "up",
        "mtu": mtu,
        "min_links": "1",
        "fast_rate": "true",
        "lacp_key": "auto",
    }
    db["PORTCHANNEL_MEMBER"].update({f"{PEER_LINK_BUNDLE}|{p.name}": {} for p in peer_ports})
    vlan_members[f"{vlan}|{PEER_LINK_BUNDLE}"] = {"tagging_mode": "tagged"}
    vlan_members[f"{keepalive}|{PEER_LINK_BUNDLE}"] = {"tagging_mode": "tagged"}
    domain = str(attrs["group"] % 4095 + 1)
    mclag_interfaces: Table = {}
    for p in server_ports:
        assert p.bundle
        db["PORTCHANNEL"][p.bundle] = {
            "admin_status": "up",
            "mtu": mtu,
            "min_links": "1",
            "fast_rate": "true",
            "lacp_key": "auto",
        }
        db["PORTCHANNEL_MEMBER"][f"{p.bundle}|{p.name}"] = {}
        vlan_members[f"{vlan}|{p.bundle}"] = {"tagging_mode": "untagged"}
        mclag_interfaces[f"{domain}|{p.bundle}"] = {"if_type": "PortChannel"}
    db["VLAN_MEMBER"] = vlan_members
    db["MCLAG_DOMAIN"] = {
        domain: {
            "source_ip": source.split("/")[0],
            "peer_ip": peer.split("/")[0],
            "peer_link": PEER_LINK_BUNDLE,
            "keepalive_interval": "1",
            "session_timeout": "15",
        }
    }
    db["MCLAG_INTERFACE"] = mclag_interfaces
    db["MCLAG_UNIQUE_IP"] = {vlan: {"unique_ip": "enable"}}


def qos_maps(fabric: Fabric) -> ConfigDb:
    """DSCP/TC/PG/queue maps for the lossless policy, the same on every switch."""
    qos = fabric.qos
    lossless = qos.lossless_priorities
    default_tc = qos.classes["default"].tc if "default" in qos.classes else 0
    dscp_to_tc = {str(dscp): str(default_tc) for dscp in range(64)}
    dscp_to_tc.update({str(c.dscp): str(c.tc) for c in qos.classes.values()})
    return {
        "DSCP_TO_TC_MAP": {MAP: dscp_to_tc},
        "TC_TO_PRIORITY_GROUP_MAP": {
            MAP: {str(tc): str(tc if tc in lossless else 0) for tc in range(8)}
        },
        "TC_TO_QUEUE_MAP": {MAP: {str(tc): str(tc) for tc in range(8)}},
        "MAP_PFC_PRIORITY_TO_QUEUE": {MAP: {str(p): str(p) for p in lossless}},
        "PFC_PRIORITY_TO_PRIORITY_GROUP_MAP": {MAP: {str(p): str(p) for p in lossless}},
        "SCHEDULER": {
            "scheduler.rdma": {"type": "DWRR", "weight": str(qos.rdma_scheduler_weight)},
            "scheduler.lossy": {"type": "DWRR", "weight": str(100 - qos.rdma_scheduler_weight)},
            # STRICT has no priority field in orchagent (qosorch.cpp handleSchedulerTable
            # refuses the whole entry for one): strict queues go before DWRR ones, and among
            # strict queues the ASIC serves the higher queue index first.
            "scheduler.cnp": {"type": "STRICT"},
        },
        "WRED_PROFILE": {
            "RDMA_ECN": {
                "wred_green_enable": "true",
                "wred_yellow_enable": "false",
                "wred_red_enable": "false",
                "ecn": "ecn_green",
                "green_min_threshold": str(qos.ecn.kmin_bytes),
                "green_max_threshold": str(qos.ecn.kmax_bytes),
                "green_drop_probability": str(qos.ecn.pmax_percent),
            }
        },
    }


def headroom_basis() -> dict[str, Any]:
    """What the lossless profiles' headroom is sized on: the platform SKU's buffer cells and
    the RoCE frame (`twin.design.headroom.in_cells`). design.json records it, so a lab sized
    on another basis no longer holds its design (`twin.lab.directory.holds`)."""
    chip = sku_asic(platform()["hwsku"])
    return {"sku": chip.sku, "cell_bytes": chip.cell_bytes, "frame_bytes": headroom.ROCE_FRAME}


def _qos_ports(fabric: Fabric, ports: list[Port], db: ConfigDb) -> None:
    qos = fabric.qos
    lossless = qos.lossless_priorities
    enable = ",".join(str(p) for p in lossless)
    cnp_queue = qos.classes["cnp"].tc
    bufs = qos.buffers
    cells = sku_asic(platform()["hwsku"]).cells  # the headroom in the SKU's buffer cells
    db["BUFFER_POOL"] = {
        "ingress_lossless_pool": {
            "type": "ingress",
            "mode": "dynamic",
            "size": str(bufs.ingress_lossless_pool),
        },
        "egress_lossless_pool": {
            "type": "egress",
            "mode": "static",
            "size": str(bufs.egress_lossless_pool),
        },
        "egress_lossy_pool": {
            "type": "egress",
            "mode": "dynamic",
            "size": str(bufs.egress_lossy_pool),
        },
    }
    profiles: Table = {
        "ingress_lossy_profile": {"pool": "ingress_lossless_pool", "size": "0", "dynamic_th": "3"},
        "egress_lossless_profile": {
            "pool": "egress_lossless_pool",
            "size": "0",
            "static_th": str(bufs.egress_lossless_pool),
        },
        "egress_lossy_profile": {"pool": "egress_lossy_pool", "size": "1518", "dynamic_th": "3"},
    }
    port_qos: Table = {"global": {"dscp_to_tc_map": MAP}}
    queue: Table = {}
    buffer_pg: Table = {}
    buffer_queue: Table = {}
    cable: dict[str, str] = {}
    pfc_wd: Table = {}
    if qos.pfc_watchdog.enabled:
        pfc_wd["GLOBAL"] = {"POLL_INTERVAL": str(qos.pfc_watchdog.poll_ms)}
    for port in ports:
        name = port.name
        port_qos[name] = {
            "dscp_to_tc_map": MAP,
            "tc_to_queue_map": MAP,
            "tc_to_pg_map": MAP,
            "pfc_to_queue_map": MAP,
            "pfc_to_pg_map": MAP,
            "pfc_enable": enable,
        }
        if qos.pfc_watchdog.enabled:
            port_qos[name]["pfcwd_sw_enable"] = enable
            pfc_wd[name] = {
                "action": qos.pfc_watchdog.action,
                "detection_time": str(qos.pfc_watchdog.detection_ms),
                "restoration_time": str(qos.pfc_watchdog.restoration_ms),
            }
        cable[name] = f"{port.cable_m}m"
        profile = headroom.profile_name(port.speed, port.cable_m)
        if profile not in profiles:
            xoff = headroom.xoff(port.speed, port.cable_m, fabric.mtu.switch, cells)
            xon = int(platform()["asic"]["pipeline_latency"])  # XON: the ASIC's pipeline latency
            profiles[profile] = {
                "pool": "ingress_lossless_pool",
                "size": str(xoff + xon),
                "xon": str(xon),
                "xoff": str(xoff),
                "dynamic_th": str(bufs.dynamic_th),
            }
        buffer_pg[f"{name}|0"] = {"profile": "ingress_lossy_profile"}
        for q in range(8):
            if q in lossless:
                queue[f"{name}|{q}"] = {"scheduler": "scheduler.rdma", "wred_profile": "RDMA_ECN"}
                buffer_pg[f"{name}|{q}"] = {"profile": profile}
                buffer_queue[f"{name}|{q}"] = {"profile": "egress_lossless_profile"}
            else:
                sched = "scheduler.cnp" if q == cnp_queue else "scheduler.lossy"
                queue[f"{name}|{q}"] = {"scheduler": sched}
                buffer_queue[f"{name}|{q}"] = {"profile": "egress_lossy_profile"}
    db["BUFFER_PROFILE"] = profiles
    db["PORT_QOS_MAP"] = port_qos
    db["QUEUE"] = queue
    db["BUFFER_PG"] = buffer_pg
    db["BUFFER_QUEUE"] = buffer_queue
    db["CABLE_LENGTH"] = {"AZURE": cable}
    if pfc_wd:
        db["PFC_WD"] = pfc_wd


def render(d: Design, node: str) -> ConfigDb:
    """The `config_db.json` of one switch."""
    f = d.fabric
    attrs = d.graph.nodes[node]
    ports = ports_of(d.graph, node)
    db: ConfigDb = defaultdict(dict)
    db["DEVICE_METADATA"] = {
        "localhost": {
            "hostname": node,
            "hwsku": platform()["hwsku"],
            "platform": platform()["platform"],
            "mac": _mac(d.number(node)),
            "bgp_asn": str(attrs["asn"]),
            "type": DEVICE_TYPE[attrs["role"]],
            "resource_type": "ComputeAI",
            "buffer_model": "traditional",
            "default_bgp_status": "up",
            "default_pfcwd_status": "enable" if f.qos.pfc_watchdog.enabled else "disable",
            "docker_routing_config_mode": "split-unified",
        }
    }
    db["PORT"] = _ports_table(f, attrs["role"], {p.name: p for p in ports})
    _routing(d, node, ports, db)
    if attrs["role"] == "leaf":
        _mlag(d, node, ports, db)
    db.update(qos_maps(f))
    _qos_ports(f, ports, db)
    return {table: rows for table, rows in db.items() if rows}


def _indices(text: str) -> range:
    low, _, high = text.partition("-")
    return range(int(low), int(high or low) + 1)


def by_port(db: ConfigDb, table: str) -> dict[str, dict[int, dict[str, Any]]]:
    """A per-port, per-index table (QUEUE, BUFFER_PG, BUFFER_QUEUE) as port -> index -> entry,
    ranges expanded."""
    entries: dict[str, dict[int, dict[str, Any]]] = {}
    for key, value in db.get(table, {}).items():
        port, _, index = key.partition("|")
        if not index:
            continue
        indices = entries.get(port)
        if indices is None:
            indices = entries[port] = {}
        if "-" in index:
            indices.update(dict.fromkeys(_indices(index), value))
        else:
            indices[int(index)] = value
    return entries


def number(value: Any, default: int = 0) -> int:
    """A CONFIG_DB number ('9100', '40m'), or the default when absent or not a number."""
    text = str(value).rstrip("m") if value is not None else ""
    return int(text) if text.isdigit() else default


def wred(db: dict[str, Any], port: str, queue: int) -> tuple[float, float, float] | None:
    """(kmin, kmax, pmax) of a queue that marks, None when it does not."""
    entry = by_port(db, "QUEUE").get(port, {}).get(queue, {})
    profile = db.get("WRED_PROFILE", {}).get(str(entry.get("wred_profile", "")).strip("[]"))
    if not profile or profile.get("ecn") not in ("ecn_green", "ecn_all"):
        return None
    return (
        float(profile.get("green_min_threshold", 0)),
        float(profile.get("green_max_threshold", 0)),
        float(profile.get("green_drop_probability", 0)) / 100,
    )
