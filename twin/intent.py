"""The intent: what a network engineer writes in `fabric.yaml`.

Every field has a default, and `resolve` writes them all out, so the resolved intent saved in
a lab directory says exactly what was built. Unknown keys and wrong types are refused.
"""

from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from twin.errors import InputError
from twin.units import speed_mbps

Speed = Annotated[int, Field(description="link speed in Mb/s; '400G' is accepted")]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


def _speed(value: Any) -> Any:
    return speed_mbps(value) if isinstance(value, str) else value


class Spines(_Model):
    """The spine layer (per pod when the fabric has three tiers)."""

    count: int | None = Field(None, ge=1, le=128, description="spines (per pod); derived if unset")
    ports: int = Field(32, ge=2, le=1024, description="spine radix")
    speed: Speed = 400000

    _s = field_validator("speed", mode="before")(_speed)


class Leaves(_Model):
    """The leaf (top-of-rack) layer."""

    count: int | None = Field(None, ge=1, le=8192, description="leaves; derived if unset")
    ports: int = Field(32, ge=2, le=1024, description="leaf radix")
    speed: Speed = 400000
    uplink_speed: Speed | None = Field(None, description="leaf-spine link speed; leaf speed")
    uplinks_per_spine: int | None = Field(
        None, ge=1, le=64, description="parallel links to each spine, bundled; derived if unset"
    )
    peer_link_ports: int = Field(2, ge=1, le=16, description="MLAG peer-link ports per leaf")

    _s = field_validator("speed", "uplink_speed", mode="before")(_speed)


class SuperSpines(_Model):
    """The third tier, used only when one spine layer's radix cannot reach every leaf."""

    count: int | None = Field(None, ge=1, le=256, description="derived if unset")
    ports: int = Field(64, ge=2, le=1024)
    speed: Speed = 400000

    _s = field_validator("speed", mode="before")(_speed)


class Servers(_Model):
    """GPU servers and their NICs."""

    count: int = Field(8, ge=1, le=65536)
    gpus: int = Field(8, ge=0, le=64, description="GPUs per server")
    nics: Literal[1, 2] = Field(2, description="fabric NICs per server")
    nic_speed: Speed = 400000
    dual_homed: bool = Field(True, description="NICs to the two leaves of an MLAG pair")
    name_prefix: str = Field("server", pattern=r"^[a-z][a-z0-9]{0,9}$")

    _s = field_validator("nic_speed", mode="before")(_speed)


class Oversubscription(_Model):
    """Leaf down:up bandwidth ratios."""

    target: float = Field(1.0, gt=0, description="ratio the sizing aims for")
    max: float = Field(2.0, gt=0, description="ratio above which the design is refused")


class Cables(_Model):
    """Cable lengths per tier, metres (they size PFC headroom)."""

    server: int = Field(5, ge=1, le=10000)
    leaf_spine: int = Field(40, ge=1, le=10000)
    spine_superspine: int = Field(300, ge=1, le=10000)
    peer_link: int = Field(5, ge=1, le=10000)


class Addressing(_Model):
    """IPv4 pools."""

    loopbacks: str = "10.0.0.0/22"
    fabric: str = Field("10.1.0.0/16", description="/31 leaf-spine and spine-superspine links")
    servers: str = Field("10.2.0.0/16", description="server VLAN subnets, one per leaf or pair")
    peer_links: str = Field("10.3.0.0/22", description="/31 MLAG peer-link addresses")

    @field_validator("*")
    @classmethod
    def _network(cls, value: str) -> str:
        try:
            return str(ipaddress.IPv4Network(value))
        except ValueError as exc:
            raise ValueError(f"not an IPv4 network: {exc}") from None


class Asn(_Model):
    """BGP AS numbers: spines share one (per pod), each leaf has its own."""

    superspine: int = Field(64900, ge=1, le=4294967294)
    spine: int = Field(65000, ge=1, le=4294967294, description="pod p uses spine + p")
    leaf_base: int = Field(65100, ge=1, le=4294967294, description="leaf i uses leaf_base + i")


class Bgp(_Model):
    """eBGP timers and multipath."""

    keepalive: int = Field(3, ge=1, le=3600)
    holdtime: int = Field(9, ge=3, le=10800)
    maximum_paths: int = Field(64, ge=1, le=1024)


class Bfd(_Model):
    """BFD on every fabric BGP session."""

    enabled: bool = True
    interval_ms: int = Field(300, ge=10, le=60000)
    multiplier: int = Field(3, ge=2, le=255)


class Mtu(_Model):
    """MTU of switch ports and of server NICs."""

    switch: int = Field(9100, ge=1280, le=9216)
    host: int = Field(9000, ge=1280, le=9216)


class Ecn(_Model):
    """WRED/ECN marking on the lossless queue (DCQCN's Kmin/Kmax/Pmax)."""

    kmin_bytes: int = Field(153600, ge=1)
    kmax_bytes: int = Field(1536000, ge=1)
    pmax_percent: int = Field(10, ge=0, le=100)


class PfcWatchdog(_Model):
    """PFC watchdog on the lossless queues."""

    enabled: bool = True
    detection_ms: int = Field(200, ge=100, le=5000)
    restoration_ms: int = Field(200, ge=100, le=60000)
    poll_ms: int = Field(200, ge=100, le=1000)
    action: Literal["drop", "forward", "alert"] = "drop"


class Buffers(_Model):
    """Shared buffer pools of each switch, bytes."""

    ingress_lossless_pool: int = Field(60000000, ge=1)
    egress_lossless_pool: int = Field(60000000, ge=1)
    egress_lossy_pool: int = Field(20000000, ge=1)
    dynamic_th: int = Field(0, ge=-8, le=7)


class TrafficClass(_Model):
    """A class of host traffic: the DSCP hosts mark it with and the TC switches give it."""

    dscp: int = Field(ge=0, le=63)
    tc: int = Field(ge=0, le=7)
    ports: list[int] = Field([], description="destination TCP/UDP ports hosts mark so")


def _default_classes() -> dict[str, TrafficClass]:
    return {
        "roce": TrafficClass(dscp=26, tc=3),
        "cnp": TrafficClass(dscp=48, tc=6),
        "storage": TrafficClass(dscp=10, tc=1, ports=[873, 2049]),
        "default": TrafficClass(dscp=0, tc=0),
    }


class Qos(_Model):
    """The lossless QoS policy: PFC, ECN, buffers and classes."""

    lossless_priorities: list[int] = Field([3], min_length=1, max_length=2)
    classes: dict[str, TrafficClass] = Field(default_factory=_default_classes)
    ecn: Ecn = Field(default_factory=Ecn)
    pfc_watchdog: PfcWatchdog = Field(default_factory=PfcWatchdog)
    buffers: Buffers = Field(default_factory=Buffers)
    rdma_scheduler_weight: int = Field(80, ge=1, le=100, description="DWRR weight, RoCE queue")

    @field_validator("lossless_priorities")
    @classmethod
    def _priorities(cls, value: list[int]) -> list[int]:
        if any(not 0 <= p <= 7 for p in value) or len(set(value)) != len(value):
            raise ValueError("priorities are distinct numbers 0..7")
        return sorted(value)

    @field_validator("classes")
    @classmethod
    def _classes(cls, value: dict[str, TrafficClass]) -> dict[str, TrafficClass]:
        for needed in ("roce", "cnp"):
            if needed not in value:
                raise ValueError(f"class {needed!r} is required")
        dscps = [c.dscp for c in value.values()]
        if len(set(dscps)) != len(dscps):
            raise ValueError("two classes share a DSCP")
        return value


class Fabric(_Model):
    """A leaf-spine fabric for AI training: the root of `fabric.yaml`."""

    name: str = Field(
        "fabric", pattern=r"^[a-z][a-z0-9-]{0,11}$", description="lab name: tags all it creates"
    )
    spines: Spines = Field(default_factory=Spines)
    leaves: Leaves = Field(default_factory=Leaves)
    superspines: SuperSpines = Field(default_factory=SuperSpines)
    servers: Servers = Field(default_factory=Servers)
    oversubscription: Oversubscription = Field(default_factory=Oversubscription)
    cables: Cables = Field(default_factory=Cables)
    addressing: Addressing = Field(default_factory=Addressing)
    asn: Asn = Field(default_factory=Asn)
    bgp: Bgp = Field(default_factory=Bgp)
    bfd: Bfd = Field(default_factory=Bfd)
    mtu: Mtu = Field(default_factory=Mtu)
    qos: Qos = Field(default_factory=Qos)

    @property
    def uplink_speed(self) -> int:
        """Leaf-spine link speed in Mb/s."""
        return self.leaves.uplink_speed or self.leaves.speed


def _key(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc if not str(part).startswith("function-"))


def parse(data: Any, file: str) -> Fabric:
    """Validate intent data; the first problem is raised as one `InputError` line."""
    if not isinstance(data, dict):
        raise InputError(file, "", "the intent must be a mapping of keys to values")
    try:
        return Fabric.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        message = re.sub(r"^Value error, ", "", first["msg"])
        if first["type"] == "extra_forbidden":
            message = "unknown key"
        raise InputError(file, _key(first["loc"]), message) from None


def load(path: Path) -> Fabric:
    """Read and validate `fabric.yaml`."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise InputError(str(path), "", exc.strerror or str(exc)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else ""
        raise InputError(str(path), where, f"not valid YAML: {getattr(exc, 'problem', exc)}") from None
    return parse(data or {}, str(path))


def dump(fabric: Fabric) -> str:
    """The resolved intent as YAML, every default written out."""
    return yaml.safe_dump(fabric.model_dump(mode="json"), sort_keys=False)


def schema() -> str:
    """JSON Schema of `fabric.yaml`, for editors."""
    return json.dumps(Fabric.model_json_schema(), indent=2)
