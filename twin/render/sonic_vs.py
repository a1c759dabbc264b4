"""The container flavour of a lab: what docker-sonic-vs and Linux containers are given.

The lab's own configs keep the fabric's design (400G ports, MLAG pairs, server bundles). The
image runs less than a switch does, so the containerlab form is derived from those configs
(docs/containerlab.md says what differs and why):

* **Ports.** Each switch runs a SKU the image ships (`HWSKU`), and its PORT table holds the
  wired ports exactly as that SKU's `port_config.ini` row for the port's `ethN` defines them
  (name, lanes, alias, index, speed): the image attaches a port to `ethN` by its lanes. A
  switch no SKU has rows for (by count, name or speed) is refused, saying which.
* **Server links.** docker-sonic-vs has no MCLAG daemon, so a server NIC is a routed /31 to
  its leaf (taken from `addressing.fabric` after the fabric's own links); the server holds its
  lab address on `lo`, and each leaf routes the address of the servers it is cabled to and
  advertises it in BGP. Server VLANs, server bundles and MCLAG tables are left out; the
  peer-link keeps its bundle and takes the keepalive VLAN's address.
* **Routing.** `frr.conf` is pushed into the running daemons with vtysh after start-up;
  `BGP_NEIGHBOR` is left out (bgpcfgd would add its own neighbours to the same bgpd) and the
  routing config mode is `split-unified` (one integrated file). The image's supervisord is
  rendered when it is built, so bgpcfgd runs whatever the mode says; the backend's push
  waits for its start-up push (labs/clab/switches.py).
* **Metadata.** `mac` is left out (the image sets it from eth0, as containerlab issue 3324
  advises), `hwsku` and `platform` are the container's.
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from twin import safeio
from twin.design.graph import Port, ports_of
from twin.render.config_db import ConfigDb, Table
from twin.render.source import LabSource

IMAGE_FACTS = Path(__file__).parent.parent / "platforms" / "sonic-vs.yml"
FLAVOUR = "clab"
"""The lab directory's folder of container configs: `clab/<node>/...`."""
ROUTING_MODE = "split-unified"
DROPPED = ("BGP_NEIGHBOR", "MCLAG_DOMAIN", "MCLAG_INTERFACE", "MCLAG_UNIQUE_IP")
VLAN_TABLES = ("VLAN", "VLAN_MEMBER", "VLAN_INTERFACE")
SKU_FIELDS = ("lanes", "alias", "index", "speed")
"""PORT fields the SKU's port_config.ini row decides."""


@functools.cache
def image() -> dict[str, Any]:
    """Facts about docker-sonic-vs (SKU port tables, paths, management network)."""
    data: dict[str, Any] = yaml.load(IMAGE_FACTS.read_text(), Loader=yaml.CSafeLoader)
    return data


class Row(NamedTuple):
    """One row of a SKU's port_config.ini."""

    name: str
    lanes: str
    alias: str
    number: int  # the `index` column
    speed: int


@dataclass(frozen=True)
class Sku:
    """A hardware SKU the image ships: its ports in port_config.ini order (`eth<i+1>` = row i)."""

    name: str
    rows: tuple[Row, ...]

    def misfit(self, port: Port) -> str | None:
        """Why `port` has no row of its own here (None when its row has its name and speed)."""
        if port.index >= len(self.rows):
            return f"no row for {port.name} ({len(self.rows)} rows)"
        row = self.rows[port.index]
        if row.name != port.name:
            return f"row {port.index + 1} is {row.name}, not {port.name}"
        if row.speed != port.speed:
            return f"{row.name} runs at {row.speed // 1000}G, not {port.speed // 1000}G"
        return None

    def fits(self, ports: list[Port]) -> bool:
        """Whether every port's row exists, has the port's name and runs at its speed."""
        return all(self.misfit(p) is None for p in ports)


@functools.cache
def skus() -> tuple[Sku, ...]:
    """The SKUs the container flavour chooses from, smallest first."""
    return tuple(
        Sku(name, tuple(Row(*row) for row in sku["ports"])) for name, sku in image()["skus"].items()
    )


class Refused(Exception):
    """The lab cannot run on containerlab; the message is the one-line reason."""


def sku_for(lab: LabSource, switch: str) -> Sku:
    """The smallest SKU whose port table holds every wired port of the switch."""
    ports = ports_of(lab.graph, switch)
    for sku in skus():
        if sku.fits(ports):
            return sku
    last = max(ports, key=lambda p: p.index)
    if all(last.index >= len(s.rows) for s in skus()):
        tables = ", ".join(f"{s.name} {len(s.rows)} ports" for s in skus())
        raise Refused(
            f"{switch}: {len(ports)} ports up to {last.name} at {last.speed // 1000}G are beyond "
            f"the port tables of the image's SKUs ({tables})"
        )
    speeds = "/".join(f"{v // 1000}G" for v in sorted({p.speed for p in ports}))
    why = "; ".join(
        f"{s.name}: {next(m for p in ports if (m := s.misfit(p)) is not None)}" for s in skus()
    )
    raise Refused(
        f"{switch}: no SKU of the image has rows of its ports' names and speeds ({speeds}): {why}"
    )


def mgmt_size(nodes: int) -> int:
    """The prefix length of a management network for `nodes` containers (plus the gateway).

    >>> mgmt_size(14), mgmt_size(254), mgmt_size(2362)
    (24, 23, 20)
    """
    largest = image()["mgmt_largest"]
    for prefixlen in range(24, largest - 1, -1):
        if 2 ** (32 - prefixlen) - 3 >= nodes:
            return prefixlen
    most = 2 ** (32 - largest) - 3
    raise Refused(f"{nodes} nodes exceed the largest management network (/{largest}, {most} nodes)")


def mgmt_subnet(name: str, nodes: int, taken: Sequence[str] = ()) -> str:
    """The management subnet of lab `name` with `nodes` containers: in the pool, the block
    the name hashes to, or the first one after it that overlaps no subnet in `taken` (the
    networks Docker has), so labs side by side get networks of their own.

    >>> mgmt_subnet("a", 14), mgmt_subnet("b", 14)
    ('172.21.18.0/24', '172.20.22.0/24')
    >>> mgmt_subnet("a", 14, ["172.21.16.0/22", "172.21.20.0/24"])
    '172.21.21.0/24'
    """
    pool = ipaddress.IPv4Network(image()["mgmt_pool"])
    blocks = list(pool.subnets(new_prefix=mgmt_size(nodes)))
    used = [ipaddress.IPv4Network(net) for net in taken]
    start = int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big") % len(blocks)
    for i in range(len(blocks)):
        block = blocks[(start + i) % len(blocks)]
        if not any(block.overlaps(net) for net in used):
            return str(block)
    raise Refused(f"no free /{mgmt_size(nodes)} management network left in {pool}")


class ServerLink(NamedTuple):
    """A server NIC as a routed /31: the leaf's end and the server's end."""

    leaf: str
    leaf_port: str
    leaf_ip: str  # address/31
    server: str
    nic: str
    server_ip: str  # address/31


def _free_pairs(lab: LabSource) -> Iterator[ipaddress.IPv4Network]:
    """The /31s of `addressing.fabric` after the highest one the design uses."""
    pool = ipaddress.IPv4Network(lab.fabric.addressing.fabric)
    used = [
        ipaddress.IPv4Network(e["prefix"])
        for *_, e in lab.graph.edges(data=True)
        if e.get("prefix") and ipaddress.IPv4Network(e["prefix"]).subnet_of(pool)
    ]
    start = max((int(n.network_address) + 2 for n in used), default=int(pool.network_address))
    for first in range(start, int(pool.broadcast_address), 2):
        yield ipaddress.IPv4Network((first, 31))


def server_links(lab: LabSource) -> list[ServerLink]:
    """Every server NIC's /31, servers in design order."""
    pairs = _free_pairs(lab)
    links = []
    for server in lab.nodes("server"):
        for port in ports_of(lab.graph, server):
            net = next(pairs, None)
            if net is None:
                raise Refused(
                    f"addressing.fabric {lab.fabric.addressing.fabric} has no /31 left for the "
                    f"server links ({server} {port.name})"
                )
            links.append(
                ServerLink(
                    port.peer, port.peer_port, f"{net[0]}/31", server, port.name, f"{net[1]}/31"
                )
            )
    return links


def check(lab: LabSource) -> None:
    """Raise `Refused` with one line when the lab cannot run on containerlab."""
    for switch in lab.switches():
        sku_for(lab, switch)
    mgmt_size(lab.graph.number_of_nodes())
    server_links(lab)


# --------------------------------------------------------------------------- switches
def _port(name: str) -> str:
    return name.split("|")[0]


def _vlans_to_routes(db: ConfigDb) -> None:
    """Drop the VLANs; a VLAN whose one member is a PortChannel lends it its addresses."""
    members: dict[str, list[str]] = {}
    for key in db.get("VLAN_MEMBER", {}):
        vlan, member = key.split("|")
        members.setdefault(vlan, []).append(member)
    for key in db.get("VLAN_INTERFACE", {}):
        if "|" not in key:
            continue
        vlan, cidr = key.split("|")
        kept = members.get(vlan, [])
        if len(kept) == 1 and kept[0].startswith("PortChannel"):
            routed = db.setdefault("PORTCHANNEL_INTERFACE", {})
            routed.update({kept[0]: {}, f"{kept[0]}|{cidr}": {}})
    for name in VLAN_TABLES:
        db.pop(name, None)


def config_db(lab: LabSource, switch: str, links: list[ServerLink]) -> ConfigDb:
    """The container's `config_db.json`, derived from the lab's."""
    db: ConfigDb = json.loads(json.dumps(lab.config_db(switch)))
    sku = sku_for(lab, switch)
    wired = ports_of(lab.graph, switch)
    own = db.get("PORT", {})
    ports: Table = {}
    for p in wired:
        row = sku.rows[p.index]
        entry = {k: v for k, v in own.get(p.name, {}).items() if k not in SKU_FIELDS}
        ports[row.name] = {
            "alias": row.alias,
            "index": str(row.number),
            "lanes": row.lanes,
            "speed": str(row.speed),
            **entry,
        }
    db["PORT"] = ports
    mine = [link for link in links if link.leaf == switch]
    server_ports = {link.leaf_port for link in mine}
    bundles = {
        key.split("|")[0]
        for key in db.get("PORTCHANNEL_MEMBER", {})
        if _port(key.split("|")[1]) in server_ports
    }
    db["PORTCHANNEL_MEMBER"] = {
        k: v for k, v in db.get("PORTCHANNEL_MEMBER", {}).items() if k.split("|")[0] not in bundles
    }
    db["PORTCHANNEL"] = {k: v for k, v in db.get("PORTCHANNEL", {}).items() if k not in bundles}
    vlan_members = db.get("VLAN_MEMBER", {})
    server_vlans = {
        k.split("|")[0] for k in vlan_members if k.split("|")[1] in bundles | server_ports
    }
    db["VLAN_MEMBER"] = {
        k: v for k, v in vlan_members.items() if k.split("|")[0] not in server_vlans
    }
    db["VLAN_INTERFACE"] = {
        k: v for k, v in db.get("VLAN_INTERFACE", {}).items() if _port(k) not in server_vlans
    }
    _vlans_to_routes(db)
    interface = db.setdefault("INTERFACE", {})
    for link in mine:
        interface.update({link.leaf_port: {}, f"{link.leaf_port}|{link.leaf_ip}": {}})
    for table in DROPPED:
        db.pop(table, None)
    for table, rows in db.items():
        if table not in ("PORT", "INTERFACE") and any(k.startswith("Ethernet") for k in rows):
            db[table] = {
                k: v for k, v in rows.items() if not k.startswith("Ethernet") or _port(k) in ports
            }
    if "AZURE" in db.get("CABLE_LENGTH", {}):
        cables = db["CABLE_LENGTH"]["AZURE"]
        db["CABLE_LENGTH"]["AZURE"] = {k: v for k, v in cables.items() if k in ports}
    meta = db["DEVICE_METADATA"]["localhost"]
    meta.pop("mac", None)
    meta.update(
        hwsku=sku.name, platform=image()["platform"], docker_routing_config_mode=ROUTING_MODE
    )
    return {table: rows for table, rows in db.items() if rows}


def frr_conf(lab: LabSource, switch: str, links: list[ServerLink]) -> str:
    """The container's `frr.conf`: the lab's, with each server reached over its /31.

    A leaf advertises each server it is cabled to (a static /32 via the server's end of the
    /31, and a `network` for it) in place of the server subnet, which has no VLAN here.
    """
    text = lab.frr_conf(switch)
    mine = [link for link in links if link.leaf == switch]
    if not mine:
        return text
    servers = {link.server: lab.host(link.server)["address"].split("/")[0] for link in mine}
    statics = [
        f"ip route {servers[link.server]}/32 {link.server_ip.split('/')[0]}" for link in mine
    ]
    subnet = f"  network {lab.graph.nodes[switch]['subnet']}"
    lines = []
    for line in text.splitlines():
        if line.startswith("router bgp "):
            lines += [*statics, "!"]
        if line == subnet:
            lines += [f"  network {address}/32" for address in servers.values()]
            continue
        lines.append(line)
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- servers
def host(lab: LabSource, server: str, links: list[ServerLink]) -> dict[str, Any]:
    """The server container's host file: NICs as `ethN` with their /31s, the lab address on
    `lo`, routes through the leaves' ends of the /31s, sourced from the lab address."""
    own = lab.host(server)
    mine = {link.nic: link for link in links if link.server == server}
    eth = {nic: names["clab"] for nic, names in lab.ifmap[server].items()}
    address = own["address"].split("/")[0]
    gateway = {nic: link.leaf_ip.split("/")[0] for nic, link in mine.items()}
    rdma: dict[str, Any] | None = own.get("rdma")
    return {
        "hostname": own.get("hostname") or server,
        "mtu": own["mtu"],
        "address": f"{address}/32",
        "interfaces": [
            {
                "name": eth[nic["name"]],
                "nic": nic["name"],
                "address": mine[nic["name"]].server_ip,
                "gateway": gateway[nic["name"]],
                "peer": nic["peer"],
                "peer_port": nic["peer_port"],
            }
            for nic in own["interfaces"]
        ],
        "routes": [
            {
                "dst": route["dst"],
                "src": address,
                "nexthops": [
                    {"gateway": gateway[hop["dev"]], "dev": eth[hop["dev"]]}
                    for hop in route["nexthops"]
                ],
            }
            for route in own["routes"]
        ],
        "dscp_marking": own.get("dscp_marking", []),
        "rdma": rdma
        and {
            **rdma,
            "devices": [
                {"name": d["name"], "netdev": eth.get(d["netdev"], d["netdev"])}
                for d in rdma.get("devices", [])
            ],
        },
    }


def write(lab: LabSource, root: Path) -> list[Path]:
    """Write `clab/<node>/` of every node under `root` from the lab's configs; the files.

    The JSON is compact: these files are derived (edit the lab's own configs instead), and
    indenting them would double the time `twin generate` takes."""
    links = server_links(lab)
    written = []

    def put(node: str, name: str, text: str) -> None:
        path = root / FLAVOUR / node / name
        safeio.write(path, text)
        written.append(path)

    for switch in lab.switches():
        put(switch, "config_db.json", _compact(config_db(lab, switch, links)))
        put(switch, "frr.conf", frr_conf(lab, switch, links))
    for server in lab.nodes("server"):
        put(server, "host.json", _compact(host(lab, server, links)))
    return written


def _compact(document: Any) -> str:
    """JSON on one line (the C encoder), as a file."""
    return json.dumps(document, separators=(",", ":")) + "\n"
