"""Fault injection on a running netns twin, each fault logged to the lab's event log.

Links are named from either end: `leaf1:Ethernet40` (a SONiC port or PortChannel),
`server3:nic0`, or `leaf1:spine2` (the link between two nodes). Faults:

- link down / up: both ends lose carrier (admin down on both veth ends); up restores the
  routes the twin owns on those ports (FRR restores its own). Down may be detected late: with
  a delay (loss-of-signal detection plus FIB programming on a real switch), the link drops
  every frame for that long before its ends go down;
- link flap: down and up `count` times, `period` seconds apart;
- node down / up: every link of the node down and its FRR daemons killed / the reverse; a
  leaf's MLAG member ports come up once its BGP has converged (MLAG's delay restore);
- daemon kill / restart: one FRR daemon of a switch (`bgpd`, `bfdd`, `zebra`);
- loss: random drop of a percentage of the frames leaving both ends (iptables `statistic`);
- rate: both ends' egress shaped with tbf; `clear` removes loss and rate from a link.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from dataclasses import dataclass
from typing import Any

from labs import cmdlog, events, processes, state
from labs.backend import Fault
from labs.netns import frr, netlink
from labs.netns.lifecycle import exec_in
from labs.netns.plan import Plan, Veth, build, port_names
from labs.netns.rtnl import Rtnl
from twin.design.graph import remote_subnets
from twin.errors import LabError
from twin.lab.directory import Lab

COMMENT = "twin-fault"
CUT = f"{COMMENT}-cut"  # a cut link, until it is detected down (`clear` removes it too)
IN_SERVICE_S = 2.0  # longest wait for the kernel to bring ends that came up into service
DELAY_RESTORE_S = 20.0  # longest hold of a rebooted leaf's MLAG member ports (node-up)


@dataclass(frozen=True)
class End:
    """One end of a link in the twin."""

    node: str
    ifname: str


def mlag_members(lab: Lab, node: str) -> set[str]:
    """The Linux ends of a leaf's MLAG member ports: the members of the PortChannels its
    config_db lists in MCLAG_INTERFACE (a split bundle towards a dual-homed server)."""
    if lab.graph.nodes[node]["role"] != "leaf":
        return set()
    db = lab.config_db(node)
    channels = {key.split("|")[1] for key in db.get("MCLAG_INTERFACE", {}) if "|" in key}
    ports = [
        key.split("|")[1]
        for key in db.get("PORTCHANNEL_MEMBER", {})
        if "|" in key and key.split("|")[0] in channels
    ]
    return {lab.ifmap[node][p]["netns"] for p in ports if p in lab.ifmap.get(node, {})}


def resolve_link(lab: Lab, plan: Plan, spec: str) -> tuple[End, End]:
    """The two ends of the link named `NODE:PORT` or `NODE:PEER`."""
    node, _, port = spec.partition(":")
    if node not in lab.graph.nodes or not port:
        raise LabError(f"link {spec!r}: write NODE:PORT or NODE:PEER (e.g. leaf1:spine1)")
    linux = lab.ifmap[node].get(port, {}).get("netns", port)
    for veth in plan.veths:
        ends = [(veth.a, veth.a_if, veth.b, veth.b_if), (veth.b, veth.b_if, veth.a, veth.a_if)]
        for here, here_if, there, there_if in ends:
            if here == node and (here_if == linux or there == port):
                return End(here, here_if), End(there, there_if)
    raise LabError(f"link {spec!r}: {node} has no port or neighbour {port}")


class Faults:
    """Fault verbs on one running lab."""

    def __init__(self, lab: Lab) -> None:
        st = state.load(lab.path)
        if st is None or st.status != "running":
            raise LabError(f"lab {lab.name} is not running (twin deploy {lab.path})")
        self.lab, self.state = lab, st
        self.plan = build(lab)
        self.sockets = netlink.Sockets()

    def close(self) -> None:
        """Release netlink sockets."""
        self.sockets.close()

    def fire(self, fault: Fault) -> dict[str, Any]:
        """Inject one fault; the event it logged (the one place a fault kind becomes a verb)."""
        match fault.kind:
            case "link-down" | "link-up":
                return self.link(str(fault.link), fault.kind == "link-up", fault.delay_ms)
            case "link-flap":
                return self.flap(str(fault.link), fault.period, fault.count, fault.delay_ms)
            case "node-down" | "node-up":
                return self.node(str(fault.node), up=fault.kind == "node-up")
            case "daemon-kill" | "daemon-restart":
                up = fault.kind == "daemon-restart"
                return self.daemon(str(fault.node), fault.daemon or "bgpd", up=up)
            case "loss":
                return self.loss(str(fault.link), float(fault.percent or 0))
            case "rate":
                return self.rate(str(fault.link), float(fault.mbit or 0))
            case "clear":
                return self.clear(str(fault.link))
        raise LabError(f"the netns backend cannot inject {fault.kind}")

    def _ends(self, a: End, b: End) -> list[str]:
        """Both ends of a link as `node:port` with SONiC port names."""
        return [f"{e.node}:{port_names(self.lab, e.node).get(e.ifname, e.ifname)}" for e in (a, b)]

    def _log(self, fault: str, **fields: Any) -> dict[str, Any]:
        return events.append(self.lab.path, "fault", fault=fault, **fields)

    def _set(self, ends: list[End], up: bool, touched: list[End] | None = None) -> None:
        """Set link ends admin up or down, then put the twin's routes on them (and on the
        `touched` ends, whose carrier follows) in line: static routes restored on up, an SVI's
        fallback route held or removed with its members' carrier. On up, the routes wait until
        the kernel has brought every end with carrier into service, and the on-link neighbours
        the twin routes to (a leaf's servers, a server's gateway) are restored before them."""
        for end in ends:
            self.sockets.set_state(self.plan.netns(end.node), end.ifname, up)
        every = [*ends, *(touched or [])]
        if up:
            self._in_service(every)
            for end in every:
                self._neighbours(end)
        for end in every:
            self.sockets.routes(self.plan.nodes[end.node], only_dev=end.ifname)

    def _in_service(self, ends: list[End], timeout: float = IN_SERVICE_S) -> None:
        """Wait until every end with carrier is operationally up (at most `timeout`).

        A veth end opened before its peer gets carrier when the peer opens, but its transmit
        queue is activated only later, by the kernel's link watcher (a work item, late on a
        loaded machine); until then it drops every frame it sends (docs/netns-backend.md).
        """
        deadline = time.monotonic() + timeout
        waiting = list(ends)
        while waiting and time.monotonic() < deadline:
            waiting = [
                e
                for e in waiting
                if self.sockets.carrier(self.plan.netns(e.node), e.ifname)
                and not self.sockets.operational(self.plan.netns(e.node), e.ifname)
            ]
            if waiting:
                time.sleep(0.002)

    def _neighbours(self, end: End) -> None:
        """Hold, at an end that came back up, the neighbours it reaches on-link through the
        twin's host routes (a leaf's server, a server's gateway) at the far end's MAC: what
        MLAG keeps across a member link's outage (the server's bond stays up with its ARP
        entries; the leaves sync ARP over the peer-link), and what spares the first packets
        an ARP round trip, whose loss costs the kernel's 1 s retransmit timer."""
        if not self.sockets.carrier(self.plan.netns(end.node), end.ifname):
            return
        far = self._far(end)
        mac = self.sockets.mac(self.plan.netns(far.node), far.ifname)
        for route in self.plan.nodes[end.node].routes:
            if route.dev == end.ifname and route.dst.endswith("/32"):
                address = route.dst.split("/")[0]
                self.sockets.neighbour(self.plan.netns(end.node), end.ifname, address, mac)

    def _far(self, end: End) -> End:
        """The other end of an end's veth."""
        for v in self.plan.veths:
            if (v.a, v.a_if) == (end.node, end.ifname):
                return End(v.b, v.b_if)
            if (v.b, v.b_if) == (end.node, end.ifname):
                return End(v.a, v.a_if)
        raise LabError(f"{end.node}:{end.ifname} is no link end of the twin")

    def link(self, spec: str, up: bool, delay_ms: float = 0.0) -> dict[str, Any]:
        """Take a link down or bring it back up (both ends).

        Down with `delay_ms`: the link first drops every frame both ways while both ends still
        have carrier (a cut nothing has noticed yet), and goes down `delay_ms` later, when a
        switch would have detected the loss of signal and programmed its FIB; the fault is
        logged when the cut starts.
        """
        a, b = resolve_link(self.lab, self.plan, spec)
        taken = self._ends(a, b)
        # a bundle is one veth: a member's fault takes its PortChannel, and is logged so
        bundle = taken[0].partition(":")[2].startswith("PortChannel")
        ends = {"link": taken[0] if bundle else spec, "ends": taken}
        if up or delay_ms <= 0:
            self._set([a, b], up)
            return self._log("link-up" if up else "link-down", **ends)
        self._cut([a, b], True)
        try:
            event = self._log("link-down", **ends, delay_ms=delay_ms)
            time.sleep(delay_ms / 1000)
            self._set([a, b], False)
        finally:
            self._cut([a, b], False)
        return event

    def _cut(self, ends: list[End], on: bool) -> None:
        """Drop every frame leaving these ends (iptables, both ends at once), or stop."""
        verb = "-A" if on else "-D"
        procs = []
        started = time.monotonic()
        for end in ends:
            rules = "".join(
                f"{verb} {chain} -o {end.ifname} -m comment --comment {CUT} -j DROP\n"
                for chain in ("FORWARD", "OUTPUT")
            )
            argv = ["ip", "netns", "exec", self.plan.netns(end.node), "iptables-restore", "-n"]
            proc = cmdlog.start(argv, stdin=subprocess.PIPE, text=True)
            procs.append((end, argv, proc))
            assert proc.stdin
            proc.stdin.write(f"*filter\n{rules}COMMIT\n")
            proc.stdin.close()
        for end, argv, proc in procs:
            code = proc.wait(timeout=30)
            cmdlog.ended(argv, code, started)
            if code != 0:
                raise LabError(f"{end.node}: iptables-restore: cannot {'cut' if on else 'mend'}")

    def flap(self, spec: str, period: float, count: int, delay_ms: float = 0.0) -> dict[str, Any]:
        """Take a link down and up `count` times, `period` seconds per half-cycle (each down
        detected `delay_ms` after the cut, as `link`)."""
        for _ in range(count):
            self.link(spec, up=False, delay_ms=delay_ms)
            time.sleep(period)
            self.link(spec, up=True)
            time.sleep(period)
        a, b = resolve_link(self.lab, self.plan, spec)
        return self._log(
            "link-flap-done", link=spec, ends=self._ends(a, b), period=period, count=count
        )

    def _veths_of(self, node: str) -> list[Veth]:
        return [v for v in self.plan.veths if node in (v.a, v.b)]

    def node(self, name: str, up: bool) -> dict[str, Any]:
        """Power a node off (links down, daemons killed) or back on.

        A leaf coming back holds its MLAG member ports (towards dual-homed servers) down
        until its BGP has converged, as MLAG switches restore them after a reboot (a delay
        restore): with them up at once, its servers send through it before it has a route
        to anywhere else (docs/netns-backend.md). At most `DELAY_RESTORE_S`; the event
        records the ports held, for how long, and what was still missing if it timed out.
        """
        if name not in self.plan.nodes:
            raise LabError(f"lab {self.lab.name} has no node {name}")
        ends = [End(v.a, v.a_if) if v.a == name else End(v.b, v.b_if) for v in self._veths_of(name)]
        peers = [
            End(v.b, v.b_if) if v.a == name else End(v.a, v.a_if) for v in self._veths_of(name)
        ]
        if not up:
            self._set(ends, False, touched=peers)
            ended = list(self.state.pids.get(name, {}).values())
            processes.end(ended, self.lab.name)
            frr.remove_tmp(ended)
            return self._log("node-down", node=name)
        if name in self.state.pids:
            self._start_daemons(name)
        members = mlag_members(self.lab, name)
        held = [i for i, end in enumerate(ends) if end.ifname in members]
        first = [i for i in range(len(ends)) if i not in held]
        self._set([ends[i] for i in first] + [peers[i] for i in first], True)
        if not held:
            return self._log("node-up", node=name)
        start = time.monotonic()
        waiting = self._until_routed(name)
        self._set([ends[i] for i in held] + [peers[i] for i in held], True)
        fields = {"held": sorted(members), "held_s": round(time.monotonic() - start, 2)}
        return self._log(
            "node-up", node=name, **fields, **({"unrouted": waiting} if waiting else {})
        )

    def _until_routed(self, leaf: str, timeout: float = DELAY_RESTORE_S) -> list[str]:
        """Wait until the leaf's BGP has converged (every session Established, a route to every
        remote server subnet), at most `timeout`; what it still lacked then."""
        deadline = time.monotonic() + timeout
        with contextlib.closing(Rtnl()) as rtnl:
            while True:
                lacking = self._unrouted(leaf, rtnl)
                if not lacking or time.monotonic() > deadline:
                    return lacking
                time.sleep(0.05)

    def _unrouted(self, leaf: str, rtnl: Rtnl) -> list[str]:
        try:
            out = json.loads(frr.vtysh(self.lab.name, leaf, "show bgp summary json") or "{}")
        except (LabError, ValueError):
            return ["bgpd not answering"]
        peers = out.get("ipv4Unicast", {}).get("peers", {})
        lacking = [f"session {ip} {p.get('state')}" for ip, p in peers.items()]
        lacking = [x for x in lacking if not x.endswith(" Established")]
        if not peers:
            lacking.append("no BGP session")
        routes = rtnl.widths(self.plan.netns(leaf))
        return lacking + [s for s in remote_subnets(self.lab.graph, leaf) if not routes.get(s)]

    def _start_daemons(self, name: str, only: list[str] | None = None) -> None:
        conf = self.lab.path / "configs" / name / "frr.conf"
        started = frr.start(self.lab.name, name, self.plan.netns(name), conf, only)
        self.state.pids[name] = {**self.state.pids.get(name, {}), **started}
        self.state.save(self.lab.path)
        frr.apply(self.lab.name, name)

    def daemon(self, node: str, daemon: str, up: bool) -> dict[str, Any]:
        """Kill one FRR daemon of a switch, or restart the switch's missing daemons (all of
        them when zebra is missing: the others cannot follow a new zebra)."""
        pids = self.state.pids.get(node)
        if pids is None or daemon not in pids:
            raise LabError(f"{node} runs no {daemon} (daemons: {', '.join(pids or []) or 'none'})")
        if up:
            alive = {d: p for d, p in pids.items() if processes.belongs(p, self.lab.name)}
            missing = [d for d in pids if d not in alive]
            if "zebra" in missing:
                processes.end(list(alive.values()), self.lab.name)
                frr.remove_tmp(list(alive.values()))
                self._start_daemons(node)
            elif missing:
                self._start_daemons(node, missing)
        else:
            processes.end([pids[daemon]], self.lab.name)
            frr.remove_tmp([pids[daemon]])
        return self._log("daemon-restart" if up else "daemon-kill", node=node, daemon=daemon)

    def _both_ends(self, spec: str, argv: list[str], check: bool = True) -> tuple[End, End]:
        """Run a command (with {if} for the interface) in the namespace of both link ends."""
        a, b = resolve_link(self.lab, self.plan, spec)
        for end in (a, b):
            done = exec_in(self.lab, end.node, [arg.format(dev=end.ifname) for arg in argv])
            if check and done.returncode != 0:
                raise LabError(f"{end.node}: {' '.join(argv)}: {done.stderr.strip()}")
        return a, b

    def loss(self, spec: str, percent: float) -> dict[str, Any]:
        """Drop `percent` % of the frames leaving each end of the link, at random."""
        if not 0 < percent <= 100:
            raise LabError(f"loss {percent}: a percentage in (0, 100]")
        for chain in ("FORWARD", "OUTPUT"):
            a, b = self._both_ends(
                spec,
                [
                    "iptables",
                    "-A",
                    chain,
                    "-o",
                    "{dev}",
                    "-m",
                    "statistic",
                    "--mode",
                    "random",
                    "--probability",
                    f"{percent / 100:.6f}",
                    "-m",
                    "comment",
                    "--comment",
                    COMMENT,
                    "-j",
                    "DROP",
                ],
            )
        return self._log("loss", link=spec, ends=self._ends(a, b), percent=percent)

    def rate(self, spec: str, mbit: float) -> dict[str, Any]:
        """Shape both ends of the link to `mbit` Mb/s with tbf."""
        burst = max(16, int(mbit * 1000 / 8 / 250))  # 4 ms worth, in KB, at least 16 KB
        a, b = self._both_ends(
            spec,
            [
                "tc",
                "qdisc",
                "replace",
                "dev",
                "{dev}",
                "root",
                "tbf",
                "rate",
                f"{mbit}mbit",
                "burst",
                f"{burst}kb",
                "latency",
                "50ms",
            ],
        )
        return self._log("rate", link=spec, ends=self._ends(a, b), mbit=mbit)

    def clear(self, spec: str) -> dict[str, Any]:
        """Remove loss rules and shaping from both ends of the link."""
        self._both_ends(spec, ["tc", "qdisc", "del", "dev", "{dev}", "root"], check=False)
        a, b = resolve_link(self.lab, self.plan, spec)
        for end in (a, b):
            listing = exec_in(self.lab, end.node, ["iptables", "-S"]).stdout.splitlines()
            for rule in listing:
                if COMMENT in rule and f"-o {end.ifname} " in rule + " ":
                    exec_in(
                        self.lab, end.node, ["iptables", *rule.replace("-A ", "-D ", 1).split()]
                    )
        return self._log("clear", link=spec, ends=self._ends(a, b))
