"""Traffic on a netns twin: where its servers are for `labs.flows` (the senders, receivers
and per-flow results every wall-clock backend shares), and packet captures."""

from __future__ import annotations

import subprocess
from pathlib import Path

from labs import cmdlog
from labs.flows import Servers
from labs.netns.faults import resolve_link
from labs.netns.plan import build, netns_name, port_names
from labs.processes import lab_env
from twin import safeio
from twin.lab.directory import Lab


def servers(lab: Lab) -> Servers:
    """The servers of a netns twin: namespaces `<lab>.<server>`, the lab's host files."""
    names = lab.nodes("server")
    return Servers(
        lab.name, {s: netns_name(lab.name, s) for s in names}, {s: lab.host(s) for s in names}
    )


def start_captures(lab: Lab, links: list[str], out: Path) -> list[subprocess.Popen[bytes]]:
    """tcpdump on one end of each link into OUT/capture/<node>_<port>.pcap (Wireshark opens
    them); in immediate mode, so frames of the run's last second are not left in its buffer.
    tcpdump writes to its standard output, a file twin opened (`twin.safeio`): given a path,
    it opens it as root and follows a link planted there."""
    if not links:
        return []
    plan = build(lab)
    safeio.mkdir(out / "capture")
    started = []
    for spec in links:
        end, _ = resolve_link(lab, plan, spec)
        port = port_names(lab, end.node).get(end.ifname, end.ifname)
        with safeio.writing(out / "capture" / f"{end.node}_{port}.pcap") as pcap:
            started.append(
                cmdlog.start(
                    [
                        "ip",
                        "netns",
                        "exec",
                        netns_name(lab.name, end.node),
                        "tcpdump",
                        "-q",
                        "-U",
                        "--immediate-mode",
                        "-i",
                        end.ifname,
                        "-w",
                        "-",
                    ],
                    stdout=pcap,
                    stderr=subprocess.DEVNULL,
                    env=lab_env(lab.name),
                )
            )
    return started


def stop_captures(started: list[subprocess.Popen[bytes]]) -> None:
    """Stop the captures a run started (by their process, never by name)."""
    for proc in started:
        proc.terminate()
    for proc in started:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
