"""Namespaces, veths, addresses, routes and sysctls through netlink (pyroute2), in-process.

One netlink socket is opened per namespace and kept for the deploy; sysctls are written by
entering the namespace from this thread (`/proc/sys/net` shows the namespace of the thread
that opens it) and coming back.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import socket
import threading
from pathlib import Path

from pyroute2 import IPRoute, NetlinkError, netns

from labs import cmdlog
from labs.netns.plan import Node, Route, Veth
from traffic.nsproc import CLONE_NEWNET, NETNS_DIR, inside, setns

NETLINK_ROUTE = 0
IFF_UP = 1
NUD_REACHABLE = 0x02
_libc = ctypes.CDLL(None, use_errno=True)


def namespaces() -> list[str]:
    """Every named network namespace on the machine."""
    return sorted(netns.listnetns())


def create(name: str) -> None:
    """Create a named namespace, as `ip netns add` does, from this thread.

    The thread unshares into a new namespace, bind-mounts it at /var/run/netns/<name> and goes
    back home: well under a millisecond, where pyroute2's `netns.create` forks a helper
    process per namespace (10 to 35 ms each).
    """
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        if _libc.unshare(CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"unshare: {os.strerror(err)}")
        try:
            netns.attach(name, "thread-self")
        except BaseException:
            with contextlib.suppress(OSError):
                (NETNS_DIR / name).unlink()
            raise
    finally:
        setns(home)
        os.close(home)


def remove(name: str) -> None:
    """Remove a named namespace (its veths go with it)."""
    with contextlib.suppress(FileNotFoundError):
        netns.remove(name)


def set_sysctls(name: str, values: dict[str, str]) -> None:
    """Write sysctls inside a namespace."""
    with inside(name):
        for key, value in values.items():
            Path("/proc/sys", *key.split(".")).write_text(value)


def route_socket(name: str) -> IPRoute:
    """An rtnetlink socket bound to namespace `name`, opened from this thread.

    A socket belongs to the namespace it was created in; creating it after a `setns` costs
    well under a millisecond, where pyroute2's `NetNS` forks a helper process per namespace
    (about 12 ms each). A missing namespace raises FileNotFoundError: it is never created
    (`NetNS` creates one by default).
    """
    with inside(name):
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_ROUTE)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    return IPRoute(use_socket=sock)


class Sockets:
    """One open netlink socket per namespace (and per thread that uses it: a pyroute2 socket
    serves the thread that opened it)."""

    def __init__(self) -> None:
        self._open: dict[tuple[int, str], IPRoute] = {}
        self._index: dict[str, dict[str, int]] = {}

    def __getitem__(self, name: str) -> IPRoute:
        key = (threading.get_ident(), name)
        if key not in self._open:
            self._open[key] = route_socket(name)
        return self._open[key]

    def close(self) -> None:
        """Close every socket."""
        for ipr in self._open.values():
            ipr.close()
            with contextlib.suppress(OSError, AttributeError):
                ipr.asyncore.use_socket.close()
        self._open.clear()

    def index(self, name: str, ifname: str) -> int:
        """Interface index of `ifname` in namespace `name` (one listing per namespace, by the C
        library: decoding a link dump with pyroute2 costs a hundred times more)."""
        if ifname not in self._index.get(name, {}):
            with inside(name):
                self._index[name] = {n: i for i, n in socket.if_nameindex()}
        try:
            return self._index[name][ifname]
        except KeyError:
            raise LookupError(f"{name}: no interface {ifname}") from None

    def veth(self, a_ns: str, veth: Veth, b_ns: str) -> None:
        """Create a veth pair with one end in each namespace."""
        with cmdlog.netlink(f"{a_ns}: veth {veth.a_if} to {b_ns} {veth.b_if}"):
            self[a_ns].link(
                "add",
                ifname=veth.a_if,
                kind="veth",
                peer={"ifname": veth.b_if, "net_ns_fd": str(NETNS_DIR / b_ns)},
            )

    def set_state(self, name: str, ifname: str, up: bool) -> None:
        """Set an interface admin up or down."""
        state = "up" if up else "down"
        with cmdlog.netlink(f"{name}: {ifname} {state}"):
            self[name].link("set", index=self.index(name, ifname), state=state)

    def configure(self, node: Node) -> None:
        """Addresses, MTUs and link state of one namespace (its routes are installed by
        `routes` once every namespace's links are up, so that carriers can be read)."""
        what = f"{node.netns}: {len(node.mtu)} links, {len(node.addresses)} addresses"
        with cmdlog.netlink(what):
            self._configure(node)

    def _configure(self, node: Node) -> None:
        sock = self[node.netns]
        sock.link("set", index=self.index(node.netns, "lo"), state="up")
        for ifname, mtu in node.mtu.items():
            sock.link("set", index=self.index(node.netns, ifname), mtu=mtu)
        for ifname, cidr in node.addresses:
            address, prefixlen = cidr.split("/")
            with contextlib.suppress(NetlinkError):
                sock.addr(
                    "add",
                    index=self.index(node.netns, ifname),
                    address=address,
                    prefixlen=int(prefixlen),
                )
        for ifname in node.mtu:
            state = "down" if ifname in node.down else "up"
            sock.link("set", index=self.index(node.netns, ifname), state=state)

    def routes(self, node: Node, only_dev: str | None = None) -> None:
        """Install the node's static routes (those on `only_dev` when given), and remove those
        held by carriers none of which is up; idempotent."""
        with cmdlog.netlink(f"{node.netns}: routes" + (f" on {only_dev}" if only_dev else "")):
            self._routes(node, only_dev)

    def _routes(self, node: Node, only_dev: str | None) -> None:
        sock = self[node.netns]
        for route in node.routes:
            devs = {route.dev, *route.carriers} | {dev for _, dev in route.gateways}
            if only_dev is not None and only_dev not in devs:
                continue
            args = self._route_args(node.netns, route)
            if route.carriers and not any(self.carrier(node.netns, d) for d in route.carriers):
                with contextlib.suppress(NetlinkError):
                    sock.route("del", **args)
                continue
            try:
                sock.route("replace", **args)
            except NetlinkError as exc:
                if exc.code not in (errno.ENETDOWN, errno.ENETUNREACH, errno.EINVAL):
                    raise

    def carrier(self, name: str, ifname: str) -> bool:
        """Whether an interface is up with carrier (its peer end is up too)."""
        link = self[name].get_links(self.index(name, ifname))[0]
        return bool(link["flags"] & IFF_UP) and link.get_attr("IFLA_CARRIER") == 1

    def operational(self, name: str, ifname: str) -> bool:
        """Whether the kernel has brought an interface into service: operstate UP, set by
        the link watcher that also activates its transmit queue (until then every frame sent
        on it is dropped, unseen by captures)."""
        link = self[name].get_links(self.index(name, ifname))[0]
        return bool(link.get_attr("IFLA_OPERSTATE") == "UP")

    def mac(self, name: str, ifname: str) -> str:
        """An interface's MAC address."""
        return str(self[name].get_links(self.index(name, ifname))[0].get_attr("IFLA_ADDRESS"))

    def neighbour(self, name: str, ifname: str, address: str, mac: str) -> None:
        """Hold `address` as reachable at `mac` on an interface (replacing what was there)."""
        index = self.index(name, ifname)
        with cmdlog.netlink(f"{name}: neighbour {address} at {mac} on {ifname}"):
            self[name].neigh("replace", dst=address, lladdr=mac, ifindex=index, state=NUD_REACHABLE)

    def _route_args(self, ns: str, route: Route) -> dict[str, object]:
        args: dict[str, object] = {"dst": route.dst}
        if route.metric:
            args["priority"] = route.metric
        if route.blackhole:
            args["type"] = "blackhole"
        elif route.gateways:
            args["multipath"] = [
                {"gateway": gw, "oif": self.index(ns, dev), "flags": 4}  # RTNH_F_ONLINK
                for gw, dev in route.gateways
            ]
        else:
            assert route.dev
            args["oif"] = self.index(ns, route.dev)
            args["scope"] = 253  # link
        return args
