"""Where a PFC priority lives on a SONiC switch, from the lab's config_db: its egress queue,
its ingress priority group, whether a port is lossless on it, and which bundle a port is in.

SONiC counts ECN marks and lossy drops per egress queue and lossless drops per ingress
priority group, while a twin counts per priority; the lab's own maps translate: a priority
is the traffic class of that number (the DSCP_TO_TC_MAP sends each class's DSCP to the TC of
its priority), `TC_TO_QUEUE_MAP` gives its queue and `TC_TO_PRIORITY_GROUP_MAP` its PG, and a
port is lossless on the priorities its `PORT_QOS_MAP` entry's `pfc_enable` lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from twin.lab.directory import Lab

PRIORITIES = range(8)


def _map(db: dict[str, Any], table: str) -> dict[int, int]:
    """A number -> number map of the switch (the first of its table: a lab renders one)."""
    entries = db.get(table)
    first = next(iter(entries.values()), None) if isinstance(entries, dict) else None
    if not isinstance(first, dict):
        return {}
    return {int(k): int(v) for k, v in first.items() if str(k).isdigit() and str(v).isdigit()}


@dataclass(frozen=True)
class SwitchMaps:
    """One switch's priority -> queue and PG, lossless priorities per port, bundles."""

    queue: dict[int, int]
    pg: dict[int, int]
    lossless: dict[str, frozenset[int]]
    bundle: dict[str, str]
    ports: frozenset[str]

    def priorities_of_queue(self, queue: int) -> list[int]:
        """The priorities whose traffic the queue holds."""
        return [p for p in PRIORITIES if self.queue.get(p, p) == queue]

    def priorities_of_pg(self, pg: int) -> list[int]:
        """The priorities whose traffic the PG holds."""
        return [p for p in PRIORITIES if self.pg.get(p, 0) == pg]


def of(lab: Lab, switch: str) -> SwitchMaps:
    """A switch's maps, read from its config_db.json."""
    db: dict[str, Any] = dict(lab.config_db(switch))
    lossless: dict[str, frozenset[int]] = {}
    for port, entry in db.get("PORT_QOS_MAP", {}).items():
        enable = str(entry.get("pfc_enable", "")) if isinstance(entry, dict) else ""
        lossless[port] = frozenset(int(p) for p in enable.split(",") if p.strip().isdigit())
    bundle = {
        key.split("|", 1)[1]: key.split("|", 1)[0]
        for key in db.get("PORTCHANNEL_MEMBER", {})
        if "|" in key
    }
    return SwitchMaps(
        _map(db, "TC_TO_QUEUE_MAP"),
        _map(db, "TC_TO_PRIORITY_GROUP_MAP"),
        lossless,
        bundle,
        frozenset(db.get("PORT", {})),
    )
