"""Address pools: hand out loopbacks, /31 links and server subnets, or say the pool is short."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

from twin.errors import DesignError


class Pool:
    """Sequential allocation from one IPv4 pool named by its intent key."""

    def __init__(self, network: str, key: str, file: str) -> None:
        self.network = ipaddress.IPv4Network(network)
        self.key, self.file = key, file
        self._next = int(self.network.network_address)
        self._used = 0

    def _take(self, prefixlen: int, what: str) -> ipaddress.IPv4Network:
        size = 2 ** (32 - prefixlen)
        start = -(-self._next // size) * size
        end = int(self.network.broadcast_address) + 1
        if prefixlen < self.network.prefixlen or start + size > end:
            raise DesignError(
                self.file,
                f"addressing.{self.key}",
                f"pool {self.network} is too small: {self._used} {what} fit, more are needed",
            )
        self._next = start + size
        self._used += 1
        return ipaddress.IPv4Network((start, prefixlen))

    def host(self) -> ipaddress.IPv4Address:
        """A /32, skipping the pool's network address."""
        if self._next == int(self.network.network_address):
            self._next += 1
        return self._take(32, "addresses").network_address

    def subnet(self, prefixlen: int) -> ipaddress.IPv4Network:
        """The next aligned subnet of this length."""
        return self._take(prefixlen, f"/{prefixlen} subnets")

    def pairs(self) -> Iterator[tuple[str, str, str]]:
        """Endless /31s as (low address, high address, prefix)."""
        while True:
            net = self._take(31, "/31 links")
            low, high = net[0], net[1]
            yield f"{low}/31", f"{high}/31", str(net)


def subnet_for(hosts: int) -> int:
    """Smallest prefix length holding `hosts` addresses plus network and broadcast.

    >>> subnet_for(13 + 2), subnet_for(62)
    (27, 26)
    """
    length = 32
    while 2 ** (32 - length) - 2 < hosts:
        length -= 1
    return length
