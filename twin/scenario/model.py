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
      failover: {max_loss_ms: 1000}

Times are seconds from the start of the run. Rates are packets per second per flow: veth
links are not 400G, so a scenario keeps the ratios between flows, not absolute speeds. Bad
scenarios are refused with one line naming the file and key, before anything starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from twin import labcheck
from twin.errors import InputError
from twin.intent.inputs import parse_model, strict_yaml
from twin.labdir import Lab
from twin.verdict import verdict

Collective = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all"]
TrafficKind = Literal[Collective, "backup", "micro_bursts", "incast"]
FaultKind = Literal[
    "link-down",
    "link-up",
    "link-flap",
    "node-down",
    "node-up",
    "daemon-kill",
    "daemon-restart",
    "loss",
    "rate",
    "clear",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Traffic(_Model):
    """One traffic phase."""

    at: float = Field(0.0, ge=0)
    duration: float = Field(10.0, gt=0, le=3600)
    kind: TrafficKind
    name: str | None = Field(None, description="label in reports; kind@at by default")
    algorithm: Literal["ring", "halving_doubling"] = "ring"
    servers: list[str] | Literal["all"] = "all"
    order: Literal["natural", "interleaved"] = Field(
        "natural", description="rank order; interleaved alternates leaf groups"
    )
    src: str | list[str] | None = Field(None, description="backup/bursts: source; incast: list")
    dst: str | None = None
    traffic_class: str = Field("roce", alias="class", description="class of the lab's QoS")
    dscp: int | None = Field(None, ge=0, le=63, description="override the class's DSCP")
    qps: int = Field(2, ge=1, le=64, description="queue pairs per peer")
    message: int = Field(
        1 << 28, ge=1024, description="collectives: bytes per rank (nccl-tests' size S)"
    )
    pps: float = Field(150, gt=0, le=200000, description="packets per second per flow")
    payload: int = Field(1024, ge=64, le=8900, description="RoCE payload bytes per frame")
    period: float = Field(1.0, gt=0, description="micro_bursts: seconds between bursts")
    burst: float = Field(0.1, gt=0, description="micro_bursts: seconds each burst lasts")

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @model_validator(mode="after")
    def _endpoints(self) -> Traffic:
        if self.kind in ("backup", "micro_bursts") and not (isinstance(self.src, str) and self.dst):
            raise ValueError(f"{self.kind} needs src: SERVER and dst: SERVER")
        if self.kind == "incast" and not (isinstance(self.src, list) and self.dst):
            raise ValueError("incast needs src: [SERVERS] and dst: SERVER")
        return self

    @property
    def label(self) -> str:
        """Name of the phase in observations and reports."""
        return self.name or f"{self.kind}@{self.at:g}"


class Fault(_Model):
    """One fault on the timeline (the verbs of `twin fault`)."""

    at: float = Field(ge=0)
    fault: FaultKind
    link: str | None = None
    node: str | None = None
    daemon: str = "bgpd"
    percent: float | None = Field(None, gt=0, le=100)
    mbit: float | None = Field(None, gt=0)
    period: float = Field(1.0, gt=0)
    count: int = Field(3, ge=1)

    @model_validator(mode="after")
    def _target(self) -> Fault:
        needs_link = self.fault.startswith("link") or self.fault in ("loss", "rate", "clear")
        if needs_link and not self.link:
            raise ValueError(f"{self.fault} needs link: NODE:PORT or NODE:PEER")
        if not needs_link and not self.node:
            raise ValueError(f"{self.fault} needs node: NAME")
        if self.fault == "loss" and self.percent is None:
            raise ValueError("loss needs percent")
        if self.fault == "rate" and self.mbit is None:
            raise ValueError("rate needs mbit")
        return self


class Scenario(_Model):
    """A scenario: the root of `scenario.yaml`."""

    name: str = Field("scenario", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    description: str = ""
    settle: float = Field(2.0, ge=0, le=600, description="seconds to watch after the last event")
    sample_interval: float = Field(0.25, ge=0.05, le=10, description="counter sampling period")
    capture: list[str] = Field(
        default_factory=list, description="links (NODE:PORT) to capture into pcap files"
    )
    traffic: list[Traffic] = Field(default_factory=list)
    faults: list[Fault] = Field(default_factory=list)
    validate_: dict[str, dict[str, Any]] = Field(
        default_factory=dict, alias="validate", description="validator name -> thresholds"
    )

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

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
                raise InputError(file, f"traffic.{i}", f"no server {server!r} in lab {lab.name}")
        if t.traffic_class not in classes:
            raise InputError(
                file,
                f"traffic.{i}.class",
                f"no class {t.traffic_class!r} (lab has {', '.join(classes)})",
            )
    for i, link in enumerate(scenario.capture):
        if link.split(":")[0] not in lab.graph.nodes or ":" not in link:
            raise InputError(file, f"capture.{i}", f"no link {link!r} in lab {lab.name}")
    for i, f in enumerate(scenario.faults):
        for target in (f.link, f.node):
            node = (target or "").split(":")[0]
            if target and node not in lab.graph.nodes:
                raise InputError(file, f"faults.{i}", f"no node {node!r} in lab {lab.name}")


def load(path: Path, lab: Lab) -> Scenario:
    """Read and check a scenario against the lab it will run on (whose files are checked
    first)."""
    labcheck.check(lab, live=True)
    data = strict_yaml(path)
    scenario = parse_model(Scenario, data, str(path))
    _check_names(scenario, lab, str(path))
    verdict.check_names(scenario.validate_, str(path))
    return scenario


def dump(scenario: Scenario) -> str:
    """The scenario with every default written out."""
    return yaml.safe_dump(scenario.model_dump(mode="json", by_alias=True), sort_keys=False)
