"""SONiC-VS switches after containerlab has started them: readiness, FRR, BGP sessions.

Containerlab's post-deploy starts `supervisord` (which runs the image's start.sh) and bgpd.
A switch is ready when redis answers, orchagent runs, its config was loaded (the hostname in
CONFIG_DB is the node's) and bgpd runs. Then its `frr.conf` is pushed: bfdd first when the
config uses BFD (the image's supervisord has no bfdd program), started detached (`bfdd -d`
keeps an attached exec's pipes open on FRR >= 9, so the exec would never end); then, as
bgpcfgd does before its own pushes (sonic-buildimage src/sonic-bgpcfgd bgpcfgd/main.py,
frr.py `wait_for_daemons`), wait until vtysh reaches every daemon the file configures; then
`vtysh -f` while bgpcfgd may hold FRR's configuration lock: the image's supervisord runs
bgpcfgd whatever `docker_routing_config_mode` says (it is rendered when the image is built),
and bgpcfgd pushes its own configuration at start-up. Since FRR 10.0 `vtysh -f` waits for the
lock itself, polling every 0.1 s and printing "% Can't enter config; candidate datastore
locked by another session" on each try (vtysh/vtysh_config.c `vtysh_read_file`, lib/vty.c
`vty_config_enter`, frr-10.5.4), so the push runs under coreutils `timeout` and a lock still
held after `PUSH_WAIT` is an error that says so; FRR 9 refused at once instead ("Lock already
taken on DS by another session!", mgmtd/mgmt_fe_adapter.c), which is retried until then.
The fabric has converged when every session is Established and
every switch's kernel has a route to every server. Everything here runs in the container
(`docker exec`), argv lists only.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from labs.backend import Session
from labs.ready import not_ready
from twin.errors import LabError
from twin.lab.directory import Lab
from twin.render import sonic_vs

Exec = Callable[[str, list[str]], subprocess.CompletedProcess[str]]
Detach = Callable[[str, list[str]], None]
BFDD = ["/usr/lib/frr/bfdd", "-d", "-A", "127.0.0.1", "-P", "0"]
DAEMONS = ("zebra", "bgpd", "staticd")
"""The daemons bgpcfgd waits for before it configures FRR (bgpcfgd/main.py)."""
LOCKED = "Lock already taken"
"""FRR 9's mgmtd refusing a configuration session while another one holds the lock."""
WAITING = "locked by another session"
"""What FRR >= 10's vtysh prints on each try while it waits for the lock."""
PUSH_WAIT = 60.0
"""Seconds to wait for the daemons and for the config lock (bgpcfgd waits 20 s for the
daemons, then for mgmtd's datastores)."""
PUSH = ["timeout", "-k", "5", f"{PUSH_WAIT:.0f}"]
"""coreutils `timeout` around the push: vtysh would wait for a held lock forever."""
NEIGHBOR = re.compile(r"^ neighbor (\S+) remote-as ", re.M)


def _daemon_running(run: Exec, node: str, daemon: str) -> bool:
    done = run(node, ["supervisorctl", "status", daemon])
    return "RUNNING" in done.stdout


def missing(run: Exec, node: str) -> str | None:
    """What a switch still lacks before its FRR can be configured (None when ready)."""
    if run(node, ["redis-cli", "ping"]).stdout.strip() != "PONG":
        return "redis not answering"
    if not _daemon_running(run, node, "orchagent"):
        return "orchagent not running"
    done = run(node, ["sonic-cfggen", "-d", "-v", "DEVICE_METADATA.localhost.hostname"])
    if done.stdout.strip() != node:
        path = sonic_vs.image()["config_db_path"]
        return f"config not loaded (CONFIG_DB hostname {done.stdout.strip()!r}; {path} unread?)"
    if not _daemon_running(run, node, "bgpd"):
        return "bgpd not running"
    return None


def configure_frr(run: Exec, detach: Detach, lab: Lab, node: str) -> None:
    """Start bfdd (detached) when the config uses BFD, wait until vtysh reaches the daemons,
    then push the container's frr.conf with vtysh, again while the config lock is taken."""
    conf = (lab.path / sonic_vs.FLAVOUR / node / "frr.conf").read_text()
    daemons = list(DAEMONS)
    if any(line.strip() == "bfd" for line in conf.splitlines()):
        detach(node, BFDD)
        daemons.append("bfdd")
    deadline = time.monotonic() + PUSH_WAIT
    while True:
        shown = run(node, ["vtysh", "-c", "show daemons"])
        lacking = [d for d in daemons if shown.returncode != 0 or d not in shown.stdout.split()]
        if not lacking:
            break
        if time.monotonic() > deadline:
            raise LabError(f"{node}: vtysh does not reach {', '.join(lacking)}")
        time.sleep(0.5)
    path = sonic_vs.image()["frr_conf_path"]
    while True:
        done = run(node, [*PUSH, "vtysh", "-f", path])
        said = (done.stdout + done.stderr).strip()
        if done.returncode == 0:
            return
        if done.returncode in (124, 137) and WAITING in said:
            raise LabError(
                f"{node}: {path} not pushed: FRR's configuration lock was still held by another"
                f" session after {PUSH_WAIT:.0f} s"
            )
        if LOCKED not in said or time.monotonic() > deadline:
            raise LabError(f"{node}: {path} was refused: {said[-300:]}")
        time.sleep(0.5)


def expected_peers(lab: Lab, node: str) -> set[str]:
    """The BGP neighbours the switch's container frr.conf configures."""
    conf = (lab.path / sonic_vs.FLAVOUR / node / "frr.conf").read_text()
    return set(NEIGHBOR.findall(conf))


def sessions(run: Exec, lab: Lab, node: str) -> list[Session]:
    """A switch's BGP sessions (`show bgp summary json`)."""
    done = run(node, ["vtysh", "-c", "show bgp summary json"])
    try:
        data: dict[str, Any] = json.loads(done.stdout or "{}")
    except json.JSONDecodeError:
        return []
    peers = data.get("ipv4Unicast", {}).get("peers", {})
    return [
        Session(
            node,
            ip,
            p.get("desc", ""),
            p.get("state", "unknown"),
            int(p.get("pfxRcd", 0)),
            int(p.get("peerUptimeMsec", 0)),
        )
        for ip, p in peers.items()
    ]


def wait(
    run: Exec, lab: Lab, timeout: float, boot: float, on_ready: Callable[[str], None]
) -> tuple[list[Session], list[str]]:
    """Poll every switch until it is ready (then `on_ready` configures it, once) and all its
    BGP sessions are Established: the sessions, and the ones still not Established `timeout`
    s after the last switch was configured. A switch not ready after `boot` + `timeout` s is
    one line naming it (the twin cannot be used); sessions that do not come up are judged."""
    switches = lab.switches()
    deadline = time.monotonic() + boot + timeout
    all_configured = False
    configured: set[str] = set()
    unready_nodes: list[str] = ["not checked"]
    lacking: list[str] = ["not checked"]
    established: list[Session] = []

    def check(node: str) -> tuple[str | None, list[str], list[Session]]:
        if node not in configured:
            why = missing(run, node)
            if why:
                return f"{node}: {why}", [], []
            on_ready(node)
            configured.add(node)
        seen = sessions(run, lab, node)
        up = {s.peer for s in seen if s.state == "Established"}
        names = {s.peer: s for s in seen}
        gaps = [
            f"{node} -> {names[p].name if p in names else p} "
            f"{names[p].state if p in names else 'not configured'}"
            for p in sorted(expected_peers(lab, node) - up)
        ]
        return None, gaps, seen

    with ThreadPoolExecutor(8) as pool:
        while (unready_nodes or lacking) and time.monotonic() < deadline:
            results = list(pool.map(check, switches))
            unready_nodes = [why for why, _, _ in results if why]
            lacking = [gap for _, gaps, _ in results for gap in gaps]
            established = [s for _, _, seen in results for s in seen]
            if not unready_nodes and not all_configured:
                all_configured = True  # the sessions' wait counts from here
                deadline = min(deadline, time.monotonic() + timeout)
            if unready_nodes or lacking:
                time.sleep(1.0)
    if unready_nodes:
        raise not_ready(lab.name, "come up", boot + timeout, unready_nodes)
    return established, lacking


def missing_routes(run: Exec, node: str, addresses: set[str]) -> list[str]:
    """The addresses a switch's kernel has no usable route to (`ip -j route show`: zebra
    installs the fabric's routes there)."""
    done = run(node, ["ip", "-j", "route", "show"])
    try:
        entries: list[dict[str, Any]] = json.loads(done.stdout or "[]")
    except json.JSONDecodeError:
        entries = []
    have = {e.get("dst") for e in entries if "linkdown" not in e.get("flags", [])}
    return [f"{node}: no route to {a}" for a in sorted(addresses - have)]


def wait_routes(run: Exec, lab: Lab, addresses: set[str], timeout: float) -> list[str]:
    """Poll every switch until it has a route to each of `addresses` (BGP's routes follow its
    sessions), at most `timeout` s: what was still missing then (empty once converged)."""
    deadline = time.monotonic() + timeout
    with ThreadPoolExecutor(8) as pool:
        while True:
            found = pool.map(lambda n: missing_routes(run, n, addresses), lab.switches())
            lacking = [gap for gaps in found for gap in gaps]
            if not lacking or time.monotonic() > deadline:
                return lacking
            time.sleep(0.5)
