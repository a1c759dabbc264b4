"""Address pools: loopbacks, /31 links and server subnets by position, or say the pool is short.

Every address is the `index`-th of its size in its pool (negative indexes count from the
pool's end), so an address depends on its owner's position, never on what else is allocated:
growing a fabric appends (docs/design.md, "Growing a fabric").
"""

from __future__ import annotations

import ipaddress

from twin.errors import DesignError


class Pool:
    """Allocation by position from one IPv4 pool named by its intent key."""

    def __init__(self, network: str, key: str, file: str) -> None:
        self.network = ipaddress.IPv4Network(network)
        self.key, self.file = key, file
        self._taken: set[ipaddress.IPv4Network] = set()

    def _short(self, fit: int, what: str) -> DesignError:
        return DesignError(
            self.file,
            f"addressing.{self.key}",
            f"pool {self.network} is too small: {fit} {what} fit, more are needed",
        )

    def at(self, index: int, prefixlen: int, what: str, fit: int = 0) -> ipaddress.IPv4Network:
        """The `index`-th aligned subnet of this length, refused when outside the pool (of
        which `fit` are usable, all when 0) or already handed out.

        >>> pool = Pool("10.1.0.0/29", "fabric", "f.yaml")
        >>> str(pool.at(1, 31, "/31 links")), str(pool.at(-1, 31, "/31 links"))
        ('10.1.0.2/31', '10.1.0.6/31')
        """
        bits = prefixlen - self.network.prefixlen
        count = 2**bits if bits >= 0 else 0
        fit = fit or count
        if not -count <= index < count:
            raise self._short(fit, what)
        size = 2 ** (32 - prefixlen)
        start = int(self.network.network_address) + index % count * size
        net = ipaddress.IPv4Network((start, prefixlen))
        if net in self._taken:
            raise self._short(fit, what)
        self._taken.add(net)
        return net

    def host(self, index: int) -> ipaddress.IPv4Address:
        """The `index`-th address after the pool's network address."""
        fit = self.network.num_addresses - 1
        if index >= fit:
            raise self._short(fit, "addresses")
        return self.at(index + 1, 32, "addresses", fit).network_address

    def subnet(self, index: int, prefixlen: int) -> ipaddress.IPv4Network:
        """The `index`-th subnet of this length."""
        return self.at(index, prefixlen, f"/{prefixlen} subnets")

    def pair(self, index: int) -> tuple[str, str, str]:
        """The `index`-th /31 as (low address, high address, prefix)."""
        net = self.at(index, 31, "/31 links")
        return f"{net[0]}/31", f"{net[1]}/31", str(net)


def subnet_for(hosts: int) -> int:
    """Smallest prefix length holding `hosts` addresses plus network and broadcast.

    >>> subnet_for(13 + 2), subnet_for(62)
    (27, 26)
    """
    length = 32
    while 2 ** (32 - length) - 2 < hosts:
        length -= 1
    return length
