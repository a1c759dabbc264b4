"""Watch a running twin and log the state changes it sees to the lab's event log.

BGP session changes come from each bgpd's own log (`%ADJCHANGE` lines, millisecond
timestamps); route changes from polling the leaves' kernel FIBs over netlink: a prefix whose
number of next hops changes, appears or is withdrawn; FRR daemons that died from polling the
daemons the lab's state records (`daemon` events, and at the end one `daemons` event saying
how many were watched, for the `daemons` validator).
"""

from __future__ import annotations

import contextlib
import re
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

from labs import events, processes, state
from labs.netns import frr
from labs.netns.plan import netns_name
from labs.netns.rtnl import Rtnl
from twin.lab.directory import Lab

ADJCHANGE = re.compile(
    r"^(\S+ \S+) BGP: .*%ADJCHANGE: neighbor (\S+?)(?:\((\S+)\))? in vrf \S+ (Up|Down)\s*(.*)$"
)


def parse_adjchange(line: str) -> dict[str, Any] | None:
    """A bgpd `%ADJCHANGE` log line as an event, or None.

    >>> e = parse_adjchange("2026/12/02 16:47:25.125 BGP: [N9HHH-F8H1M] %ADJCHANGE: "
    ...                     "neighbor 10.1.0.3(spine2) in vrf default Down Peer closed the session")
    >>> e["peer"], e["state"], e["reason"]
    ('10.1.0.3', 'down', 'Peer closed the session')
    """
    match = ADJCHANGE.match(line.strip())
    if not match:
        return None
    stamp, peer, _, updown, reason = match.groups()
    fmt = "%Y/%m/%d %H:%M:%S.%f" if "." in stamp else "%Y/%m/%d %H:%M:%S"
    t = datetime.strptime(stamp, fmt).timestamp()
    return {"t": t, "peer": peer, "state": updown.lower(), "reason": reason.strip()}


class Monitor:
    """A background thread logging BGP and FIB changes until stopped."""

    def __init__(self, lab: Lab, interval: float = 0.25) -> None:
        self.lab, self.interval = lab, interval
        self._stop = threading.Event()
        self._state = state.Watched(lab.path)
        self._events = [frr.run_dir(lab.name, s) / frr.EVENT_LOG for s in lab.switches()]
        self._offsets: dict[Path, int] = {}
        self._routes: dict[str, dict[str, int]] = {}
        self._dead: set[int] = set()  # daemons whose death was logged
        self._thread = threading.Thread(target=self._run, name=f"monitor-{lab.name}", daemon=True)
        self.seen: list[dict[str, Any]] = []

    def __enter__(self) -> list[dict[str, Any]]:
        self.start()
        return self.seen

    def __exit__(self, *_: object) -> None:
        self.stop()

    def start(self) -> None:
        """Take the baseline and start watching."""
        for log in self._logs():
            self._offsets[log] = log.stat().st_size
        with contextlib.closing(Rtnl()) as rtnl:
            self._fib(rtnl)
        self._daemons(baseline=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop watching (after one last look)."""
        self._stop.set()
        self._thread.join()
        watched = self._daemons()
        events.append(self.lab.path, "daemons", watched=watched, interval=self.interval)

    def _logs(self) -> list[Path]:
        return [log for log in self._events if log.exists()]

    def _record(self, event: str, **fields: Any) -> None:
        self.seen.append(events.append(self.lab.path, event, **fields))

    def _bgp(self) -> None:
        for log in self._logs():
            lines, self._offsets[log] = frr.read_log(log, self._offsets.get(log, 0))
            for line in lines:
                change = parse_adjchange(line)
                if change:
                    self._record("bgp", node=log.parent.name, **change)

    def _fib(self, rtnl: Rtnl) -> None:
        for leaf in self.lab.nodes("leaf"):
            now = rtnl.widths(netns_name(self.lab.name, leaf))
            before = self._routes.get(leaf)
            self._routes[leaf] = now
            if before is None:
                continue
            for prefix in sorted(set(before) | set(now)):
                if before.get(prefix, 0) != now.get(prefix, 0):
                    self._record(
                        "route",
                        node=leaf,
                        prefix=prefix,
                        paths=now.get(prefix, 0),
                        was=before.get(prefix, 0),
                    )

    def _daemons(self, baseline: bool = False) -> int:
        """Log each recorded daemon found dead (once); how many are recorded. Those already
        dead when the watch starts (`baseline`: a node a fault took down before) are not
        changes this watch saw: logged only if no watch logged their death, and not `seen`."""
        recorded = self._state()
        pids = recorded.pids if recorded is not None else {}
        logged = (
            {e.get("pid") for e in events.read(self.lab.path) if e["event"] == "daemon"}
            if baseline
            else set()
        )
        for node, daemons in pids.items():
            for daemon, pid in daemons.items():
                if pid in self._dead or processes.belongs(pid, self.lab.name):
                    continue
                self._dead.add(pid)
                if not baseline:
                    self._record("daemon", node=node, daemon=daemon, pid=pid, state="died")
                elif pid not in logged:
                    events.append(self.lab.path, "daemon", node=node, daemon=daemon, pid=pid,
                                  state="found dead")  # fmt: skip
        return sum(len(daemons) for daemons in pids.values())

    def _run(self) -> None:
        with contextlib.closing(Rtnl()) as rtnl:
            while True:
                stopping = self._stop.is_set()
                self._bgp()
                self._fib(rtnl)
                self._daemons()
                if stopping:
                    break
                self._stop.wait(self.interval)
