"""Failover probes on a netns twin: paced UDP flows pinned through each faulted element.

For each fault that takes something away (`PROBED`), the twin is asked which flows cross
the faulted element (`labs.netns.paths`: the kernels' own lookups; a link is crossed by a
flow that leaves by either end, a node by a flow it forwards or receives). Candidates are
the server pairs between the servers at the element (its server, or the servers of its
leaf) and those behind other leaves, each way, `CANDIDATE_PORTS` source ports each; per
direction the pair with the most crossing flows is chosen, `flows` of them. They are chosen
before the run, while the machine is idle (thousands of lookups), and their senders and
receivers started then, idle (`spawn`); just before the fault they are traced again (a few
dozen lookups) and, still crossing, told to send: a loaded machine starts no process then.
Flows that no longer cross are replaced by a choice made anew. The probes send at `pps`
(`labs.netns.udpprobe`) from just before the fault until `TAIL_S` after the verb of the
next fault has returned (however slow the verbs: `after`), or, for the last fault, until
the run ends and at least `AFTER_S` after its own verb returned. A fault waits until they
have sent for `LEAD_S`, but never more than `MAX_DELAY_S` past its time (then it fires
without them, and the record says why). When the next fault gives back what the probed one
took (`RESTORES`), the probes are traced after its verb until they cross the element again
(`BACK_WAIT_S` at most) and send `BACK_TAIL_S` more: the record's `restore` says when.
Each fault's record (`failover_probes.json`, docs/observations.md) holds the element, every
flow's traced way before the fault (the evidence that it crossed), its rate, sent and
received counts and gaps with their times; or, when no flow could be pinned, why.
"""

from __future__ import annotations

import contextlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from labs.backend import RESTORES, FailoverProbes, Fault, Progress
from labs.netns.faults import End, resolve_link
from labs.netns.paths import UdpFlow, trace
from labs.netns.plan import Plan, build, port_names
from labs.netns.udpprobe import FlowLoss, Probe
from twin.errors import LabError
from twin.lab.directory import Lab

PROBED = ("link-down", "link-flap", "node-down", "daemon-kill", "loss", "rate")
"""Faults that take something away: the ones probed."""
CANDIDATE_PAIRS = 4  # server pairs tried per direction
CANDIDATE_PORTS = 64  # source ports traced per pair
FIRST_SPORT = 20000  # below the servers' ephemeral ports
FIRST_DPORT = 47000
MIN_SECONDS = 0.5  # a probe shorter than this is not started
LEAD_S = 0.3  # the probe flows send at least this long before the fault
MAX_DELAY_S = 10.0  # a fault waits at most this long past its time for its probes
TAIL_S = 1.0  # the probe flows send this long after the next fault's verb returned
AFTER_S = 6.0  # the last fault's probe flows send at least this long after its verb returned
HOLD_S = 120.0  # a sender never told when to stop (an error) stops this long past its plan
BACK_WAIT_S = 8.0  # how long a restore's probes are traced for their way back (BGP connect 5 s)
BACK_POLL_S = 0.2
BACK_TAIL_S = 2.0  # the probe flows send this long after they are seen back on the element

Element = tuple[End, End] | str
_Chosen = tuple[list[UdpFlow], dict[UdpFlow, list[str]], dict[UdpFlow, str]]
"""One direction's flows, each one's traced way and where it crosses the element."""


@dataclass
class _Probed:
    """One direction's probe of one fault: the flows, their traced ways, the sender."""

    probe: Probe
    paths: dict[UdpFlow, list[str]]
    crossed: dict[UdpFlow, str]


def _element(lab: Lab, plan: Plan, fault: Fault) -> tuple[str, Element, list[str]]:
    """The faulted element's name, as `crosses` takes it, and the nodes at it."""
    if fault.link:
        a, b = resolve_link(lab, plan, fault.link)
        return fault.link, (a, b), [a.node, b.node]
    name = str(fault.node)
    return name, name, [name]


def _hop(lab: Lab, end: End) -> str:
    return f"{end.node}:{port_names(lab, end.node).get(end.ifname, end.ifname)}"


def _crossing(lab: Lab, flow: UdpFlow, path: list[End], element: Element) -> str | None:
    """Where a traced way crosses the element (`node:port` of the hop, or the node), or None."""
    if isinstance(element, str):
        if flow.dst == element:
            return element
        return next((_hop(lab, h) for h in path if h.node == element), None)
    return next((_hop(lab, h) for h in path if h in element), None)


def candidates(lab: Lab, at: list[str]) -> list[list[tuple[str, str]]]:
    """Server pairs to try, (towards the element's side, from it): from the servers at the
    element (a server end, or the servers of a leaf end; every server for a spine) to the
    servers behind other leaves, then to their rack-mates; and the reverse."""
    servers = lab.nodes("server")

    def leaves(node: str) -> set[str]:
        return {n for n in lab.graph[node] if lab.graph.nodes[n]["role"] == "leaf"}

    near = [n for n in at if n in servers]
    near += [s for n in at if lab.graph.nodes[n]["role"] == "leaf" for s in sorted(lab.graph[n])]
    near = [s for s in near if s in servers]
    near = list(dict.fromkeys(near)) or servers
    far = [(s, d) for s in near for d in servers if d != s and not leaves(s) & leaves(d)]
    mates = [(s, d) for s in near for d in servers if d != s and leaves(s) & leaves(d)]
    pairs = list(dict.fromkeys(far + mates))
    return [[(d, s) for s, d in pairs][:CANDIDATE_PAIRS], pairs[:CANDIDATE_PAIRS]]


class FailoverProber:
    """Probes the faults of one timeline (the wall-clock player's `FaultHooks`): `before`
    and `after` each fault, then `collect` once the run is over."""

    def __init__(
        self,
        lab: Lab,
        settings: FailoverProbes,
        faults: list[tuple[float, Fault]],
        duration: float,
        progress: Progress,
    ) -> None:
        self.lab, self.settings, self.duration = lab, settings, duration
        self.progress = progress
        self.ats = sorted(at for at, _ in faults)
        self.faults = [fault for _, fault in sorted(faults, key=lambda f: f[0])]
        self.plan = build(lab)
        self.early: dict[int, list[_Chosen]] = {}  # flows chosen before the run, by fault
        for index, (_, fault) in enumerate(sorted(faults, key=lambda f: f[0])):
            if fault.kind in PROBED:
                with contextlib.suppress(LabError):  # chosen again before the fault, or why not
                    _, element, at = _element(lab, self.plan, fault)
                    self.early[index] = self._pin(index, element, at)
        self.records: list[dict[str, Any]] = []
        self.spawned: dict[int, list[_Probed]] = {}  # started idle before the run, by fault
        self.probed: dict[int, list[_Probed]] = {}
        self.workers: list[threading.Thread] = []
        self.fired: set[int] = set()  # faults that fired before their probes were ready
        self.ending: dict[int, float] = {}  # when each fault's probes stop (epoch seconds)
        self.t0: float | None = None  # when the run started (epoch seconds), from `before`
        self.lock = threading.Lock()

    def spawn(self) -> None:
        """Start the senders and receivers of the flows chosen before the run, idle."""
        for index, chosen in self.early.items():
            if not chosen:
                continue
            with self.lock:
                self.spawned[index] = [
                    _Probed(Probe(self.plan, flows, self.settings.pps, HOLD_S), paths, crossed)
                    for flows, paths, crossed in chosen
                ]
            with ThreadPoolExecutor(len(chosen)) as pool:  # each waits for its processes
                list(pool.map(lambda p: p.probe.spawn(), self.spawned[index]))

    def before(self, index: int, fault: Fault, due: float) -> None:
        """Pin and start the probe flows of a fault due at `due` (epoch seconds), in the
        background; return once they have sent for `LEAD_S`, or `MAX_DELAY_S` after `due`
        (or after now, for a timeline already late): the fault then fires without them."""
        self.t0 = t0 = due - self.ats[index]
        if fault.kind not in PROBED:
            return
        until = t0 + (self.ats[index + 1] if index + 1 < len(self.ats) else self.duration)
        record: dict[str, Any] = {
            "index": index,
            "fault": fault.kind,
            "element": fault.link or fault.node,
            "pps": self.settings.pps,
            "until": round(until, 4),
            "flows": [],
            "why": None,
        }
        self.records.append(record)
        ready = threading.Event()
        worker = threading.Thread(
            target=self._prepare, args=(index, fault, due, until, record, ready), daemon=True
        )
        worker.start()
        self.workers.append(worker)
        if not ready.wait(max(due, time.time()) + MAX_DELAY_S - time.time()):
            with self.lock:
                self.fired.add(index)

    def _prepare(
        self,
        index: int,
        fault: Fault,
        due: float,
        until: float,
        record: dict[str, Any],
        ready: threading.Event,
    ) -> None:
        """Pin a fault's probe flows and start them, unless the fault fired meanwhile."""
        started, cpu = time.time(), time.thread_time()
        try:
            name, element, at = _element(self.lab, self.plan, fault)
            chosen = self._still(index, element)
            record["traced_again"] = chosen is not None
            if chosen is None:
                self._drop(index)
                chosen = self._pin(index, element, at)
        except LabError as exc:
            why = f"could not trace flows through {record['element']}: {exc}"
            self._skip(index, record, why, ready)
            return
        record["pinned_s"] = round(time.time() - started, 3)
        record["pinned_cpu_s"] = round(time.thread_time() - cpu, 3)
        if not chosen:
            tried = sum(map(len, candidates(self.lab, at)))
            why = f"no flow of {tried} server pairs x {CANDIDATE_PORTS} source ports crosses "
            self._skip(index, record, why + f"{name} before the fault", ready)
            return
        # A fault fired late is followed late by the next one: plan as long after it (`after`
        # says when the probes stop).
        until = max(until, time.time() + until - due)
        record["until"] = round(until, 4)
        with self.lock:
            late = index in self.fired
        if late or until - time.time() < MIN_SECONDS:
            why = f"choosing flows took {record['pinned_s']:.2f} s (a loaded machine): the fault "
            self._skip(index, record, why + "fired before the probe flows could start", ready)
            return
        pairs = ", ".join(f"{flows[0].src}->{flows[0].dst}" for flows, _, _ in chosen)
        count = sum(len(flows) for flows, _, _ in chosen)
        self.progress(
            f"failover probes: {count} flows at {self.settings.pps:g} pps through {name} "
            f"({pairs}) until after the next fault"
        )
        with self.lock:
            spawned = [p.probe for p in self.spawned.pop(index, [])]
            probes = spawned or [
                Probe(self.plan, flows, self.settings.pps, HOLD_S) for flows, _, _ in chosen
            ]
            probed = [
                _Probed(probe, paths, crossed)
                for probe, (_, paths, crossed) in zip(probes, chosen, strict=True)
            ]
            self.probed[index] = probed
            if index in self.ending:  # the next fault has come and gone meanwhile
                for p in probed:
                    p.probe.until(self.ending[index])
        try:
            with ThreadPoolExecutor(len(probed)) as pool:  # each waits for its processes
                last = max(pool.map(lambda p: p.probe.start(), probed))
        except (OSError, RuntimeError) as exc:
            self._skip(index, record, f"the probe flows did not start: {exc}", ready)
            return
        time.sleep(max(0.0, last + LEAD_S - time.time()))  # the player then waits for `due`
        ready.set()

    def after(self, index: int, fault: Fault) -> None:
        """A fault's verb has returned: the probes of the faults before it stop `TAIL_S`
        later; the last fault's, at the run's end but no sooner than `AFTER_S` from now. A
        fault that gives back what the one before it took (`RESTORES`) has that one's probes
        traced until they are back on the element, then sending `BACK_TAIL_S` more (`_back`)."""
        now = time.time()
        with self.lock:
            taken = index - 1
            watched = taken in self.probed and self._restores(fault, taken)
            for earlier in range(index):
                if not (watched and earlier == taken):
                    self._end(earlier, now + TAIL_S)
            if index + 1 == len(self.ats):
                until = next((r["until"] for r in self.records if r["index"] == index), now)
                self._end(index, max(until, now + AFTER_S))
        if watched:
            watcher = threading.Thread(target=self._back, args=(taken, index, fault), daemon=True)
            watcher.start()
            self.workers.append(watcher)

    def _restores(self, fault: Fault, taken: int) -> bool:
        """Whether `fault` gives back the link or node that fault `taken` took away."""
        before = self.faults[taken]
        if RESTORES.get(fault.kind) != before.kind:
            return False
        if fault.node or before.node:
            return fault.node == before.node
        try:
            ends = [resolve_link(self.lab, self.plan, str(f.link)) for f in (fault, before)]
        except LabError:
            return False
        return len({frozenset((e.node, e.ifname) for e in pair) for pair in ends}) == 1

    def _back(self, taken: int, index: int, fault: Fault) -> None:
        """Trace the probe flows of fault `taken` until one crosses its element again, for at
        most `BACK_WAIT_S` (or until the next fault is due); record when (`restore`); they
        then send `BACK_TAIL_S` more, or stop `TAIL_S` after the watch when none came back."""
        since = time.time()
        deadline = since + BACK_WAIT_S
        if index + 1 < len(self.ats) and self.t0 is not None:
            deadline = min(deadline, self.t0 + self.ats[index + 1])
        flows = [f for p in self.probed[taken] for f in p.paths]
        back, crossing, why = None, 0, None
        try:
            _, element, _ = _element(self.lab, self.plan, self.faults[taken])
            while back is None and time.time() < deadline:
                traced = trace(self.plan, flows)
                crossing = sum(
                    _crossing(self.lab, f, traced[f], element) is not None for f in flows
                )
                if crossing:
                    back = time.time()
                else:
                    time.sleep(BACK_POLL_S)
        except LabError as exc:
            why = f"could not trace the probe flows after the restore: {exc}"
        record = next(r for r in self.records if r["index"] == taken)
        record["restore"] = {
            "index": index,
            "fault": fault.kind,
            "back": round(back, 4) if back else None,
            "flows_back": crossing,
            "watched_s": round(time.time() - since, 3),
            "why": why,
        }
        with self.lock:
            self._end(taken, back + BACK_TAIL_S if back else time.time() + TAIL_S)

    def _end(self, index: int, at: float) -> None:
        """Stop a fault's probes at `at`, unless told already (under the lock)."""
        if index not in self.ending:
            self.ending[index] = at
            for probed in self.probed.get(index, []):
                probed.probe.until(at)

    def _drop(self, index: int) -> None:
        """End the idle probes spawned for a fault (their flows are not used)."""
        with self.lock:
            dropped = self.spawned.pop(index, [])
        for p in dropped:
            p.probe.stop()

    def _skip(self, index: int, record: dict[str, Any], why: str, ready: threading.Event) -> None:
        """A fault not probed, and why."""
        self._drop(index)
        with self.lock:
            for p in self.probed.pop(index, []):
                p.probe.stop()
        record["why"] = why
        self.progress(f"failover probes: {why}")
        ready.set()

    def _still(self, index: int, element: Element) -> list[_Chosen] | None:
        """The flows chosen before the run, traced again now, if every one still crosses."""
        early = self.early.get(index)
        if not early:
            return None
        again = self._choose([flows for flows, _, _ in early], element)
        return again if [len(c[0]) for c in again] == [len(c[0]) for c in early] else None

    def _pin(self, index: int, element: Element, at: list[str]) -> list[_Chosen]:
        """Per direction, the flows of the candidate pair with most crossings."""
        address = {s: self.lab.host(s)["address"].split("/")[0] for s in self.lab.nodes("server")}
        tried: list[list[UdpFlow]] = []
        for way, pairs in enumerate(candidates(self.lab, at)):
            first = FIRST_SPORT + 1000 * (index % 4) + 500 * way
            dport = FIRST_DPORT + 2 * (index % 100) + way
            tried.append(
                [
                    UdpFlow(s, d, address[s], address[d], sport, dport)
                    for s, d in pairs
                    for sport in range(first, first + CANDIDATE_PORTS)
                ]
            )
        return self._choose(tried, element)

    def _choose(self, tried: list[list[UdpFlow]], element: Element) -> list[_Chosen]:
        """Per direction tried, the flows of the pair with most crossings (at most `flows`),
        with their ways now."""
        traced = trace(self.plan, [f for flows in tried for f in flows])
        chosen = []
        for flows in tried:
            by_pair: dict[tuple[str, str], list[tuple[UdpFlow, str]]] = {}
            for f in flows:
                where = _crossing(self.lab, f, traced[f], element)
                if where is not None:
                    by_pair.setdefault((f.src, f.dst), []).append((f, where))
            if by_pair:
                best = max(by_pair.values(), key=len)[: self.settings.flows]
                chosen.append(
                    (
                        [f for f, _ in best],
                        {f: [_hop(self.lab, h) for h in traced[f]] for f, _ in best},
                        dict(best),
                    )
                )
        return chosen

    def collect(self) -> list[dict[str, Any]]:
        """Wait for every probe to end; the records of every probed fault."""
        for worker in self.workers:
            worker.join()
        for index in list(self.spawned):
            self._drop(index)
        for record in self.records:
            for probed in self.probed.get(record["index"], []):
                losses = probed.probe.wait()
                record["started"] = round(probed.probe.started, 4)
                record["ends"] = round(probed.probe.ended, 4)
                record["flows"] += [self._flow(probed, loss) for loss in losses]
        return self.records

    def _flow(self, probed: _Probed, loss: FlowLoss) -> dict[str, Any]:
        """One probe flow's record: its way before the fault and what it lost when."""
        f, started = loss.flow, probed.probe.started
        return {
            "src": f.src,
            "dst": f.dst,
            "src_ip": f.src_ip,
            "dst_ip": f.dst_ip,
            "sport": f.sport,
            "dport": f.dport,
            "path": probed.paths[f],
            "crossed": probed.crossed[f],
            "pps": loss.pps,
            "sent": loss.sent,
            "received": loss.received,
            "gaps": [
                [round(started + first / loss.pps, 4), lost, round(after, 4) if after else None]
                for first, lost, _, after in loss.gaps
            ],
        }

    def stop(self) -> None:
        """End every probe still running (after an error), once no worker can start more."""
        for worker in self.workers:
            worker.join()
        for probes in [*self.spawned.values(), *self.probed.values()]:
            for probed in probes:
                probed.probe.stop()
