"""Sizing by the article's rules: how many leaves, spines and pods an intent needs.

A leaf's ports are split into server ports, MLAG peer-link ports and uplinks; the uplinks go
to every spine of the leaf's pod, `uplinks_per_spine` links each (bundled into one PortChannel
when more than one), so the ECMP width between leaves is the spine count. When the spines'
radix cannot reach every leaf, leaves are grouped into pods under a super-spine layer.

A rail-optimized fabric (`servers.rails`) has `nics` rails: a scalable unit is the servers one
leaf's server ports hold, and it gets one leaf (a pair when dual-homed) per rail, so NIC k of
each of its servers lands on rail k's leaf (docs/rails.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from twin.errors import DesignError
from twin.intent.fabric import Fabric


@dataclass(frozen=True)
class Sizing:
    """The figures that fix the shape of a fabric."""

    leaves: int
    spines_per_pod: int
    pods: int
    superspines: int
    uplinks_per_spine: int
    server_ports_per_leaf: int
    peer_link_ports: int
    leaves_per_pod: int

    @property
    def uplinks(self) -> int:
        """Uplink ports per leaf."""
        return self.spines_per_pod * self.uplinks_per_spine

    @property
    def spines(self) -> int:
        """Spines in the whole fabric."""
        return self.spines_per_pod * self.pods


def rails_of(fabric: Fabric) -> int:
    """Leaf groups per scalable unit: the NICs per server on rails, else 1."""
    return fabric.servers.nics if fabric.servers.rails else 1


def pod_capacity(fabric: Fabric, per_spine: int) -> int:
    """The most leaves a three-tier pod takes: half the spines' ports go down, in whole
    scalable units (or leaf pairs when fewer fit)."""
    per_pod = fabric.spines.ports // 2 // per_spine
    per_group = 2 if fabric.servers.dual_homed else 1
    per_unit = per_group * rails_of(fabric)
    return per_pod - per_pod % (per_unit if per_pod >= per_unit else per_group)


def capacity(fabric: Fabric, sizing: Sizing) -> tuple[int, int]:
    """(most leaves, most pods) the fabric can grow to in its tiers, its spines and
    super-spines as designed: what positional allocation sizes its blocks by
    (docs/design.md, "Growing a fabric")."""
    if sizing.pods == 1 and not sizing.superspines:
        return fabric.spines.ports // sizing.uplinks_per_spine, 1
    pods = max(sizing.pods, fabric.superspines.ports // sizing.spines_per_pod)
    return pod_capacity(fabric, sizing.uplinks_per_spine) * pods, pods


def _uplinks_for(fabric: Fabric, down_ports: int) -> tuple[int, int]:
    """(spines, uplinks per spine) for a leaf with `down_ports` server ports."""
    spines, per_spine = fabric.spines.count, fabric.leaves.uplinks_per_spine
    if spines and per_spine:
        return spines, per_spine
    up_per_port = fabric.uplink_speed * fabric.oversubscription.target
    needed = math.ceil(down_ports * fabric.servers.nic_speed / up_per_port)
    if spines:
        return spines, max(1, math.ceil(needed / spines))
    if per_spine:
        return max(1, math.ceil(needed / per_spine)), per_spine
    return max(1, needed), 1


def _most_ports(fabric: Fabric, free: int) -> int:
    """The most server ports a leaf with `free` ports (beside its peer-link) keeps beside the
    uplinks sized for them; 0 when none fit."""
    for down in range(free, 0, -1):
        spines, per_spine = _uplinks_for(fabric, down)
        if down + spines * per_spine <= free:
            return down
    return 0


def size(fabric: Fabric, file: str) -> Sizing:
    """Size the fabric described by the intent, or refuse it with a `DesignError`.

    With `servers.per_rack`, a rack (leaf group, or scalable unit on rails) holds that many
    servers, filled in order, so neither a leaf's ports nor its uplinks depend on the server
    count; without it the racks (as many as `leaves.count` gives, else as the most server
    ports a leaf keeps need) share the servers evenly (docs/design.md, "Racks and ports")."""
    servers = fabric.servers
    dual = servers.dual_homed
    if not servers.rails and dual and servers.nics != 2:
        raise DesignError(file, "servers.nics", "dual-homed servers need 2 NICs")
    if not servers.rails and not dual and servers.nics != 1:
        raise DesignError(file, "servers.nics", "single-homed servers have 1 NIC")
    rails = rails_of(fabric)
    peer = fabric.leaves.peer_link_ports if dual else 0
    free = fabric.leaves.ports - peer
    per_group = 2 if dual else 1
    per_unit = per_group * rails
    if fabric.leaves.count is not None:
        if fabric.leaves.count % per_unit:
            problem = (
                f"{rails} rails need leaves in multiples of {per_unit} (a scalable unit)"
                if servers.rails
                else "dual-homed servers need leaves in MLAG pairs"
            )
            raise DesignError(file, "leaves.count", problem)
        units = fabric.leaves.count // per_unit
        down = servers.per_rack or math.ceil(servers.count / units)
        if units * down < servers.count:
            raise DesignError(
                file,
                "servers.per_rack",
                f"{units} x {down} servers per rack hold {units * down}, "
                f"fewer than the {servers.count} servers",
            )
    else:
        down = servers.per_rack or _most_ports(fabric, free)
        if down == 0:
            raise DesignError(
                file, "leaves.ports", f"{fabric.leaves.ports} ports leave no room for servers"
            )
        units = math.ceil(servers.count / down)
        down = servers.per_rack or math.ceil(servers.count / units)
    # Derived spines are as many as the servers need (the fullest rack's, not its ports').
    sized_for = down if fabric.spines.count else min(down, servers.count)
    spines, per_spine = _uplinks_for(fabric, sized_for)
    uplinks = spines * per_spine
    if down + uplinks > free:
        raise DesignError(
            file,
            "leaves.ports",
            f"{fabric.leaves.ports} ports cannot hold {down} server ports, {peer} peer-link "
            f"ports and {uplinks} uplinks",
        )
    ratio = sized_for * servers.nic_speed / (uplinks * fabric.uplink_speed)
    if ratio > fabric.oversubscription.max + 1e-9:
        raise DesignError(
            file,
            "oversubscription.max",
            f"leaves would be {ratio:.2f}:1 oversubscribed, above {fabric.oversubscription.max}",
        )
    return tiers(fabric, file, units * per_unit, spines, per_spine, down, peer)


def tiers(
    fabric: Fabric, file: str, leaves: int, spines: int, per_spine: int, down: int, peer: int
) -> Sizing:
    """Two tiers when the spines reach every leaf, else pods under super-spines."""
    radix = fabric.spines.ports
    if leaves * per_spine <= radix and fabric.superspines.count is None:
        return Sizing(leaves, spines, 1, 0, per_spine, down, peer, leaves)
    spine_down = radix // 2
    per_pod = pod_capacity(fabric, per_spine)
    if per_pod < 1 or (fabric.servers.dual_homed and per_pod < 2):
        raise DesignError(
            file, "spines.ports", f"{radix} ports cannot reach a leaf pair in a three-tier pod"
        )
    per_pod = min(per_pod, leaves)
    pods = math.ceil(leaves / per_pod)
    supers = fabric.superspines.count or radix - spine_down
    if supers > radix - spine_down:
        raise DesignError(
            file,
            "superspines.count",
            f"spines have {radix - spine_down} ports up, too few for {supers} super-spines",
        )
    if pods * spines > fabric.superspines.ports:
        raise DesignError(
            file,
            "superspines.ports",
            f"{pods} pods x {spines} spines need {pods * spines} super-spine ports, "
            f"there are {fabric.superspines.ports}",
        )
    return Sizing(leaves, spines, pods, supers, per_spine, down, peer, per_pod)
