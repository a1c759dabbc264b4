"""The algorithm a collective phase runs: as the scenario names it, or with `auto` the one
NCCL's tuning model picks for the fabric's servers and the phase's size (`traffic.tuning`)."""

from __future__ import annotations

from traffic.tuning import choice
from twin.intent.fabric import Servers


def rank_bps(servers: Servers) -> float:
    """A rank's network bandwidth (b/s): its NIC ports (both of a dual-homed server)."""
    return servers.nic_speed * (2 if servers.dual_homed else 1) * 1e6


def algorithm(name: str, kind: str, ranks: int, servers: Servers, message: int) -> str:
    """`name` unless `auto`; `auto`: an All-Reduce runs NCCL's choice of ring or tree for
    `ranks` ranks (servers; on a rail fabric one rail's worth of them per server) of the
    fabric's GPUs and NICs and `message` bytes; other collectives their only algorithm (ring,
    all-to-all's direct exchange)."""
    if name != "auto":
        return name
    if kind != "all_reduce" or ranks < 2:
        return "ring"
    nodes = ranks // servers.nics if servers.rails else ranks
    nics = servers.nics if servers.rails else (2 if servers.dual_homed else 1)
    node_bps = servers.nic_speed * 1e6 * nics
    return choice(max(nodes, 2), servers.gpus, nics, node_bps / 1e9, message).algorithm
