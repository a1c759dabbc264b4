"""The embedded backend: a lab directory as namespaces, veths and FRR on this machine.

Every switch and server is a network namespace `<lab>.<node>`, every link a veth pair, switches
are routed by real FRR daemons (zebra, staticd, bgpd, bfdd) and servers are set up with pyroute2.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from labs import cmdlog, processes, state
from labs.backend import Progress, quiet
from labs.netns import frr, neighbours, netlink
from labs.netns.cleanup import cleanup, namespaces_of
from labs.netns.plan import Plan, build
from labs.netns.rtnl import Rtnl
from twin.design.graph import short_paths
from twin.errors import LabError
from twin.lab.directory import Lab

LOGS = "logs"


def check_root() -> None:
    """Refuse to run without root."""
    if os.geteuid() != 0:
        raise LabError("the netns backend needs root (namespaces, veths, FRR)")


def _ns_exec(
    netns: str,
    argv: list[str],
    stdin: str | None = None,
    timeout: float = 30,
) -> subprocess.CompletedProcess[str]:
    return cmdlog.run(["ip", "netns", "exec", netns, *argv], stdin=stdin, timeout=timeout)


def proxy_arp_sysctls(interfaces: list[str]) -> dict[str, str]:
    """Proxy ARP on these interfaces, answering at once: the kernel would otherwise hold each
    answer for a random time up to `proxy_delay` (0.8 s), a delay real MCLAG does not have
    (its peer forwards over the peer-link as soon as the server's link is down)."""
    on = {f"net.ipv4.conf.{i}.proxy_arp": "1" for i in interfaces}
    return on | {f"net.ipv4.neigh.{i}.proxy_delay": "0" for i in interfaces}


def is_running(lab: Lab) -> bool:
    """Whether a twin of this lab is recorded and its namespaces exist."""
    st = state.load(lab.path)
    return st is not None and bool(set(st.namespaces) & set(netlink.namespaces()))


def convergence_timeout(lab: Lab) -> float:
    """How long a deploy waits for convergence by default: 60 s, and 2 s more per switch
    beyond 12 (the 3-tier fabric of 200 servers, 78 switches, converged in about 110 s on
    two shared cores)."""
    return 60.0 + 2.0 * max(0, len(lab.switches()) - 12)


def check(lab: Lab) -> None:
    """Refuse, before anything is created, without root or FRR, or with leftovers of another
    run of the lab's name in the way."""
    check_root()
    frr.check_installed()
    if namespaces_of(lab.name):
        raise LabError(f"lab {lab.name} has leftovers from another run; twin cleanup {lab.name}")


def deploy(
    lab: Lab, record: state.Record, timeout: float | None = None, progress: Progress = quiet
) -> dict[str, Any]:
    """Build the twin (recording its namespaces and daemons in `record`) and wait until BGP
    and ECMP have converged (at most `timeout` seconds, `convergence_timeout` by default);
    returns figures, with what had not converged by then (`unconverged`: the twin is left
    up as its configs make it). The lifecycle (`labs.lifecycle`) checked the lab and removes
    what was built on a failure."""
    timeout = timeout or convergence_timeout(lab)
    plan = build(lab)
    start = time.monotonic()
    sockets = netlink.Sockets()
    try:
        progress(f"creating {len(plan.nodes)} namespaces")
        made = []
        try:
            for node in plan.nodes.values():
                netlink.create(node.netns)
                made.append(node.netns)
        finally:
            record.created(namespaces=made)
        raised = neighbours.make_room(len(plan.veths))
        if raised:
            shown = ", ".join(f"{k} {v}" for k, v in raised.items())
            progress(f"raised the host's ARP table limits (shared by all namespaces): {shown}")
        progress(f"creating {len(plan.veths)} links")
        for veth in plan.veths:
            sockets.veth(plan.netns(veth.a), veth, plan.netns(veth.b))
        progress("configuring addresses, routes and sysctls")
        for node in plan.nodes.values():
            netlink.set_sysctls(node.netns, node.sysctls)
            sockets.configure(node)
            if node.proxy_arp:
                netlink.set_sysctls(node.netns, proxy_arp_sysctls(node.proxy_arp))
        for node in plan.nodes.values():
            sockets.routes(node)
        built = time.monotonic() - start
        progress("starting FRR")
        if not frr.realtime():
            progress(
                "this host refuses real-time scheduling: bfdd runs at niceness "
                f"{frr.PRIORITY} (BFD may flap on a loaded machine)"
            )

        started: dict[str, dict[str, int]] = {}

        def start_frr(name: str) -> None:
            conf = lab.path / "configs" / name / "frr.conf"
            started[name] = frr.start(lab.name, name, plan.netns(name), conf)

        try:
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda name: _hold_bfd(plan.netns(name), True), lab.switches()))
                list(pool.map(start_frr, lab.switches()))
        finally:
            record.created(pids=started)
        # Leaves first, then the tiers above, so that most sessions are opened once, by the
        # upper switch towards a leaf that already listens. Collisions remain where both ends'
        # start timers fire together; BGP resolves them, and with BFD held they cost nothing.
        with ThreadPoolExecutor(8) as pool:
            for tier in ("leaf", "spine", "superspine"):
                list(pool.map(lambda name: frr.apply(lab.name, name), lab.nodes(tier)))
        rdma = _servers(plan)
        progress("waiting for BGP and ECMP")
        converge = _converge(lab, plan, timeout)
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda name: _hold_bfd(plan.netns(name), False), lab.switches()))
    finally:
        sockets.close()
    return {
        "nodes": len(plan.nodes),
        "links": len(plan.veths),
        "build_s": round(built, 2),
        "converged_s": round(time.monotonic() - start, 2),
        "rdma": rdma,
        **converge,
    }


BFD_HOLD = ["INPUT", "-p", "udp", "--dport", "3784", "-m", "comment", "--comment", "twin-deploy"]


def _hold_bfd(netns: str, hold: bool) -> None:
    """Keep BFD down on a switch until its BGP sessions are up (drop BFD control packets).

    bgpd (FRR 8.4) registers a peer's BFD session before it knows the local address and
    re-registers it, with the address, when the BGP session comes up. If BFD was already up
    by then, the re-registration reports it down and bgpd tears the new session down
    ("Cease/BFD Down"); it comes back one connect-retry later. That race is lost by about one
    session in ten at deploy, costing seconds. Holding BFD until BGP is established makes the
    re-registration harmless; BFD then comes up and protects the sessions as configured.
    """
    argv = ["iptables", "-I" if hold else "-D", *BFD_HOLD, "-j", "DROP"]
    done = _ns_exec(netns, argv)
    if done.returncode != 0:
        raise LabError(f"{netns}: {' '.join(argv)}: {done.stderr.strip()}")


def _servers(plan: Plan) -> str:
    """DSCP marking rules on servers; soft-RoCE where the kernel has it."""

    def mark(node_name: str) -> None:
        node = plan.nodes[node_name]
        if node.iptables:
            rules = "*mangle\n" + "\n".join(node.iptables) + "\nCOMMIT\n"
            done = _ns_exec(node.netns, ["iptables-restore", "--noflush"], stdin=rules)
            if done.returncode != 0:
                raise LabError(f"{node.name}: iptables-restore: {done.stderr.strip()}")

    servers = [n for n, node in plan.nodes.items() if node.role == "server"]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(mark, servers))
    if not Path("/sys/module/rdma_rxe").exists() or shutil.which("rdma") is None:
        return "soft-RoCE skipped: the kernel has no rdma_rxe module (RoCE is replayed as packets)"
    for name in servers:
        for rxe, netdev in plan.nodes[name].rdma:
            _ns_exec(
                plan.netns(name), ["rdma", "link", "add", rxe, "type", "rxe", "netdev", netdev]
            )
    return "soft-RoCE devices added"


def _converge(lab: Lab, plan: Plan, timeout: float) -> dict[str, Any]:
    """Poll until every leaf has full-width ECMP to every remote server subnet (the design's)
    and every BGP session is Established, at most `timeout` s; what was still missing then
    (`unconverged`, empty once converged): a lab whose configs keep it from converging is
    judged, not refused."""
    start = time.monotonic()
    deadline = start + timeout
    missing: list[str] = ["not checked"]
    routes_s = sessions_s = 0.0
    sessions: list[dict[str, Any]] = []
    with contextlib.closing(Rtnl()) as rtnl:
        while missing and time.monotonic() < deadline:
            missing = _unconverged(lab, plan, rtnl)
            routes_s = time.monotonic() - start
            if not missing:
                sessions = bgp_sessions(lab)
                missing = [
                    f"{s['node']} -> {s['name'] or s['peer']} {s['state']}"
                    for s in sessions
                    if s["state"] != "Established"
                ]
                sessions_s = time.monotonic() - start
            if missing:
                time.sleep(0.2)
    if missing:
        sessions = bgp_sessions(lab)
    figures = {"bgp_sessions": len(sessions), "timeout_s": timeout, "unconverged": missing}
    if not missing:
        figures |= {
            "routes_converged_s": round(routes_s, 2),
            "bgp_established_s": round(sessions_s, 2),
        }
    return figures


def _unconverged(lab: Lab, plan: Plan, rtnl: Rtnl) -> list[str]:
    """Each remote server subnet a leaf does not reach over its full uplink width."""
    return [
        short
        for leaf in lab.nodes("leaf")
        for short in short_paths(lab.graph, leaf, rtnl.widths(plan.netns(leaf)))
    ]


def bgp_sessions(lab: Lab, skip: Iterable[str] = ()) -> list[dict[str, Any]]:
    """Every BGP session of every switch (but those in `skip`): node, peer, peer name, state,
    uptime."""

    def one(node: str) -> list[dict[str, Any]]:
        if node in skip:
            return []
        out = json.loads(frr.vtysh(lab.name, node, "show bgp summary json") or "{}")
        peers = out.get("ipv4Unicast", {}).get("peers", {})
        return [
            {
                "node": node,
                "peer": ip,
                "name": p.get("desc", ""),
                "state": p.get("state"),
                "prefixes": p.get("pfxRcd", 0),
                "uptime_ms": p.get("peerUptimeMsec", 0),
            }
            for ip, p in peers.items()
        ]

    with ThreadPoolExecutor(8) as pool:
        return [s for result in pool.map(one, lab.switches()) for s in result]


def destroy(lab: Lab) -> dict[str, int]:
    """Remove everything the lab's twin created: processes, namespaces, run directories (its
    daemons' logs saved in the lab directory first)."""
    check_root()
    st = state.load(lab.path)
    recorded = [pid for daemons in (st.pids.values() if st else []) for pid in daemons.values()]
    pids = sorted(set(recorded) | set(processes.tagged(lab.name)))
    processes.end(pids, lab.name)
    frr.remove_tmp(pids)
    frr.save_logs(lab.name, lab.path / LOGS)
    return cleanup(lab.name) | {"processes": len(pids)}


def exec_in(
    lab: Lab,
    node: str,
    argv: list[str],
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """Run a command in a node's namespace (`vtysh` on a switch reaches its own daemons)."""
    if node not in lab.graph.nodes:
        raise LabError(f"lab {lab.name} has no node {node}")
    if argv[:1] == ["vtysh"] and lab.graph.nodes[node]["role"] != "server":
        argv = [frr.VTYSH, "--vty_socket", str(frr.run_dir(lab.name, node)), *argv[1:]]
    return _ns_exec(f"{lab.name}.{node}", argv, timeout=timeout)


def inspect(lab: Lab) -> dict[str, Any]:
    """Nodes with their state, BGP sessions, and links with their operational state."""
    plan = build(lab)
    st = state.load(lab.path)
    present = set(netlink.namespaces())
    sockets = netlink.Sockets()
    try:
        nodes = []
        silent = []  # switches whose bgpd cannot answer
        operstate: dict[tuple[str, str], str] = {}
        for name, node in plan.nodes.items():
            pids = st.pids.get(name, {}) if st else {}
            dead = [d for d, p in pids.items() if not processes.belongs(p, lab.name)]
            alive = node.netns in present
            if node.role != "server" and (not alive or not pids or "bgpd" in dead):
                silent.append(name)
            nodes.append(
                {
                    "node": name,
                    "role": node.role,
                    "netns": node.netns,
                    "state": ("up" if not dead else "down: " + ",".join(dead))
                    if alive
                    else "missing",
                }
            )
            if alive:
                for link in sockets[node.netns].get_links():
                    operstate[(name, link.get_attr("IFLA_IFNAME"))] = link.get_attr(
                        "IFLA_OPERSTATE"
                    )
    finally:
        sockets.close()
    links = [
        {
            "a": f"{v.a}:{v.a_if}",
            "b": f"{v.b}:{v.b_if}",
            "kind": v.kind,
            "state": "/".join(
                operstate.get(end, "missing").lower() for end in ((v.a, v.a_if), (v.b, v.b_if))
            ),
        }
        for v in plan.veths
    ]
    return {"lab": lab.name, "nodes": nodes, "bgp": bgp_sessions(lab, silent), "links": links}
