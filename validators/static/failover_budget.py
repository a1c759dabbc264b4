"""`failover_budget`: every switch detects a dead BGP neighbour fast enough for the intent's
failover budget."""

from __future__ import annotations

import ipaddress

from twin.configs.frr_timers import neighbours
from twin.lab.directory import Lab
from twin.render.config_db import ConfigDb
from validators.registry import Params, static
from validators.result import Finding, Result, verdict


def port_towards(db: ConfigDb, peer: str) -> str:
    """The routed port (interface, PortChannel) whose subnet holds the neighbour's address;
    the neighbour itself when it is an interface name or no subnet holds it."""
    try:
        address = ipaddress.IPv4Address(peer)
    except ValueError:
        return peer
    for table in ("INTERFACE", "PORTCHANNEL_INTERFACE"):
        for key in db.get(table, {}):
            port, _, prefix = key.partition("|")
            if prefix and address in ipaddress.IPv4Interface(prefix).network:
                return port
    return peer


@static("failover_budget", margin_ms=500)
def failover_budget(lab: Lab, params: Params) -> list[Result]:
    """Each BGP neighbour of each switch is declared dead within the intent's failover budget.

    Detection per neighbour comes from the switch's frr.conf (`twin.configs.frr_timers`: BFD
    detect multiplier x receive interval where the neighbour or its peer-group has BFD, the
    BGP hold time where it has none); detection plus `margin_ms` (500: BGP withdrawal and
    FIB programming) must fit in the smaller of the intent's `failover.link_ms` and
    `failover.gray_ms` (a gray failure keeps the carrier up: only BFD sees it). A leaf whose
    BFD was removed fails here, naming each neighbour and the port towards it.

    >>> from validators.examples import tiny_lab
    >>> from validators.registry import get
    >>> lab = tiny_lab()
    >>> failover_budget(lab, get("failover_budget").params({}))[0].status.value
    'pass'
    >>> conf = lab.path / "configs" / "leaf1" / "frr.conf"
    >>> _ = conf.write_text(conf.read_text().replace(" neighbor FABRIC bfd profile fabric\\n", ""))
    >>> found = failover_budget(lab, get("failover_budget").params({}))[0].findings[0]
    >>> found.device, found.port, found.where
    ('leaf1', 'Ethernet24', 'frr.conf router bgp')
    >>> found.message
    'neighbor 10.1.0.1 has no BFD: BGP hold 9 s + 500 ms > failover budget 1400 ms'
    """
    budget = lab.fabric.failover
    limit = min(budget.link_ms or 0, budget.gray_ms or 0)
    margin = float(params["margin_ms"])
    findings, slowest, count = [], 0.0, 0
    for switch in lab.switches():
        db = lab.config_db(switch)
        for peer, d in neighbours(lab.frr_conf(switch)).items():
            count += 1
            slowest = max(slowest, d.ms)
            if d.ms + margin > limit:
                what = "has no BFD: " if d.source.startswith("BGP") else "detects by "
                message = (
                    f"neighbor {peer} {what}{d.source} + {margin:.0f} ms "
                    f"> failover budget {limit} ms"
                )
                findings.append(
                    Finding(switch, message, port_towards(db, peer), "frr.conf router bgp")
                )
    ok = (
        f"{count} BGP neighbours detected within {slowest:.0f} ms + {margin:.0f} ms "
        f"(budget {limit} ms)"
    )
    figures = {"neighbours": count, "slowest_ms": slowest, "budget_ms": limit}
    return [verdict("failover_budget", "fabric", findings, ok, figures)]
