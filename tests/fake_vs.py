"""What a docker-sonic-vs switch does with frames, for the fake containers of tests/fake_clab.py:
ports, addresses and the routes its FRR would install, in the container's real namespace.

* Start-up: start.sh's copy and merge of the bound config_db.json into /etc/sonic/ (`start_sh`),
  which CONFIG_DB then holds (`config`); run at deploy and at each `supervisord`.
* Ports (at deploy, as orchagent creates them): each PORT of the bound config_db.json gets a
  netdev named after it (`Ethernet0`, or its PortChannel when it is one's member) on its wire
  `eth<index>`: a macvlan, so it answers ARP with a MAC of its own while `ethN` stays silent
  (the backend turns `ethN`'s ARP replies off, as for the image's TAP ports).
* Carrier: in the image the port is a TAP that vslib keeps LOWER_UP whatever `ethN` does
  (sonic-sairedis 21851c5 vslib: a carrier change of `ethN` only becomes a SAI port-status
  notification, SwitchStateBaseHostif.cpp 915-970; orchagent's host-interface oper status
  has no handler, SwitchStateBase.cpp 578-613), so zebra keeps what goes through it. A macvlan
  follows its wire, so the fake keeps each port's kernel carrier apart (`carrier`: the ports
  an `ip link set dev PORT carrier off` in the switch turned off); that, not the wire,
  decides the static routes zebra keeps. INTERFACE /
  PORTCHANNEL_INTERFACE addresses go on those netdevs, LOOPBACK_INTERFACE on `Loopback0`;
  the kernel forwards (`ip_forward`, L4 multipath hashing, no reverse-path filter).
* Routes (`Routing`, a thread of the fake Docker engine, polling every `POLL_S`): the
  static routes of each switch's frr.conf (`ip route P NH`, while NH's port has its kernel
  carrier) and the BGP routes its sessions would give: every `network` a switch originates
  (a static one while its static is up) travels over Established sessions (bgpd running on
  both ends, frr.conf pushed, both wires up and both ports' carrier on), eBGP style (a path
  through the switch's own AS is refused), shortest AS path first, equal lengths as ECMP
  (`maximum-paths`, as-path multipath-relax). They are installed in the switch's kernel
  (`proto bgp` / `static`).

Next hops' MACs are pinned (permanent neighbours), as the ASIC's neighbour table holds them
while BGP keeps ARP resolved. A link fault is seen on the next poll (FRR sees carrier loss at
once), so frames hashed onto a failed port meanwhile are dropped, as on a switch before its
routes are withdrawn. Not
emulated: BGP timers, BFD, LACP (a PortChannel is its first member), QoS, PFC, ECN marking.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import re
import shutil
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyroute2 import IPRoute, NetlinkError

CONFIG_DB = "/var/sonic/config_db.json"
LOADED = "/etc/sonic/config_db.json"
INIT_CFG = {
    "DEVICE_METADATA": {"localhost": {"hostname": "sonic", "switch_type": "switch"}},
    "FEATURE": {"bgp": {"state": "enabled"}, "swss": {"state": "enabled"}},
}
"""start.sh's init_cfg.json (abbreviated): what CONFIG_DB holds where the bound config is
silent (a hostname `sonic` when no config was bound)."""
FRR_CONF = "/etc/twin/frr.conf"
POLL_S = 0.1
SYSCTLS = {  # what the image's namespace has: ECMP hashed on addresses (policy 0)
    "net.ipv4.ip_forward": "1",
    "net.ipv4.fib_multipath_hash_policy": "0",
    "net.ipv4.conf.all.rp_filter": "0",
    "net.ipv4.conf.default.rp_filter": "0",
}


def _ip(netns: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "-n", netns, *argv], capture_output=True, text=True, check=False)


def loaded(box: dict[str, Any]) -> Path:
    """Where the switch container's start.sh leaves the config it loads into CONFIG_DB."""
    return Path(box["root"]) / LOADED.lstrip("/")


def config(box: dict[str, Any]) -> dict[str, Any]:
    """The switch's CONFIG_DB: the config_db.json its start.sh loaded ({} before it ran)."""
    path = loaded(box)
    data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    return data


def start_sh(box: dict[str, Any]) -> None:
    """The config steps of the image's start.sh (sonic-buildimage 086b03b
    platform/vs/docker-sonic-vs/start.sh): `cp /var/sonic/config_db.json /etc/sonic/`, then
    `sonic-cfggen -j init_cfg.json -j config_db.json --print-data > /tmp/config_db.json` and
    `mv` it back (a deep merge, the bound file's fields win), then configdb-load.sh loads
    it. The container's files live under `box["root"]`; init_cfg.json is abbreviated to the
    DEVICE_METADATA and FEATURE rows its template renders."""
    etc = loaded(box)
    etc.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(box["root"]) / "tmp" / "config_db.json"
    tmp.parent.mkdir(parents=True, exist_ok=True)
    source = box["binds"].get(CONFIG_DB)
    if source:
        shutil.copyfile(source, etc)
    merged: dict[str, Any] = json.loads(json.dumps(INIT_CFG))
    for table, rows in (json.loads(etc.read_text()) if etc.exists() else {}).items():
        for key, fields in rows.items():
            merged.setdefault(table, {}).setdefault(key, {}).update(fields)
    tmp.write_text(json.dumps(merged))
    tmp.replace(etc)


def addresses(db: dict[str, Any]) -> list[tuple[str, ipaddress.IPv4Interface]]:
    """(SONiC interface, address) of every routed port and PortChannel."""
    found = []
    for table in ("INTERFACE", "PORTCHANNEL_INTERFACE"):
        for key in db.get(table, {}):
            if "|" in key:
                name, cidr = key.split("|")
                found.append((name, ipaddress.IPv4Interface(cidr)))
    return found


def operstate(netns: str) -> dict[str, bool]:
    """Interface -> operationally up, in a namespace."""
    done = _ip(netns, "-j", "link", "show")
    return {x["ifname"]: x.get("operstate") == "UP" for x in json.loads(done.stdout or "[]")}


def ports_up(
    db: dict[str, Any], up: dict[str, bool], off: frozenset[str] = frozenset()
) -> dict[str, bool]:
    """SONiC interface (port or PortChannel) -> frames pass: its wire (eth<PORT index>) is up
    as `up` (interface -> up) has it, and its kernel carrier was not turned `off`."""
    ports = {
        p: up.get(f"eth{int(v['index'])}", False) and p not in off
        for p, v in db.get("PORT", {}).items()
    }
    return _channels(db, ports)


def carrier(db: dict[str, Any], off: frozenset[str]) -> dict[str, bool]:
    """SONiC interface -> kernel carrier (LOWER_UP) as zebra sees it: on unless the switch
    turned it `off`, whatever the wire does (the image's TAP, see the module doc)."""
    return _channels(db, {p: p not in off for p in db.get("PORT", {})})


def _channels(db: dict[str, Any], ports: dict[str, bool]) -> dict[str, bool]:
    """`ports` with each PortChannel up when any member is."""
    for key in db.get("PORTCHANNEL_MEMBER", {}):
        channel, member = key.split("|")
        ports[channel] = ports.get(channel, False) or ports.get(member, False)
    return ports


def bring_up_ports(netns: str, db: dict[str, Any]) -> None:
    """Create the switch's port netdevs on their wires, address them, let the kernel route."""
    for key, value in SYSCTLS.items():
        subprocess.run(
            ["ip", "netns", "exec", netns, "sysctl", "-qw", f"{key}={value}"], check=True
        )
    channel_of = {key.split("|")[1]: key.split("|")[0] for key in db.get("PORTCHANNEL_MEMBER", {})}
    wires = operstate(netns)
    made: set[str] = set()
    for port, spec in db.get("PORT", {}).items():
        wire, name = f"eth{int(spec['index'])}", channel_of.get(port, port)
        if wire not in wires or name in made:
            continue
        _ip(netns, "link", "add", "link", wire, "name", name, "type", "macvlan", "mode", "bridge")
        _ip(netns, "link", "set", name, "up")
        made.add(name)
    for name, address in addresses(db):
        if name in made:
            _ip(netns, "addr", "add", str(address), "dev", name)
    _ip(netns, "link", "add", "Loopback0", "type", "dummy")
    _ip(netns, "link", "set", "Loopback0", "up")
    for key in db.get("LOOPBACK_INTERFACE", {}):
        if "|" in key:
            _ip(netns, "addr", "add", key.split("|")[1], "dev", "Loopback0")


# --------------------------------------------------------------------------- FRR's routes
@dataclass
class Speaker:
    """One switch as its frr.conf and state make it: AS, originated prefixes, live sessions."""

    asn: int
    networks: set[str]
    statics: dict[str, tuple[str, str]]  # prefix -> (gateway, interface), while it is up
    peers: dict[str, str] = field(default_factory=dict)  # peer node -> its address (next hop)


def _port_toward(db: dict[str, Any], ip: str) -> str | None:
    address = ipaddress.IPv4Address(ip)
    return next((n for n, a in addresses(db) if address in a.network), None)


def speaker(box: dict[str, Any], db: dict[str, Any], up: dict[str, bool]) -> Speaker:
    """A switch's BGP speaker from its frr.conf (statics only while their port is up in `up`:
    its kernel carrier, which zebra watches)."""
    conf = Path(box["binds"][FRR_CONF]).read_text()
    statics = {}
    for prefix, gateway in re.findall(r"^ip route (\S+) (\S+)$", conf, re.M):
        port = _port_toward(db, gateway)
        if port is not None and up.get(port, False):
            statics[prefix] = (gateway, port)
    loopbacks = {k.split("|")[1] for k in db.get("LOOPBACK_INTERFACE", {}) if "|" in k}
    networks = {
        p for p in re.findall(r"^\s+network (\S+)$", conf, re.M) if p in statics or p in loopbacks
    }
    return Speaker(int(re.findall(r"^router bgp (\d+)$", conf, re.M)[0]), networks, statics)


def neighbours(box: dict[str, Any]) -> dict[str, str]:
    """Neighbour address -> its node (`description`), from a switch's frr.conf."""
    conf = Path(box["binds"][FRR_CONF]).read_text()
    return dict(re.findall(r"^ neighbor (\S+) description (\S+)$", conf, re.M))


def best_paths(speakers: dict[str, Speaker]) -> dict[str, dict[str, list[str]]]:
    """Per switch, per prefix it learns: the next hops of its shortest loop-free AS paths."""
    best: dict[str, dict[str, tuple[int, ...]]] = {
        n: {p: () for p in s.networks} for n, s in speakers.items()
    }
    hops: dict[str, dict[str, list[str]]] = {n: {} for n in speakers}
    for _ in range(len(speakers) + 1):
        offers: dict[str, dict[str, list[tuple[tuple[int, ...], str]]]] = {n: {} for n in speakers}
        for node, s in speakers.items():
            for peer, gateway in s.peers.items():
                for prefix, path in best[peer].items():
                    full = (speakers[peer].asn, *path)
                    if s.asn not in full and prefix not in s.networks:
                        offers[node].setdefault(prefix, []).append((full, gateway))
        new_best: dict[str, dict[str, tuple[int, ...]]] = {}
        for node, s in speakers.items():
            new_best[node] = {p: () for p in s.networks}
            hops[node] = {}
            for prefix, seen in offers[node].items():
                shortest = min(len(path) for path, _ in seen)
                new_best[node][prefix] = min(path for path, _ in seen if len(path) == shortest)
                hops[node][prefix] = sorted({gw for path, gw in seen if len(path) == shortest})
        if new_best == best:
            break
        best = new_best
    return hops


Route = tuple[str, tuple[tuple[str, str], ...]]  # protocol, ((gateway, interface), ...)


def _install(netns: str, prefix: str, route: Route | None) -> None:
    if route is None:
        _ip(netns, "route", "del", prefix)
        return
    proto, nexthops = route
    if len(nexthops) == 1:
        gateway, dev = nexthops[0]
        _ip(netns, "route", "replace", prefix, "proto", proto, "via", gateway, "dev", dev)
        return
    legs = [w for gateway, dev in nexthops for w in ("nexthop", "via", gateway, "dev", dev)]
    _ip(netns, "route", "replace", prefix, "proto", proto, *legs)


class Routing(threading.Thread):
    """Keeps every switch's kernel routes what its FRR would install (see the module doc).

    `boxes()` gives the fake's containers, `alive(name)` whether a switch's bgpd runs with
    its frr.conf pushed, `off(name)` the ports whose carrier the switch turned off."""

    def __init__(
        self,
        boxes: Callable[[], dict[str, dict[str, Any]]],
        alive: Callable[[str], bool],
        off: Callable[[str], frozenset[str]],
    ) -> None:
        super().__init__(name="fake-vs-routing", daemon=True)
        self.boxes, self.alive, self.off = boxes, alive, off
        self.installed: dict[str, dict[str, Route]] = {}
        self.stopped = threading.Event()
        self.sockets: dict[str, IPRoute] = {}
        self.pinned: set[tuple[str, str]] = set()  # (container, next hop) with its MAC set

    def run(self) -> None:
        while not self.stopped.wait(POLL_S):
            with contextlib.suppress(OSError, ValueError, KeyError, NetlinkError):
                self.once()
        for ipr in self.sockets.values():
            ipr.close()

    def stop(self) -> None:
        """Stop polling (routes stay as they are)."""
        self.stopped.set()
        self.join()

    def operstate(self, netns: str) -> dict[str, bool]:
        """Interface -> up in a namespace, through a netlink socket kept open there."""
        if netns not in self.sockets:
            self.sockets[netns] = IPRoute(netns=netns)
        return {
            x.get("IFLA_IFNAME"): x.get("IFLA_OPERSTATE") == "UP"
            for x in self.sockets[netns].get_links()
        }

    def once(self) -> None:
        """Work out every switch's routes now and change the kernels where they differ."""
        switches = {
            b["name"]: b
            for b in self.boxes().values()
            if b["kind"] == "sonic-vs" and b["state"] == "running"
        }
        dbs = {name: config(box) for name, box in switches.items()}
        up = {
            name: ports_up(dbs[name], self.operstate(box["netns"]), self.off(name))
            for name, box in switches.items()
        }
        speakers = {
            name: speaker(box, dbs[name], carrier(dbs[name], self.off(name)))
            for name, box in switches.items()
        }
        for name, box in switches.items():
            for address, peer in neighbours(box).items():
                other = f"clab-{box['lab']}-{peer}"
                port = _port_toward(dbs[name], address)
                if other not in switches or port is None or not up[name].get(port, False):
                    continue
                mine = next((a for p, a in addresses(dbs[name]) if p == port), None)
                theirs = _port_toward(dbs[other], str(mine.ip)) if mine else None
                both = self.alive(name) and self.alive(other)
                if both and theirs is not None and up[other].get(theirs, False):
                    speakers[name].peers[other] = address
        hops = best_paths(speakers)
        for name, box in switches.items():
            want: dict[str, Route] = {
                prefix: ("bgp", tuple((gw, _port_toward(dbs[name], gw) or "") for gw in gws))
                for prefix, gws in hops[name].items()
            }
            want.update(
                {p: ("static", (nexthop,)) for p, nexthop in speakers[name].statics.items()}
            )
            have = self.installed.setdefault(name, {})
            for prefix in sorted(set(want) | set(have)):
                if want.get(prefix) != have.get(prefix):
                    self.resolve(box, want.get(prefix))
                    _install(box["netns"], prefix, want.get(prefix))
            self.installed[name] = want

    def resolve(self, box: dict[str, Any], route: Route | None) -> None:
        """Pin the next hops' MACs, as the ASIC's neighbour table holds them (BGP keeps ARP
        resolved; a frame for a port that is down is dropped, never queued for ARP)."""
        for gateway, dev in route[1] if route else ():
            if (box["name"], gateway) in self.pinned:
                continue
            mac = self.macs(box["lab"]).get(gateway)
            if mac is not None:
                _ip(box["netns"], "neigh", "replace", gateway, "lladdr", mac, "dev", dev,
                    "nud", "permanent")  # fmt: skip
                self.pinned.add((box["name"], gateway))

    def macs(self, lab: str) -> dict[str, str]:
        """Address -> MAC of every interface of the lab's containers."""
        found = {}
        for box in self.boxes().values():
            if box["lab"] == lab:
                done = _ip(box["netns"], "-j", "addr", "show")
                for link in json.loads(done.stdout or "[]"):
                    for a in link.get("addr_info", []):
                        found[a["local"]] = link.get("address", "")
        return found
