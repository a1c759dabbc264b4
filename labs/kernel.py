"""A Linux kernel's FIB read back into neutral form: each switch's `ip -j route` mapped to
`twin.model.fib.Fib` (shared by the backends whose switches forward in a Linux kernel: netns,
clab).

A device name maps back to its port through `ifmap.json` (a netns veth name) or is the port
itself (SONiC-VS names its netdevs after the ports); a next hop is the neighbour cabled to
that port; next hops flagged `linkdown` or `dead` are left out, as the kernel ignores them,
and of a prefix's routes (listed best first) the first usable one is taken.
Servers' routes come from their host files (their kernel routes are those, unchanged).
"""

from __future__ import annotations

from collections.abc import Mapping
from ipaddress import IPv4Network
from typing import Any

from twin.model.fib import Fib, NextHop, Routes
from twin.model.wiring import Wiring

ECMP_HASH = {
    "net.ipv4.fib_multipath_hash_policy": "3",
    "net.ipv4.fib_multipath_hash_fields": "0x0037",
}
"""A switch's kernel hashes ECMP on each packet's 5-tuple (policy 3: these fields), as an ASIC
does. A new network namespace hashes on addresses only (policy 0), and docker-sonic-vs sets
nothing (SONiC's hash config reaches only the ASIC: ../shared/reference/sonic.md 3.1), so
every backend whose switches forward in a Linux kernel sets it in each switch's namespace.
Policy 1 would reuse a hash the sending socket left on the packet, which crosses veths with
it: paths would depend on a random per-socket value, not on the 5-tuple."""


def from_snapshot(wiring: Wiring, snapshot: Mapping[str, list[dict[str, Any]]]) -> Fib:
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
            if prefix in routes:  # a prefix's routes come best first; the first usable is used
                continue
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
