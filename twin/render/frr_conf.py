"""Render each switch's `frr.conf`: eBGP to every fabric neighbour, ECMP, BFD.

The shape follows SONiC's bgpcfgd templates: a peer group for the fabric, `bgp bestpath
as-path multipath-relax` so that paths through different leaves' ASes are equal, and
`maximum-paths`; loopbacks and server subnets are advertised with `network` statements.
"""

from __future__ import annotations

from twin.design.graph import Design, l3_interfaces, ports_of


def render(d: Design, node: str) -> str:
    """The `frr.conf` of one switch."""
    f = d.fabric
    attrs = d.graph.nodes[node]
    lines = [
        "frr version 8.4",
        "frr defaults datacenter",
        f"hostname {node}",
        "service integrated-vtysh-config",
        "!",
    ]
    if f.bfd.enabled:
        lines += [
            "bfd",
            " profile fabric",
            f"  detect-multiplier {f.bfd.multiplier}",
            f"  transmit-interval {f.bfd.interval_ms}",
            f"  receive-interval {f.bfd.interval_ms}",
            " exit",
            "exit",
            "!",
        ]
    lines += [
        f"router bgp {attrs['asn']}",
        f" bgp router-id {attrs['router_id']}",
        " no bgp ebgp-requires-policy",
        " no bgp default ipv4-unicast",
        " bgp bestpath as-path multipath-relax",
        f" coalesce-time {f.bgp.coalesce_ms}",
        f" timers bgp {f.bgp.keepalive} {f.bgp.holdtime}",
        " neighbor FABRIC peer-group",
        " neighbor FABRIC timers connect 5",
    ]
    if f.bfd.enabled:
        lines.append(" neighbor FABRIC bfd profile fabric")
    for _, (_, ports) in sorted(l3_interfaces(ports_of(d.graph, node)).items()):
        peer = ports[0]
        address = str(peer.peer_ip).split("/")[0]
        lines += [
            f" neighbor {address} remote-as {d.graph.nodes[peer.peer]['asn']}",
            f" neighbor {address} peer-group FABRIC",
            f" neighbor {address} description {peer.peer}",
        ]
    lines += [" !", " address-family ipv4 unicast", f"  network {attrs['loopback']}"]
    if attrs["role"] == "leaf":
        lines.append(f"  network {attrs['subnet']}")
    lines += [
        "  neighbor FABRIC activate",
        f"  maximum-paths {f.bgp.maximum_paths}",
        " exit-address-family",
        "exit",
        "!",
    ]
    return "\n".join(lines) + "\n"
