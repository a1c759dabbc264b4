"""A netns twin's FIB in neutral form: each switch's `ip -j route`, mapped back to SONiC ports.

A device name maps back to its port through `ifmap.json`; a next hop is the neighbour cabled
to that port; next hops flagged `linkdown` or `dead` are left out, as the kernel ignores them.
Servers' routes come from their host files (their kernel routes are those, unchanged).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from ipaddress import IPv4Network
from typing import Any

from labs.netns.plan import netns_name
from twin.labdir import Lab
from twin.model.fib import Fib, NextHop, Routes
from twin.model.wiring import Wiring


def from_ip_route(wiring: Wiring, snapshot: Mapping[str, list[dict[str, Any]]]) -> Fib:
    """The FIB of a live twin from each switch's `ip -j route` (servers from host files)."""
    fib: Fib = {h: wiring.host_routes(h, wiring.admin_down) for h in wiring.hosts}
    for switch, entries in snapshot.items():
        ports = {names["netns"]: port for port, names in wiring.lab.ifmap.get(switch, {}).items()}
        routes: Routes = {}
        for entry in entries:
            dst = entry.get("dst", "")
            if ":" in dst or entry.get("type", "unicast") not in ("unicast", "blackhole"):
                continue
            prefix = IPv4Network("0.0.0.0/0" if dst == "default" else dst)
            hops = []
            for hop in entry.get("nexthops") or (
                [] if entry.get("type") == "blackhole" else [entry]
            ):
                port = wiring.logical(switch, ports.get(hop.get("dev", ""), hop.get("dev", "")))
                far = wiring.far(switch, port)
                if far and not {"linkdown", "dead"} & set(hop.get("flags", [])):
                    hops.append(NextHop(far[0], port))
            if hops or entry.get("type") == "blackhole":
                routes[prefix] = tuple(hops)
        fib[switch] = routes
    return fib


def ip_route(lab: Lab, switch: str) -> list[dict[str, Any]]:
    """A switch's kernel routes, as `ip -j route` prints them."""
    done = subprocess.run(
        ["ip", "-n", netns_name(lab.name, switch), "-j", "route", "show"],
        capture_output=True,
        text=True,
        check=False,
    )
    routes: list[dict[str, Any]] = json.loads(done.stdout or "[]")
    return routes


def live(lab: Lab, wiring: Wiring) -> Fib:
    """Every node's FIB now."""
    with ThreadPoolExecutor(8) as pool:
        tables = dict(
            zip(lab.switches(), pool.map(lambda s: ip_route(lab, s), lab.switches()), strict=True)
        )
    return from_ip_route(wiring, tables)
