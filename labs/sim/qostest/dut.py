"""The device under test: one leaf of a lab, as the simulator runs it, wired to test hosts.

sonic-mgmt tests one switch with a PTF host or a traffic generator on some of its ports; the
twin takes the lab's first leaf (its config_db.json, possibly edited into a broken variant),
its ports facing servers first, then its other ports that are up, and puts a test host on
each port a test uses. PTF senders' packets carry the DSCP under test but leave the NIC on
priority 0, so the switch's pauses do not stop them; snappi flows that honour PFC leave on
their own priority (`stream`). Choices and their reasons: docs/qos-tests.md.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from labs.sim.build import response_time
from labs.sim.lab import pool_bytes, port_profile
from labs.sim.model import (
    Checks,
    Experiment,
    Fault,
    Flow,
    Host,
    Link,
    LinkFault,
    Monitor,
    PfcStorm,
    QosProfile,
    Switch,
    TxOff,
)
from labs.sim.result import PriorityCounters, Result
from twin.design.asic import asic
from twin.errors import LabError
from twin.intent.fabric import Fabric
from twin.lab.directory import Lab
from twin.render.config_db import ConfigDb

DUT = "dut"
PFC_FRAME_BYTES = 84
"""A PFC frame on the wire (64 B, preamble and gap), as the simulator sends it."""


def _cable_m(db: ConfigDb, port: str) -> float:
    for lengths in db.get("CABLE_LENGTH", {}).values():
        if port in lengths:
            return float(str(lengths[port]).rstrip("m"))
    return 5.0


def test_ports(db: ConfigDb) -> list[str]:
    """The switch's ports in test order: those facing servers (PORT description), then the
    other ports that are up."""
    ports = db.get("PORT", {})
    servers = [p for p, a in ports.items() if str(a.get("description", "")).startswith("server")]
    rest = [p for p, a in ports.items() if p not in servers and a.get("admin_status") == "up"]
    return servers + rest


@dataclass
class Dut:
    """A switch's config and the lab's intent; `experiment` wires hosts to its ports."""

    name: str
    db: ConfigDb
    fabric: Fabric
    ports: list[str] = field(default_factory=list)

    @classmethod
    def of_lab(cls, lab: Lab, db: ConfigDb | None = None) -> Dut:
        """The lab's first leaf (its config, or `db` in its place)."""
        switch = (lab.nodes("leaf") or lab.switches())[0]
        config: ConfigDb = copy.deepcopy(dict(db if db is not None else lab.config_db(switch)))
        return cls(switch, config, lab.fabric, test_ports(config))

    def variant(self, edit: Callable[[ConfigDb], None]) -> Dut:
        """A copy whose config `edit` changed (what a test configures for itself)."""
        db: ConfigDb = copy.deepcopy(self.db)
        edit(db)
        return Dut(self.name, db, self.fabric, list(self.ports))

    def port(self, i: int) -> str:
        """The i-th test port."""
        if i >= len(self.ports):
            raise LabError(f"{self.name}: {len(self.ports)} test ports, a test needs {i + 1}")
        return self.ports[i]

    def profile(self, i: int = 0) -> QosProfile:
        """The QoS of the i-th test port as the simulator reads the config (ECN decided
        where the switch's ASIC decides it)."""
        qos = port_profile(self.db, self.port(i))
        return dataclasses.replace(qos, ecn_at=asic(self.db).ecn_at)

    def speed(self, i: int = 0) -> float:
        """Port speed, b/s."""
        return float(self.db["PORT"][self.port(i)].get("speed", 100000)) * 1e6

    def tx_off(self, i: int, end: float) -> TxOff:
        """sonic-mgmt's TX-off (SAI port TX disable) on test port i from 0 to `end`."""
        return TxOff(f"{DUT}:{self.port(i)}", 0.0, end)

    def storm(self, i: int, priorities: tuple[int, ...], hold: float) -> tuple[PfcStorm, float]:
        """A pause storm from test port i's host on `priorities`, from 0 until `hold` seconds
        after the port holds them, and that time (the first frame's cable and
        serialisation, then the port's pause response time): the tests send from then."""
        speed = self.speed(i)
        cable = _cable_m(self.db, self.port(i)) * 5e-9
        held = cable + PFC_FRAME_BYTES * 8 / speed + response_time(self.profile(i), speed)
        return PfcStorm(f"h{i}:p0", 0.0, held + hold, priorities), held

    @property
    def pool(self) -> int:
        """The shared ingress pool, bytes."""
        return pool_bytes(self.db)

    @property
    def poll_interval(self) -> float:
        """The PFC watchdog's poll interval (PFC_WD GLOBAL POLL_INTERVAL, ms; SONiC's default
        200), s: how often the simulator's periodic checks, the watchdog's among them, run."""
        ms = self.entry("PFC_WD", "GLOBAL").get("POLL_INTERVAL", 200)
        return float(ms) / 1e3

    def entry(self, table: str, key: str) -> dict[str, Any]:
        """One entry of a table (empty when absent)."""
        found: dict[str, Any] = self.db.get(table, {}).get(key, {})
        return found

    def experiment(
        self,
        n: int,
        flows: Sequence[Flow],
        faults: Sequence[Fault] = (),
        duration: float = 1e-3,
        frame: int = 128,
        monitor: float = 0.0,
        routes: dict[str, list[str]] | None = None,
    ) -> Experiment:
        """The DUT with test hosts h0..h{n-1} on its first n test ports (those
        administratively down, down); frames of `frame` bytes (no headers added)."""
        ports = {f"h{i}": self.port(i) for i in range(n)}
        qos = {p: self.profile(i) for i, p in enumerate(ports.values())}
        table = {h: [f"{DUT}:{p}"] for h, p in ports.items()}
        table.update(routes or {})
        chip = asic(self.db)
        switch = Switch(
            DUT,
            buffer_bytes=self.pool,
            port_qos=qos,
            routes=table,
            cell_bytes=chip.cell_bytes,
            cell_descriptor=chip.descriptor,
        )
        hosts = [Host(h, qos=QosProfile(dscp_to_tc={}, watchdog=None)) for h in ports]
        links = [
            Link(f"{h}:p0", f"{DUT}:{p}", self.speed(i), length_m=_cable_m(self.db, p))
            for i, (h, p) in enumerate(ports.items())
        ]
        down = [
            LinkFault(f"{DUT}:{p}", 0.0)
            for p in ports.values()
            if self.db["PORT"][p].get("admin_status", "down") != "up"
        ]
        return Experiment(
            switches=[switch],
            hosts=hosts,
            links=links,
            flows=list(flows),
            faults=[*down, *faults],
            duration=duration,
            stop_when_done=False,
            packet_bytes=frame,
            header_bytes=0,
            monitor=Monitor(interval=monitor, ports=[f"{DUT}:{p}" for p in ports.values()]),
            checks=Checks(interval=self.poll_interval, deadlock=False),
            name=self.name,
        )

    def counters(self, result: Result, i: int, priority: int) -> PriorityCounters:
        """The counters of test port i on a priority (zeros when it counted nothing)."""
        port = result.port(f"{DUT}:{self.port(i)}")
        zero = PriorityCounters(0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        return port.priorities.get(priority, zero)


def burst(
    name: str,
    src: int,
    dst: int,
    packets: int,
    dscp: int,
    frame: int,
    start: float = 0.0,
    ect: bool = False,
) -> Flow:
    """`packets` frames from h{src} to h{dst} at line rate, marked `dscp` (and ECT with
    `ect`), sent on the NIC's priority 0 (a PTF sender: the DUT's pauses do not stop it)."""
    return Flow(
        name,
        f"h{src}",
        f"h{dst}",
        size=packets * frame,
        start=start,
        dscp=dscp,
        priority=0,
        cc="none",
        ecn_capable=ect,
        packet_bytes=frame,
    )


def stream(
    name: str,
    src: int,
    dst: int,
    rate: float,
    dscp: int,
    frame: int,
    stop: float,
    priority: int = 0,
    start: float = 0.0,
) -> Flow:
    """A traffic generator's flow at `rate` b/s from `start` to `stop`; it honours the DUT's
    pauses on `priority` (snappi ports do, on the flow's own priority; 0: a lossy one)."""
    return Flow(
        name,
        f"h{src}",
        f"h{dst}",
        size=None,
        rate=rate,
        start=start,
        stop=stop,
        dscp=dscp,
        priority=priority,
        cc="none",
        ecn_capable=False,
        packet_bytes=frame,
    )
