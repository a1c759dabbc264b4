"""Forwarding tables: each switch's egress ports towards each host.

A switch's own `routes` win (by host name, then longest IPv4 prefix of the host's address);
other destinations take every next hop on a shortest path (hosts never transit).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from ipaddress import IPv4Address, IPv4Network, ip_address, ip_network

from labs.sim.model import Host, Link, Switch


class RoutingError(ValueError):
    """A route that names an unknown port or an unreadable prefix."""


def split_port(name: str) -> tuple[str, str]:
    """``node:port`` -> (node, port)."""
    node, sep, port = name.partition(":")
    if not sep or not node or not port:
        raise RoutingError(f"{name!r}: a port is named node:port")
    return node, port


def _neighbours(links: Sequence[Link]) -> dict[str, list[tuple[str, str]]]:
    """node -> [(own port name node:port, peer node)] in link order."""
    out: dict[str, list[tuple[str, str]]] = {}
    for link in links:
        a, b = split_port(link.a)[0], split_port(link.b)[0]
        out.setdefault(a, []).append((link.a, b))
        out.setdefault(b, []).append((link.b, a))
    return out


def _distances(
    host: str, neighbours: Mapping[str, list[tuple[str, str]]], hosts: set[str]
) -> dict[str, int]:
    dist = {host: 0}
    todo = deque([host])
    while todo:
        node = todo.popleft()
        if node in hosts and node != host:
            continue
        for _, peer in neighbours.get(node, []):
            if peer not in dist:
                dist[peer] = dist[node] + 1
                todo.append(peer)
    return dist


def _explicit(switch: Switch, host: Host) -> Sequence[str] | None:
    if host.name in switch.routes:
        return switch.routes[host.name]
    if host.address is None:
        return None
    address = ip_address(host.address)
    best: tuple[int, Sequence[str]] | None = None
    for key, ports in switch.routes.items():
        if "/" not in key:
            continue
        try:
            net = ip_network(key, strict=False)
        except ValueError:
            raise RoutingError(f"{switch.name}: route {key!r} is not a prefix") from None
        inside = (
            isinstance(net, IPv4Network) and isinstance(address, IPv4Address) and address in net
        )
        if inside and (best is None or net.prefixlen > best[0]):
            best = (net.prefixlen, ports)
    return None if best is None else best[1]


def forwarding(
    switches: Sequence[Switch], hosts: Sequence[Host], links: Sequence[Link]
) -> dict[str, dict[str, list[str]]]:
    """switch -> host -> egress ports (``node:port``), in a deterministic order."""
    neighbours = _neighbours(links)
    host_names = {h.name for h in hosts}
    table: dict[str, dict[str, list[str]]] = {s.name: {} for s in switches}
    for host in hosts:
        dist = _distances(host.name, neighbours, host_names)
        for switch in switches:
            given = _explicit(switch, host)
            if given is not None:
                own = {p for p, _ in neighbours.get(switch.name, [])}
                ports = [p if ":" in p else f"{switch.name}:{p}" for p in given]
                for port in ports:
                    if port not in own:
                        raise RoutingError(
                            f"{switch.name}: route to {host.name} via unknown port {port!r}"
                        )
                table[switch.name][host.name] = ports
                continue
            here = dist.get(switch.name)
            table[switch.name][host.name] = (
                []
                if here is None
                else [
                    port
                    for port, peer in neighbours.get(switch.name, [])
                    if dist.get(peer) == here - 1 and (peer not in host_names or peer == host.name)
                ]
            )
    return table
