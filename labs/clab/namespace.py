"""A container's network namespace, entered from the host: netlink (pyroute2), sysctls and
the host's own tools (iptables, rdma) run there, whatever the container image holds.

A container's namespace is `/proc/<pid>/ns/net` of its main process (pid from the Docker
SDK). `setns` moves only the calling thread, and a socket stays in the namespace it was
opened in, so each netlink socket is opened inside and used from anywhere.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyroute2 import IPRoute, NetlinkError
from pyroute2 import netns as pyroute2_netns

from labs import cmdlog
from labs.backend import COUNTER_FIELDS
from twin.errors import LabError

RTNH_F_ONLINK = 4
NETLINK_ROUTE = 0
SERVER_SYSCTLS = {
    "net.ipv4.fib_multipath_hash_policy": "1",
    "net.ipv4.conf.all.ignore_routes_with_linkdown": "1",
    "net.ipv4.conf.all.rp_filter": "0",
    "net.ipv4.conf.default.rp_filter": "0",
}


@contextlib.contextmanager
def inside(pid: int) -> Iterator[None]:
    """Run the block with this thread in the network namespace of process `pid`."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        try:
            pyroute2_netns.setns(f"/proc/{pid}/ns/net", flags=0)
        except OSError as exc:
            raise LabError(f"cannot enter the network namespace of pid {pid}: {exc}") from None
        yield
    finally:
        pyroute2_netns.setns(home, flags=0)
        os.close(home)


@contextlib.contextmanager
def netlink(pid: int) -> Iterator[IPRoute]:
    """An rtnetlink socket in the namespace of process `pid` (opened there, used anywhere)."""
    with inside(pid):
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_ROUTE)
    ipr = IPRoute(use_socket=sock)
    try:
        yield ipr
    finally:
        ipr.close()
        sock.close()


def set_sysctls(pid: int, values: dict[str, str]) -> None:
    """Write sysctls in the namespace of process `pid`."""
    with inside(pid):
        for key, value in values.items():
            Path("/proc/sys", *key.split(".")).write_text(value)


def run_inside(
    pid: int, argv: list[str], stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a host tool in the namespace of process `pid` (the child is born there)."""
    with inside(pid):
        return cmdlog.run(argv, stdin=stdin, timeout=30)


def _index(ipr: IPRoute, ifname: str) -> int:
    found = ipr.link_lookup(ifname=ifname)
    if not found:
        raise LabError(f"no interface {ifname}")
    return int(found[0])


def set_state(pid: int, ifname: str, up: bool) -> None:
    """Set an interface of the namespace up or down."""
    state = "up" if up else "down"
    with cmdlog.netlink(f"pid {pid}: {ifname} {state}"), netlink(pid) as ipr:
        ipr.link("set", index=_index(ipr, ifname), state=state)


def links(pid: int) -> dict[str, dict[str, Any]]:
    """Every interface of the namespace: operstate and the counters of `COUNTER_FIELDS`."""
    seen = {}
    with netlink(pid) as ipr:
        for link in ipr.get_links():
            stats = link.get_attr("IFLA_STATS64") or {}
            seen[link.get_attr("IFLA_IFNAME")] = {
                "operstate": link.get_attr("IFLA_OPERSTATE"),
                "counters": [int(stats.get(f, 0)) for f in COUNTER_FIELDS],
            }
    return seen


def configure_host(pid: int, host: dict[str, Any]) -> str:
    """Set a server container up from its container host file; says what RDMA got.

    MTU, the /31 of each NIC, the lab address on `lo`, the routes (multipath over the NICs,
    sourced from the lab address), L4 multipath hashing, DSCP marking rules (iptables mangle,
    the host's iptables run in the container's namespace) and soft-RoCE devices where the
    kernel has `rdma_rxe`.
    """
    set_sysctls(pid, SERVER_SYSCTLS)
    batch = f"pid {pid}: lo and {len(host['interfaces'])} NICs up, {len(host['routes'])} routes"
    with cmdlog.netlink(batch), netlink(pid) as ipr:
        lo = _index(ipr, "lo")
        ipr.link("set", index=lo, state="up")
        address = host["address"].split("/")[0]
        with contextlib.suppress(NetlinkError):
            ipr.addr("add", index=lo, address=address, prefixlen=32)
        for nic in host["interfaces"]:
            index = _index(ipr, nic["name"])
            ipr.link("set", index=index, mtu=int(host["mtu"]))
            ip, prefixlen = nic["address"].split("/")
            with contextlib.suppress(NetlinkError):
                ipr.addr("add", index=index, address=ip, prefixlen=int(prefixlen))
            ipr.link("set", index=index, state="up")
        for route in host["routes"]:
            ipr.route(
                "replace",
                dst=route["dst"],
                prefsrc=route.get("src"),
                multipath=[
                    {
                        "gateway": hop["gateway"],
                        "oif": _index(ipr, hop["dev"]),
                        "flags": RTNH_F_ONLINK,
                    }
                    for hop in route["nexthops"]
                ],
            )
    _mark_dscp(pid, host)
    return _rdma(pid, host)


def _mark_dscp(pid: int, host: dict[str, Any]) -> None:
    rules = [
        f"-A OUTPUT -p {proto} --dport {port} -j DSCP --set-dscp {mark['dscp']}"
        for mark in host.get("dscp_marking", [])
        for port in mark["ports"]
        for proto in ("tcp", "udp")
    ]
    if not rules:
        return
    who = host.get("hostname") or host["address"]
    if shutil.which("iptables-restore") is None:
        raise LabError(f"{who}: DSCP marking needs iptables on this machine")
    done = run_inside(
        pid, ["iptables-restore", "--noflush"], "*mangle\n" + "\n".join(rules) + "\nCOMMIT\n"
    )
    if done.returncode != 0:
        raise LabError(f"{who}: iptables-restore: {done.stderr.strip()}")


def _rdma(pid: int, host: dict[str, Any]) -> str:
    devices = (host.get("rdma") or {}).get("devices", [])
    if not devices:
        return "no RDMA devices asked for"
    if not Path("/sys/module/rdma_rxe").exists() or shutil.which("rdma") is None:
        return "soft-RoCE skipped: the kernel has no rdma_rxe module (RoCE is replayed as packets)"
    for device in devices:
        done = run_inside(
            pid, ["rdma", "link", "add", device["name"], "type", "rxe", "netdev", device["netdev"]]
        )
        if done.returncode != 0:
            return f"soft-RoCE skipped: {done.stderr.strip()}"
    return "soft-RoCE devices added"
