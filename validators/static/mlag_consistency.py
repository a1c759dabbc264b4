"""`mlag_consistency`: each MLAG pair's MCLAG configuration agrees between its two leaves."""

from __future__ import annotations

from ipaddress import IPv4Address
from typing import Any

from twin.configs.qos import number
from twin.lab.directory import Lab
from twin.model.wiring import Wiring, shared
from validators.registry import Params, static
from validators.result import Finding, Result, verdict

KEEPALIVE_S = range(1, 61)
"""keepalive_interval bounds (s) of sonic-mclag.yang."""


def _pairs(lab: Lab) -> list[tuple[str, str]]:
    """Leaves cabled to each other by a peer-link, each pair once."""
    pairs = {
        tuple(sorted((leaf, p.peer)))
        for leaf in lab.nodes("leaf")
        for p in lab.ports(leaf)
        if p.kind == "peerlink"
    }
    return sorted((a, b) for a, b in pairs)


def _domain(db: dict[str, Any]) -> tuple[str, dict[str, str]] | None:
    """The switch's MCLAG domain id and entry (None when it has none)."""
    domains = db.get("MCLAG_DOMAIN", {})
    return next(iter(domains.items())) if domains else None


def _address(text: str | None) -> IPv4Address | None:
    try:
        return IPv4Address(text or "")
    except ValueError:
        return None


def _vlans(db: dict[str, Any], port: str) -> dict[str, str]:
    """VLAN id -> tagging mode of every VLAN `port` is a member of."""
    vlans = db.get("VLAN", {})
    found = {}
    for key, attrs in db.get("VLAN_MEMBER", {}).items():
        vlan, _, member = key.partition("|")
        if member == port:
            found[vlans.get(vlan, {}).get("vlanid", vlan)] = attrs.get("tagging_mode", "")
    return found


class _Pair:
    """The checks of one MLAG pair; `findings` collects what is wrong."""

    def __init__(self, wiring: Wiring, a: str, b: str) -> None:
        self.wiring = wiring
        self.a, self.b = a, b
        self.findings: list[Finding] = []
        self.domains = {s: _domain(wiring.configs[s]) for s in (a, b)}
        self.where = {
            s: f"MCLAG_DOMAIN|{d[0]}" if d else "MCLAG_DOMAIN" for s, d in self.domains.items()
        }

    def add(self, switch: str, message: str, port: str, where: str) -> None:
        self.findings.append(Finding(switch, message, port, where))

    def check(self) -> list[Finding]:
        for switch in (self.a, self.b):
            if self.domains[switch] is None:
                self.add(
                    switch,
                    f"no MCLAG_DOMAIN although cabled to {self.peer(switch)}",
                    "",
                    "MCLAG_DOMAIN",
                )
        if all(self.domains.values()):
            self.domain_ids()
            for switch in (self.a, self.b):
                self.side(switch, self.peer(switch))
            self.timers()
        self.interfaces()
        self.empty()
        return self.findings

    def empty(self) -> None:
        """Every PortChannel of both leaves has member ports (the peer-link's is judged with
        the domain)."""
        for switch in (self.a, self.b):
            link = self.entry(switch).get("peer_link")
            members = self.wiring.members.get(switch, {})
            for channel in self.wiring.configs[switch].get("PORTCHANNEL", {}):
                if channel != link and channel not in members:
                    self.add(
                        switch, f"{channel} has no member ports", channel, "PORTCHANNEL_MEMBER"
                    )

    def peer(self, switch: str) -> str:
        return self.b if switch == self.a else self.a

    def entry(self, switch: str) -> dict[str, str]:
        domain = self.domains[switch]
        return domain[1] if domain else {}

    def domain_ids(self) -> None:
        if self.where[self.a] != self.where[self.b]:
            self.add(self.b, f"domain differs from {self.a}'s", "", self.where[self.b])

    def side(self, switch: str, peer: str) -> None:
        """Addresses and peer-link of one leaf, against its peer's."""
        where = self.where[switch]
        mine, theirs = self.entry(switch), self.entry(peer)
        source = _address(mine.get("source_ip"))
        if source is None or self.wiring.owner.get(source, ("",))[0] != switch:
            self.add(switch, f"source_ip {mine.get('source_ip')} is not an address here", "", where)
        peer_ip = _address(mine.get("peer_ip"))
        if peer_ip is None or str(peer_ip) != theirs.get("source_ip"):
            self.add(
                switch,
                f"peer_ip {mine.get('peer_ip')} is not {peer}'s source_ip "
                f"{theirs.get('source_ip')}",
                "",
                where,
            )
        link = mine.get("peer_link", "")
        db = self.wiring.configs[switch]
        far = self.wiring.far(switch, link) if link else None
        members = self.wiring.members.get(switch, {}).get(link, [])
        if link not in db.get("PORTCHANNEL", {}) and link not in db.get("PORT", {}):
            self.add(switch, f"peer_link {link or '(none)'} does not exist", link, where)
        elif link in db.get("PORTCHANNEL", {}) and not members:
            self.add(switch, f"peer_link {link} has no member ports", link, "PORTCHANNEL_MEMBER")
        elif shut := [m for m in members or [link] if (switch, m) in self.wiring.admin_down]:
            self.add(
                switch,
                f"peer_link {link}: member port{'s' * (len(shut) > 1)} {', '.join(shut)} "
                "admin down",
                link,
                "PORT",
            )
        elif far is None or far[0] != peer:
            self.add(switch, f"peer_link {link} is not cabled to {peer}", link, where)
        elif peer_ip is not None and not self.over(switch, peer, peer_ip, link):
            self.add(switch, f"peer_ip {peer_ip} is not reachable over {link}", link, where)

    def over(self, switch: str, peer: str, address: IPv4Address, link: str) -> bool:
        """Whether `switch` reaches `address` on `peer` through the peer-link."""
        owner = self.wiring.owner.get(address)
        if owner is None or owner[0] != peer:
            return False
        for iface, addresses in self.wiring.interfaces[switch].items():
            if any(address in a.network for a in addresses):
                return self.wiring.reach(switch, iface, peer, ()) == link
        return False

    def timers(self) -> None:
        """keepalive_interval 1..60 s, session_timeout at least 3 keepalives, both alike."""
        seen = {}
        for switch in (self.a, self.b):
            entry = self.entry(switch)
            keepalive = number(entry.get("keepalive_interval"), 1)
            timeout = number(entry.get("session_timeout"), 30)
            where = self.where[switch]
            if keepalive not in KEEPALIVE_S:
                self.add(switch, f"keepalive_interval {keepalive} s is outside 1..60", "", where)
            if not 3 * keepalive <= timeout <= 3600:
                self.add(
                    switch,
                    f"session_timeout {timeout} s is outside {3 * keepalive}..3600 (3 keepalives)",
                    "",
                    where,
                )
            seen[switch] = (keepalive, timeout)
        if seen[self.a] != seen[self.b]:
            self.add(
                self.b,
                f"keepalive/timeout {seen[self.b][0]}/{seen[self.b][1]} s, but "
                f"{seen[self.a][0]}/{seen[self.a][1]} s on {self.a}",
                "",
                self.where[self.b],
            )

    def interfaces(self) -> None:
        """Every server cabled to both leaves sits on a PortChannel of the same name on each,
        an MCLAG_INTERFACE of the domain, in the same VLANs, which the peer-link carries."""
        servers: dict[str, dict[str, str]] = {}
        for switch in (self.a, self.b):
            for p in self.wiring.lab.ports(switch):
                if p.kind == "server":
                    servers.setdefault(p.peer, {})[switch] = self.wiring.logical(switch, p.name)
        for server, bundles in sorted(servers.items()):
            if len(bundles) == 2:
                self.server(server, bundles)

    def server(self, server: str, bundles: dict[str, str]) -> None:
        vlans = {}
        for switch, bundle in bundles.items():
            db = self.wiring.configs[switch]
            if bundle not in self.wiring.members.get(switch, {}):
                self.add(switch, f"port to {server} is in no PortChannel", bundle, "PORTCHANNEL")
                return
            domain = self.domains[switch]
            if domain and f"{domain[0]}|{bundle}" not in db.get("MCLAG_INTERFACE", {}):
                self.add(
                    switch,
                    f"{bundle} to {server} is not an MCLAG_INTERFACE",
                    bundle,
                    "MCLAG_INTERFACE",
                )
            vlans[switch] = _vlans(db, bundle)
            link = self.entry(switch).get("peer_link", "")
            carried = _vlans(db, link)
            missing = sorted(v for v in vlans[switch] if v not in carried)
            if link and missing:
                self.add(
                    switch,
                    f"peer_link {link} is not in VLAN {','.join(missing)} of {server}",
                    link,
                    "VLAN_MEMBER",
                )
        if bundles[self.a] != bundles[self.b]:
            self.add(
                self.b,
                f"{server} is on {bundles[self.b]} here, {bundles[self.a]} on {self.a} "
                "(MCLAG pairs interfaces by name)",
                bundles[self.b],
                "PORTCHANNEL_MEMBER",
            )
        elif vlans[self.a] != vlans[self.b]:
            self.add(
                self.b,
                f"VLANs {vlans[self.b]} here, {vlans[self.a]} on {self.a}",
                bundles[self.b],
                "VLAN_MEMBER",
            )


@static("mlag_consistency")
def mlag_consistency(lab: Lab, params: Params) -> list[Result]:
    """Each MLAG pair's MCLAG tables agree between the two leaves. No thresholds.

    Pairs are the leaves the design cables by a peer-link. Per pair: one MCLAG_DOMAIN with the
    same id on both; each `source_ip` an address of its leaf and the other's `peer_ip`,
    reached over the `peer_link`; the peer-link exists and is cabled to the peer;
    keepalive_interval 1..60 s and session_timeout from 3 keepalives to 3600 s, alike on
    both; the peer-link and every PortChannel of the pair has member ports, the peer-link's
    admin up; every server cabled to both leaves sits on a PortChannel of the same name on each,
    an MCLAG_INTERFACE of the domain, in the same VLANs (id and tagging), which the peer-link
    carries too.

    >>> from validators.examples import tiny_lab, edit_json
    >>> lab = tiny_lab()
    >>> mlag_consistency(lab, {})[0].reason
    '1 MLAG pair, 2 dual-homed servers configured alike'
    >>> edit_json(lab, "leaf2", lambda db: db["MCLAG_DOMAIN"]["1"].update(peer_ip="10.3.0.9"))
    >>> print(mlag_consistency(lab, {})[0].findings[0])
    leaf2 MCLAG_DOMAIN|1: peer_ip 10.3.0.9 is not leaf1's source_ip 10.3.0.0
    """
    wiring = shared(lab)
    pairs = _pairs(lab)
    findings = [f for a, b in pairs for f in _Pair(wiring, a, b).check()]
    cabled = {leaf for pair in pairs for leaf in pair}
    for leaf in lab.nodes("leaf"):
        if leaf not in cabled and wiring.configs[leaf].get("MCLAG_DOMAIN"):
            findings.append(
                Finding(leaf, "MCLAG_DOMAIN without a peer-link cabled", "", "MCLAG_DOMAIN")
            )
    dual = sum(len(lab.graph.nodes[s].get("leaves", [])) == 2 for s in lab.nodes("server"))
    plural = "s" if len(pairs) != 1 else ""
    ok = f"{len(pairs)} MLAG pair{plural}, {dual} dual-homed servers configured alike"
    return [
        verdict(
            "mlag_consistency", "fabric", findings, ok, {"pairs": len(pairs), "dual_homed": dual}
        )
    ]
