"""Probe flows: paced UDP between two servers of a running netns twin, with loss windows.

A sender in the source server's namespace sends each flow (one UDP socket per source port)
at `pps` packets per second, a sequence number and send time in each packet; a receiver in
the destination's namespace counts them and records every run of missing sequence numbers.
A flow's loss window is its longest such run, in packets, divided by its rate: at 1,000 pps
it resolves to 1 ms. The sender stops at the end it was started with, or at the one it is
given later (`until`): a probe can be held until something slow it observes has happened.
Both end within a second when the process that started them dies (SIGKILL included). The
probes go through the kernels' own routing (the servers' ECMP included), so
`labs.netns.paths.pin` can choose flows that cross a given element.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from labs import cmdlog
from labs.netns.paths import UdpFlow
from labs.netns.plan import Plan
from labs.processes import lab_env

SENDER = r"""
import json, os, select, socket, struct, sys, time
src, dst, dport = sys.argv[1], sys.argv[2], int(sys.argv[3])
pps, duration = float(sys.argv[4]), float(sys.argv[5])
socks = []
for sport in json.loads(sys.argv[6]):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((src, sport))
    s.connect((dst, dport))
    s.setblocking(False)
    socks.append(s)
told, watch, parent = {}, [0], os.getppid()
def listen(timeout):
    global watch
    if os.getppid() != parent:  # the run that started it has died: stop now
        told["end"] = 0.0
        watch = []
    if select.select(watch, [], [], timeout)[0]:
        data = os.read(0, 4096).decode()
        if not data:
            watch = []
        for line in data.splitlines():
            key, value = line.split()
            told[key] = float(value)
print("ready", flush=True)
while "start" not in told and watch:
    listen(1.0)
pack, sent = struct.Struct("!Id").pack, [0] * len(socks)
start = max(told.get("start", 0.0), time.time())
seq = 0
if "start" in told:
    print("started", start, flush=True)
while "start" in told:
    due = start + seq / pps
    end = told.get("end", start + duration)
    if due >= end:
        break
    wait = due - time.time()
    if wait > 0 or watch or seq % 256 == 0:
        listen(max(0.0, wait))
        if time.time() < due:
            continue
    for i, s in enumerate(socks):
        try:
            s.send(pack(seq, time.time()) + bytes(52))
            sent[i] += 1
        except OSError:
            pass
    seq += 1
print(json.dumps({"sent": sent, "started": start, "ended": time.time()}))
"""

RECEIVER = r"""
import json, os, select, socket, struct, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
s.bind((sys.argv[1], int(sys.argv[2])))
unpack, flows = struct.Struct("!Id").unpack_from, {}
print("ready", flush=True)
parent = os.getppid()
while os.getppid() == parent:  # until told, or the run that started it has died
    ready, _, _ = select.select([s, 0], [], [], 0.5)
    while s in ready:
        try:
            data, (_, sport) = s.recvfrom(2048, socket.MSG_DONTWAIT)
        except BlockingIOError:
            break
        now = time.time()
        seq, _ = unpack(data)
        f = flows.setdefault(sport, {"received": 0, "last": -1, "at": 0.0, "gaps": []})
        f["received"] += 1
        if seq > f["last"] + 1:
            f["gaps"].append([f["last"] + 1, seq - f["last"] - 1, f["at"], now])
        f["last"], f["at"] = max(seq, f["last"]), now
    if 0 in ready:  # told to stop (a line), or the end of its input; what arrived is read
        os.read(0, 4096)
        break
print(json.dumps(flows))
"""


@dataclass(frozen=True)
class FlowLoss:
    """What one probe flow lost."""

    flow: UdpFlow
    sent: int
    received: int
    last_seq: int  # the last sequence number received (-1: none)
    gaps: list[tuple[int, int, float, float]]  # (first lost seq, lost, last before, first after)
    pps: float

    @property
    def window_ms(self) -> float:
        """The longest run of lost packets, as time at the flow's rate (1/pps resolution)."""
        return max((g[1] for g in self.gaps), default=0) * 1000 / self.pps

    @property
    def recovered(self) -> bool:
        """Whether the flow was delivered again by its end (its last packet arrived)."""
        return self.last_seq == self.sent - 1

    def as_dict(self) -> dict[str, Any]:
        """The figures, for reports and benches."""
        return {
            "sport": self.flow.sport,
            "sent": self.sent,
            "received": self.received,
            "lost": self.sent - self.received,
            "window_ms": round(self.window_ms, 1),
            "recovered": self.recovered,
        }


class Probe:
    """Paced UDP flows from one server to one address; `start` (after `spawn` ahead, or not),
    then `wait` for the figures (with `started` and `ended` as they were)."""

    def __init__(self, plan: Plan, flows: list[UdpFlow], pps: float, duration: float):
        ends = {(f.src, f.dst, f.dst_ip, f.dport) for f in flows}
        if len(ends) != 1:
            raise ValueError("one probe: one source server, one destination address and port")
        self.lab, self.flows, self.pps, self.duration = plan.lab, flows, pps, duration
        self.src_ns, self.dst_ns = plan.netns(flows[0].src), plan.netns(flows[0].dst)
        self._rx: subprocess.Popen[str] | None = None
        self._tx: subprocess.Popen[str] | None = None
        self.started = self.ended = self.ends = 0.0

    def _spawn(self, netns: str, script: str, *args: str) -> subprocess.Popen[str]:
        return cmdlog.start(
            ["ip", "netns", "exec", netns, sys.executable, "-c", script, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=lab_env(self.lab),
        )

    def spawn(self) -> None:
        """Start the receiver, then the sender, which waits to be told when to send (`start`)."""
        flow = self.flows[0]
        self._rx = self._spawn(self.dst_ns, RECEIVER, flow.dst_ip, str(flow.dport))
        assert self._rx.stdout
        if self._rx.stdout.readline().strip() != "ready":
            raise RuntimeError(f"probe receiver in {self.dst_ns}: {self._rx.stderr}")
        sports = json.dumps([f.sport for f in self.flows])
        self._tx = self._spawn(
            self.src_ns,
            SENDER,
            flow.src_ip,
            flow.dst_ip,
            str(flow.dport),
            str(self.pps),
            str(self.duration),
            sports,
        )
        assert self._tx.stdout
        if self._tx.stdout.readline().strip() != "ready":
            raise RuntimeError(f"probe sender in {self.src_ns}: {self._tx.communicate()[1]}")

    def start(self) -> float:
        """Spawn (unless spawned ahead) and have the sender start sending now, for `duration`
        unless told otherwise (`until`); returns when it began (epoch seconds)."""
        if self._tx is None:
            self.spawn()
        self._tell("start", time.time())
        assert self._tx and self._tx.stdout
        line = self._tx.stdout.readline().split()
        if line[:1] != ["started"]:
            raise RuntimeError(f"probe sender in {self.src_ns}: {self._tx.communicate()[1]}")
        self.started = float(line[1])
        self.ends = self.ends or self.started + self.duration
        return self.started

    def until(self, end: float) -> None:
        """Stop sending at `end` (epoch seconds) instead: sooner or later than planned."""
        self.ends = end
        self._tell("end", end)

    def _tell(self, key: str, value: float) -> None:
        if self._tx is not None and self._tx.stdin is not None:
            with contextlib.suppress(BrokenPipeError, ValueError):  # the sender has ended
                self._tx.stdin.write(f"{key} {value}\n")
                self._tx.stdin.flush()

    def wait(self) -> list[FlowLoss]:
        """Wait for the sender to finish (`ended` is then when), stop the receiver; each
        flow's losses."""
        assert self._tx and self._rx
        out, err = self._tx.communicate(timeout=max(0.0, self.ends - time.time()) + 30)
        if self._tx.returncode != 0:
            self._rx.kill()
            raise RuntimeError(f"probe sender in {self.src_ns}: {err.strip()}")
        told = json.loads(out.splitlines()[-1])  # after a "started" line nobody read
        sent, self.started, self.ended = told["sent"], float(told["started"]), told["ended"]
        # Told to stop in words: the end of its input may never come while processes forked
        # from this one (traffic workers) hold a copy of the pipe.
        got, err = self._rx.communicate("stop\n", timeout=30)
        if self._rx.returncode != 0:
            raise RuntimeError(f"probe receiver in {self.dst_ns}: {err.strip()}")
        seen = json.loads(got)
        results = []
        for flow, n in zip(self.flows, sent, strict=True):
            f = seen.get(str(flow.sport), {"received": 0, "last": -1, "gaps": []})
            gaps = [(int(g[0]), int(g[1]), float(g[2]), float(g[3])) for g in f["gaps"]]
            if f["last"] < n - 1:  # lost up to the end: a run that never closed
                gaps.append((f["last"] + 1, n - 1 - f["last"], 0.0, 0.0))
            results.append(FlowLoss(flow, n, f["received"], f["last"], gaps, self.pps))
        return results

    def stop(self) -> None:
        """End the probe's processes, if still running (after an error)."""
        for proc in (self._tx, self._rx):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
