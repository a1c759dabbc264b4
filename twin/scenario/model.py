"""Scenarios (`scenario.yaml`): a timeline of traffic and faults, and the validators to run.

    name: allreduce-uplink-failure
    traffic:
      - {at: 0, duration: 12, kind: all_reduce, algorithm: ring, servers: all, qps: 4, pps: 150}
      - {at: 2, duration: 4, kind: backup, src: server1, dst: server40, class: storage, pps: 2000}
    faults:
      - {at: 4, fault: link-down, link: leaf1:spine1}
      - {at: 8, fault: link-up, link: leaf1:spine1}
    validate:
      ecmp_spread: {max_over_mean: 1.5}
      failover: {max_loss_ms: 1500}

Times are seconds from the start of the run. Rates on wall-clock backends (netns) are packets
per second per flow (`pps`): veth links are not 400G, so a scenario keeps the ratios between
flows, not absolute speeds. The simulator (`--backend sim`) runs real link speeds: its rates
are Gb/s per flow (`gbps`; none: line rate, a collective as fast as the network lets it), a
collective sends `message` bytes per rank `iterations` times, one iteration after the other,
and its timeline is usually milliseconds (`sim:` sets its options). Bad scenarios are refused
with one line naming the file and key, before anything starts: every number is finite and
bounded (times within `MAX_TIME`), names exist in the lab (servers, classes, nodes, both
halves of a link), thresholds have the type of their defaults, and, on a backend that sends
frames (not `Backend.computed`: netns, clab), the traffic sent at any moment stays within
what one small machine can send (`MAX_PPS`); the simulator and the fake send none.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from labs.backend import FaultKind
from twin.design.headroom import ROCE_PAYLOAD
from twin.errors import InputError
from twin.intent.inputs import parse_model, placed, strict_yaml
from twin.lab import check as labcheck
from twin.lab.directory import Lab
from twin.scenario import choice, select
from twin.verdict import verdict
from validators import registry

MAX_TIME = 3600.0
"""Seconds: no phase, fault or run goes beyond an hour."""
MAX_PPS = 100_000
"""Frames per second all phases running at once may send together (a 2-core machine), on a
backend that sends frames."""
MAX_NAMES = 4096

Collective = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all"]
TrafficKind = Literal[Collective, "backup", "micro_bursts", "incast", "ecmp_probe"]
PROBE_PPS = 1.0
"""ecmp_probe: packets per second per flow unless `pps` is given (a probe has thousands)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Traffic(_Model):
    """One traffic phase."""

    at: float = Field(0.0, ge=0, le=MAX_TIME)
    duration: float = Field(10.0, gt=0, le=MAX_TIME)
    kind: TrafficKind
    name: str | None = Field(
        None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.@+-]{0,63}$", description="label in reports"
    )
    algorithm: Literal["ring", "halving_doubling", "tree", "hierarchical_ring", "auto"] = "ring"
    servers: list[str] | Literal["all"] = Field("all", max_length=MAX_NAMES)
    order: Literal["natural", "interleaved"] = Field(
        "natural", description="rank order; interleaved alternates leaf groups"
    )
    src: str | list[str] | None = Field(
        None, max_length=MAX_NAMES, description="backup/bursts: source; incast: list"
    )
    dst: str | None = None
    traffic_class: str = Field("roce", alias="class", description="class of the lab's QoS")
    dscp: int | None = Field(None, ge=0, le=63, description="override the class's DSCP")
    qps: int = Field(2, ge=1, le=64, description="queue pairs per peer")
    message: int = Field(
        1 << 28, ge=1024, le=1 << 40, description="collectives: bytes per rank (nccl-tests' S)"
    )
    pps: float = Field(150, gt=0, le=200000, description="packets per second per flow")
    gbps: float | None = Field(
        None, gt=0, le=3200, description="sim: Gb/s per flow (none: line rate)"
    )
    iterations: int = Field(1, ge=1, le=1000, description="sim: collective iterations in a row")
    payload: int = Field(
        1024, ge=64, le=8900, multiple_of=4, description="RoCE payload bytes per frame"
    )
    period: float = Field(
        1.0, gt=0, le=MAX_TIME, description="micro_bursts: seconds between bursts"
    )
    burst: float = Field(0.1, gt=0, le=MAX_TIME, description="micro_bursts: seconds a burst")
    tuples: int = Field(
        3000, ge=1, le=16384, description="ecmp_probe: distinct 5-tuples sent into each leaf"
    )
    pairs: int = Field(
        1, ge=1, le=16, description="ecmp_probe: (source, destination) server pairs per leaf"
    )

    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)

    @model_validator(mode="after")
    def _endpoints(self) -> Traffic:
        if self.kind in ("backup", "micro_bursts") and not (isinstance(self.src, str) and self.dst):
            raise ValueError(f"{self.kind} needs src: SERVER and dst: SERVER")
        if self.kind == "incast" and not (isinstance(self.src, list) and self.dst):
            raise ValueError("incast needs src: [SERVERS] and dst: SERVER")
        sources = [self.src] if isinstance(self.src, str) else list(self.src or [])
        if self.dst in sources:
            raise ValueError(f"{self.dst} would send to itself")
        for named in (sources, [] if self.servers == "all" else self.servers):
            twice = sorted({s for s in named if named.count(s) > 1})
            if twice:
                raise ValueError(f"server {twice[0]} is named twice")
        if self.burst > self.period:
            raise ValueError("burst must not be longer than period")
        if self.kind == "ecmp_probe" and "pps" not in self.model_fields_set:
            self.pps = PROBE_PPS
        return self

    def flows(self, servers: int, leaves: int = 0) -> int:
        """The (src, dst, qp) flows the phase sends, on a lab with `servers` servers and
        `leaves` leaves: a collective's ring sends to one neighbour per rank, halving-doubling
        to log2(n) partners, the double binary tree along its 2(n-1) edges both ways,
        all-to-all to every other rank; an ECMP probe `tuples` per leaf.

        >>> Traffic(kind="all_to_all", qps=2).flows(4), Traffic(kind="all_reduce").flows(4)
        (24, 8)
        """
        if self.kind == "ecmp_probe":
            return leaves * self.tuples
        if self.kind in ("backup", "micro_bursts"):
            return self.qps
        if self.kind == "incast":
            return len(self.src or []) * self.qps
        n = servers if self.servers == "all" else len(self.servers)
        if self.kind == "all_to_all":
            return n * (n - 1) * self.qps
        if self.kind == "all_reduce" and self.algorithm == "halving_doubling":
            return n * max(1, n.bit_length() - 1) * self.qps
        if self.kind == "all_reduce" and self.algorithm in ("tree", "auto"):
            return 4 * (n - 1) * self.qps  # auto: at most (the plan resolves it)
        if self.kind == "all_reduce" and self.algorithm == "hierarchical_ring":
            return 2 * n * self.qps  # a neighbour inside the group, one across
        return n * self.qps

    @property
    def label(self) -> str:
        """Name of the phase in observations and reports."""
        return self.name or f"{self.kind}@{self.at:g}"


class Fault(_Model):
    """One fault on the timeline (the verbs of `twin fault`)."""

    at: float = Field(ge=0, le=MAX_TIME)
    fault: FaultKind
    link: str | None = None
    node: str | None = None
    daemon: Literal["zebra", "bgpd", "bfdd"] = "bgpd"
    percent: float | None = Field(None, gt=0, le=100)
    mbit: float | None = Field(None, gt=0, le=10**7)
    period: float = Field(1.0, gt=0, le=MAX_TIME)
    count: int = Field(3, ge=1, le=10_000)
    priority: int = Field(3, ge=0, le=7, description="pfc-storm: the priority paused")
    duration: float | None = Field(
        None, gt=0, le=MAX_TIME, description="pfc-storm: seconds it lasts (none: to the end)"
    )
    delay_ms: float = Field(
        0.0,
        ge=0,
        le=10_000,
        description="link-down, link-flap: loss-of-signal detection plus FIB programming, ms",
    )

    @model_validator(mode="after")
    def _target(self) -> Fault:
        needs_link = self.fault.startswith("link") or self.fault in (
            "loss",
            "rate",
            "clear",
            "pfc-storm",
        )
        if needs_link and not self.link:
            raise ValueError(f"{self.fault} needs link: NODE:PORT or NODE:PEER")
        if not needs_link and not self.node:
            raise ValueError(f"{self.fault} needs node: NAME")
        if self.fault == "loss" and self.percent is None:
            raise ValueError("loss needs percent")
        if self.fault == "rate" and self.mbit is None:
            raise ValueError("rate needs mbit")
        if self.delay_ms and self.fault not in ("link-down", "link-flap"):
            raise ValueError("delay_ms is for link-down and link-flap")
        if self.fault == "link-flap" and self.count * self.period > MAX_TIME:
            raise ValueError(f"a flap of count x period beyond {MAX_TIME:g} s")
        return self


class SimOptions(_Model):
    """How the simulator plays the scenario (ignored by other backends)."""

    time_scale: Annotated[float, Field(gt=0, le=1)] | Literal["auto"] = Field(
        default="auto",
        description="the timeline's times multiplied by this (a live scenario's seconds as ms);"
        " auto: 1, or what puts the faults and phases a collective's duration holds inside it",
    )
    convergence: float = Field(
        default=0.0005, ge=0, description="seconds from a topology fault to the FIBs that follow it"
    )
    seed: int = Field(default=1, ge=0, description="ECMP hashes and ECN marking draws")
    sample_interval: float = Field(
        default=1e-5, gt=0, description="seconds between queue, PG and flow rate samples"
    )
    packet_bytes: int = Field(
        default=ROCE_PAYLOAD, ge=256, le=9216, description="frame size of every flow"
    )
    qps: int | None = Field(
        default=None, ge=1, le=64, description="collectives' queue pairs per peer (none: qps)"
    )
    pause_storm: float = Field(
        default=0.001, gt=0, description="a priority paused this long in one go is a pause storm"
    )
    deadlock_stall: float = Field(
        default=0.001, gt=0, description="paused, non-empty queues in a cycle this long: deadlock"
    )
    roce_transport: Literal["rc", "open"] = Field(
        default="open",
        description="class roce: open loop, or RoCEv2 reliable connection (ACK, NAK, go-back-N,"
        " a 67 ms local ACK timeout that time_scale does not shrink)",
    )
    collectives: Literal["core", "table"] = Field(
        default="core",
        description="ring collectives made step by step in the simulator's core (O(ranks x QPs)),"
        " or as a flow table of every step (the same run, O(ranks^2) memory)",
    )
    lossy_transport: Literal["tcp", "open"] = Field(
        default="tcp",
        description="other classes: TCP-like (DCTCP, halving on loss, retransmits) or open loop",
    )


class FailoverProbing(_Model):
    """The failover probes played when `failover` is validated, on backends that pin them."""

    pps: float = Field(
        default=1000,
        ge=200,
        le=5000,
        description="packets per second per probe flow (1/pps resolution)",
    )
    flows: int = Field(default=4, ge=1, le=8, description="probe flows each way through each fault")


class Scenario(_Model):
    """A scenario: the root of `scenario.yaml`."""

    name: str = Field("scenario", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    seed: int = Field(0, ge=0, le=2**32, description="random picks of selectors (`any`)")
    description: str = Field("", max_length=4000)
    settle: float = Field(2.0, ge=0, le=600, description="seconds to watch after the last event")
    sample_interval: float = Field(0.25, ge=0.05, le=10, description="counter sampling period")
    capture: list[str] = Field(
        default_factory=list,
        max_length=64,
        description="links (NODE:PORT) to capture into pcap files",
    )
    traffic: list[Traffic] = Field(default_factory=list, max_length=256)
    faults: list[Fault] = Field(default_factory=list, max_length=1024)
    sim: SimOptions = Field(default_factory=SimOptions)
    failover_probes: FailoverProbing = Field(default_factory=FailoverProbing)
    validate_: dict[str, dict[str, Any]] = Field(
        default_factory=dict, alias="validate", description="validator name -> thresholds"
    )

    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)

    @property
    def duration(self) -> float:
        """Seconds from start to the end of the last phase or fault, plus the settle time."""
        ends = [t.at + t.duration for t in self.traffic] + [f.at for f in self.faults] + [0.0]
        return max(ends) + self.settle


def _check_names(scenario: Scenario, lab: Lab, file: str) -> None:
    """Servers, links, nodes and classes must exist in the lab."""
    servers = set(lab.nodes("server"))
    classes = lab.fabric.qos.classes
    for i, t in enumerate(scenario.traffic):
        named = [] if t.servers == "all" else list(t.servers)
        named += [t.src] if isinstance(t.src, str) else list(t.src or [])
        named += [t.dst] if t.dst else []
        for server in named:
            if server not in servers:
                raise InputError(
                    file,
                    f"traffic.{i}",
                    f"no server {server!r} in lab {lab.name} (a name, servers[i], all, any, "
                    "{behind: LEAF}, {rack: N}, {pair: LEAF}: docs/scenarios.md)",
                )
        if t.traffic_class not in classes:
            raise InputError(
                file,
                f"traffic.{i}.class",
                f"no class {t.traffic_class!r} (lab has {', '.join(classes)})",
            )
    for i, link in enumerate(scenario.capture):
        _check_link(lab, link, file, f"capture.{i}", f"capture.{i}")
    for i, f in enumerate(scenario.faults):
        if f.link:
            _check_link(lab, f.link, file, f"faults.{i}.link", f"faults.{i}")
        if f.node and f.node not in lab.graph.nodes:
            raise InputError(file, f"faults.{i}", f"no node {f.node!r} in lab {lab.name}")


def _check_link(lab: Lab, spec: str, file: str, key: str, node_key: str) -> None:
    """`NODE:PORT` (a port or its Linux name) or `NODE:PEER` (a neighbour) of the lab."""
    node, _, port = spec.partition(":")
    if node not in lab.graph.nodes:
        raise InputError(file, node_key, f"no node {node!r} in lab {lab.name}")
    ports = lab.ifmap.get(node, {})
    linux = {names.get("netns") for names in ports.values()}
    if port not in ports and port not in linux and port not in lab.graph[node]:
        raise InputError(file, key, f"{node} has no port or neighbour {port!r}")


def _check_groups(t: Traffic, lab: Lab, file: str, key: str) -> None:
    """A hierarchical ring needs as many ranks behind each leaf group, and no rails (a rail
    fabric's collectives run once per rail)."""
    if lab.fabric.servers.rails:
        raise InputError(file, key, "hierarchical_ring: not on a rail fabric (rings per rail)")
    servers = lab.nodes("server") if t.servers == "all" else t.servers
    sizes: dict[object, int] = {}
    for s in servers:
        group = lab.graph.nodes[s]["group"]
        sizes[group] = sizes.get(group, 0) + 1
    if len(set(sizes.values())) > 1:
        raise InputError(
            file,
            key,
            f"hierarchical_ring needs as many ranks behind each leaf group, not "
            f"{min(sizes.values())} to {max(sizes.values())}",
        )


def _check_rate(scenario: Scenario, lab: Lab, file: str, frames: bool) -> None:
    """Collectives need two ranks (halving-doubling a power of two); with `frames`, the
    frames per second of the phases running at each phase's start stay within `MAX_PPS`."""
    servers = len(lab.nodes("server"))
    rates = []
    for i, t in enumerate(scenario.traffic):
        n = servers if t.servers == "all" else len(t.servers)
        collective = t.kind not in ("backup", "micro_bursts", "incast", "ecmp_probe")
        if collective and n < 2:
            raise InputError(file, f"traffic.{i}", f"{t.kind} needs two servers or more")
        chosen = choice.algorithm(t.algorithm, t.kind, n, lab.fabric.servers, t.message)
        if t.kind == "all_reduce" and chosen == "halving_doubling" and n & (n - 1):
            raise InputError(
                file, f"traffic.{i}", f"halving_doubling needs a power of two ranks, not {n}"
            )
        if t.kind == "all_reduce" and chosen == "hierarchical_ring":
            _check_groups(t, lab, file, f"traffic.{i}")
        played = t.model_copy(update={"algorithm": chosen})
        rates.append(played.flows(servers, len(lab.nodes("leaf"))) * t.pps)
    if not frames:
        return
    for i, t in enumerate(scenario.traffic):
        now = sum(
            rate
            for other, rate in zip(scenario.traffic, rates, strict=True)
            if other.at <= t.at < other.at + other.duration
        )
        if now > MAX_PPS:
            raise InputError(
                file,
                f"traffic.{i}",
                f"{now:,.0f} frames/s from t={t.at:g} s (flows x pps of the phases running "
                f"then); this machine sends at most {MAX_PPS:,}",
            )


def _check_probes(scenario: Scenario, lab: Lab, file: str) -> None:
    """An ECMP probe runs alone (the uplink counters it is judged by would count any other
    phase's packets too) on a lab with servers behind two leaf groups or more."""
    groups = {lab.graph.nodes[s]["group"] for s in lab.nodes("server")}
    for i, t in enumerate(scenario.traffic):
        if t.kind != "ecmp_probe":
            continue
        if len(groups) < 2:
            raise InputError(
                file, f"traffic.{i}", "ecmp_probe needs servers behind two leaf groups"
            )
        for j, other in enumerate(scenario.traffic):
            if j != i and other.at < t.at + t.duration and t.at < other.at + other.duration:
                raise InputError(
                    file,
                    f"traffic.{i}",
                    f"ecmp_probe overlaps traffic.{j} ({other.label}): the uplink counters "
                    "it is judged by would count both",
                )


def _check_thresholds(scenario: Scenario, file: str) -> None:
    """Each threshold given has the type of its default: a number (finite, not negative),
    a flag, a word, or a list of words."""
    for name, given in scenario.validate_.items():
        if given is None:
            continue
        if not isinstance(given, dict):
            raise InputError(file, f"validate.{name}", "must be a mapping of thresholds")
        defaults = registry.get(name).defaults if name in _known() else {}
        for key, value in given.items():
            if key not in defaults:
                continue  # verdict.check_names names it
            problem = _threshold_problem(defaults[key], value)
            if problem:
                raise InputError(file, f"validate.{name}.{key}", problem)


def _known() -> set[str]:
    return {v.name for kind in ("static", "dynamic") for v in registry.available(kind)}


def _threshold_problem(default: Any, value: Any) -> str | None:
    """What is wrong with a threshold's value, judged by its default's type (None if fine).

    >>> _threshold_problem(1.5, "x"), _threshold_problem(1.5, 2), _threshold_problem(1, 2.5)
    ("must be a number, not 'x'", None, 'must be a whole number, not 2.5')
    """
    if isinstance(default, bool):
        return None if isinstance(value, bool) else f"must be true or false, not {value!r}"
    if isinstance(default, int | float):
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or not math.isfinite(value) or not 0 <= value <= 1e12:
            return f"must be a number, not {value!r}"[:120]
        if isinstance(default, int) and not float(value).is_integer():
            return f"must be a whole number, not {value!r}"
        return None
    if isinstance(default, str):
        return None if isinstance(value, str) and len(value) <= 200 else "must be a word"
    if isinstance(default, list):
        words = isinstance(value, list) and all(isinstance(v, str) for v in value)
        return None if words and len(value) <= 64 else "must be a list of words"
    return None


def load(path: Path, lab: Lab, frames: bool = True) -> Scenario:
    """Read and check a scenario against the lab it will run on (whose files are checked
    first); `frames`: it will play on a backend that sends frames (not `Backend.computed`),
    whose rate one machine bounds (`MAX_PPS`)."""
    labcheck.check(lab, live=True, applied=frames)
    return checked(strict_yaml(path), lab, str(path), frames)


def checked(data: Any, lab: Lab, file: str, frames: bool = True) -> Scenario:
    """A scenario's data (from `file`) checked against a lab already checked (`load`)."""
    scenario = parse_model(Scenario, select.resolve(data, lab, file), file)
    with placed(file):
        _check_names(scenario, lab, file)
        _check_rate(scenario, lab, file, frames)
        _check_probes(scenario, lab, file)
        _check_thresholds(scenario, file)
        verdict.check_names(scenario.validate_, file)
    return scenario


def dump(scenario: Scenario) -> str:
    """The scenario with every default written out."""
    return yaml.safe_dump(scenario.model_dump(mode="json", by_alias=True), sort_keys=False)
