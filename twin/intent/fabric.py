"""The intent: what a network engineer writes in `fabric.yaml`.

Every field has a default, and `resolve` writes them all out, so the resolved intent saved in
a lab directory says exactly what was built. Unknown keys, duplicate keys and wrong types
are refused: types are strict (`count: true` or `count: "8"` is not a number), except that
speeds may be written `400G`.
"""

from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_serializer,
    model_validator,
)

from twin.intent.inputs import parse_model, strict_yaml
from twin.units import speed_mbps


def _speed(value: Any) -> Any:
    return speed_mbps(value) if isinstance(value, str) else value


SPEED_PATTERN = r"^\s*[0-9]+(\.[0-9]+)?\s*[GMTgmt]?([Bb]/?[Ss]|[Bb][Pp][Ss])?\s*$"
Speed = Annotated[
    int,
    BeforeValidator(_speed),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": 1},
                {"type": "string", "pattern": SPEED_PATTERN},
            ],
            "description": "link speed in Mb/s, or with a unit: 400G, 100Gb/s",
        }
    ),
]

LAB_NAME = re.compile(r"[a-z][a-z0-9-]{0,11}")
"""A lab's name: the tag of its namespaces (`<lab>.<node>`), processes and run directory."""


def is_lab_name(name: str) -> bool:
    """Whether `name` follows the lab-name rule (so it is safe in paths and tags).

    >>> [is_lab_name(n) for n in ("small", "it-1a2b3c", "", "..", "a/b", "x\\n")]
    [True, True, False, False, False, False]
    """
    return LAB_NAME.fullmatch(name) is not None


MAX_RAILS = 8
"""NICs per server at most: one per GPU of an 8-GPU server, each on its own rail."""

SWITCH_NAME = re.compile(r"^(leaf|spine|superspine)[0-9]*$")
"""Prefixes of switch names (`leaf12`): a server name prefix like these could name a switch."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True, strict=True)


class Spines(_Model):
    """The spine layer (per pod when the fabric has three tiers)."""

    count: int | None = Field(
        default=None, ge=1, le=128, description="spines (per pod); derived if unset"
    )
    ports: int = Field(default=32, ge=2, le=1024, description="spine radix")
    speed: Speed = 400000


class Leaves(_Model):
    """The leaf (top-of-rack) layer."""

    count: int | None = Field(default=None, ge=1, le=8192, description="leaves; derived if unset")
    ports: int = Field(default=32, ge=2, le=1024, description="leaf radix")
    speed: Speed = 400000
    uplink_speed: Speed | None = Field(
        default=None, description="leaf-spine link speed; leaf speed"
    )
    uplinks_per_spine: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="parallel links to each spine, bundled; derived if unset",
    )
    peer_link_ports: int = Field(
        default=2, ge=1, le=16, description="MLAG peer-link ports per leaf"
    )


class SuperSpines(_Model):
    """The third tier, used only when one spine layer's radix cannot reach every leaf."""

    count: int | None = Field(default=None, ge=1, le=256, description="derived if unset")
    ports: int = Field(default=64, ge=2, le=1024)
    speed: Speed = 400000


class Servers(_Model):
    """GPU servers and their NICs."""

    count: int = Field(default=8, ge=1, le=65536)
    gpus: int = Field(default=8, ge=0, le=64, description="GPUs per server")
    nics: int = Field(
        default=2, ge=1, le=MAX_RAILS, description="fabric NICs per server (rails: 1..8)"
    )
    nic_speed: Speed = 400000
    dual_homed: bool = Field(
        default=True,
        description="NICs to the two leaves of an MLAG pair (rails: each NIC to its rail's pair)",
    )
    rails: bool = Field(
        default=False,
        description="rail-optimized: NIC k of every server of a scalable unit to rail k's leaf "
        "(docs/rails.md); written out only when set",
    )
    name_prefix: str = Field(default="server", pattern=r"^[a-z][a-z0-9]{0,9}$")
    name_width: int = Field(
        default=0,
        ge=0,
        le=6,
        description="digits each server's number is padded to (2: gpu01..gpu16); 0: unpadded",
    )
    per_rack: int | None = Field(
        default=None,
        ge=1,
        le=1024,
        description="servers per rack (leaf group, or scalable unit on rails), filled in order, "
        "the server ports each leaf keeps; if unset, the racks (leaves.count's, or as many as "
        "the most a leaf holds within oversubscription.max need) share the servers evenly; "
        "written out only when set",
    )

    @model_validator(mode="after")
    def _width_holds_the_count(self) -> Servers:
        if self.name_width and len(str(self.count)) > self.name_width:
            raise ValueError(
                f"name_width {self.name_width} cannot number {self.count} servers "
                f"(give {len(str(self.count))} or more, or 0)"
            )
        return self

    @model_serializer(mode="wrap")
    def _rails_when_set(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """`rails` is left out of the resolved intent when false, and `per_rack` when unset,
        so that intents written before they existed resolve to the same bytes."""
        data: dict[str, Any] = handler(self)
        if not self.rails:
            data.pop("rails", None)
        if self.per_rack is None:
            data.pop("per_rack", None)
        return data

    @field_validator("name_prefix")
    @classmethod
    def _not_a_switch(cls, value: str) -> str:
        if SWITCH_NAME.match(value):
            raise ValueError(f"{value!r} would give servers the names of switches")
        return value


class Oversubscription(_Model):
    """Leaf down:up bandwidth ratios."""

    target: float = Field(default=1.0, gt=0, description="ratio the sizing aims for")
    max: float = Field(default=2.0, gt=0, description="ratio above which the design is refused")


class Cables(_Model):
    """Cable lengths per tier, metres (they size PFC headroom)."""

    server: int = Field(default=5, ge=1, le=10000)
    leaf_spine: int = Field(default=40, ge=1, le=10000)
    spine_superspine: int = Field(default=300, ge=1, le=10000)
    peer_link: int = Field(default=5, ge=1, le=10000)


class Addressing(_Model):
    """IPv4 pools."""

    loopbacks: str = "10.0.0.0/22"
    fabric: str = Field(
        default="10.1.0.0/16", description="/31 leaf-spine and spine-superspine links"
    )
    servers: str = Field(
        default="10.2.0.0/16", description="server VLAN subnets, one per leaf or pair"
    )
    peer_links: str = Field(default="10.3.0.0/22", description="/31 MLAG peer-link addresses")

    @field_validator("*")
    @classmethod
    def _network(cls, value: str, info: ValidationInfo) -> str:
        try:
            network = ipaddress.IPv4Network(value)
        except ValueError as exc:
            raise ValueError(f"not an IPv4 network: {exc}") from None
        for other, earlier in info.data.items():
            if network.overlaps(ipaddress.IPv4Network(earlier)):
                raise ValueError(f"{network} overlaps addressing.{other} ({earlier})")
        return str(network)


class Asn(_Model):
    """BGP AS numbers: spines share one (per pod), each leaf has its own."""

    superspine: int = Field(default=64900, ge=1, le=4294967294)
    spine: int = Field(default=65000, ge=1, le=4294967294, description="pod p uses spine + p")
    leaf_base: int = Field(
        default=65100, ge=1, le=4294967294, description="leaf i uses leaf_base + i"
    )


class Bgp(_Model):
    """eBGP timers and multipath."""

    keepalive: int = Field(default=3, ge=1, le=3600)
    holdtime: int = Field(default=9, ge=3, le=10800)
    maximum_paths: int = Field(default=64, ge=1, le=1024)
    coalesce_ms: int = Field(default=100, ge=0, le=60000, description="update-group coalesce time")


class Bfd(_Model):
    """BFD on every fabric BGP session."""

    enabled: bool = True
    interval_ms: int = Field(default=300, ge=10, le=60000)
    multiplier: int = Field(default=3, ge=2, le=255)


class Mtu(_Model):
    """MTU of switch ports and of server NICs."""

    switch: int = Field(default=9100, ge=1280, le=9216)
    host: int = Field(default=9000, ge=1280, le=9216)


class Ecn(_Model):
    """WRED/ECN marking on the lossless queue (DCQCN's Kmin/Kmax/Pmax)."""

    kmin_bytes: int = Field(default=153600, ge=1)
    kmax_bytes: int = Field(default=1536000, ge=1)
    pmax_percent: int = Field(default=10, ge=0, le=100)


class PfcWatchdog(_Model):
    """PFC watchdog on the lossless queues."""

    enabled: bool = True
    detection_ms: int = Field(default=200, ge=100, le=5000)
    restoration_ms: int = Field(default=200, ge=100, le=60000)
    poll_ms: int = Field(default=200, ge=100, le=1000)
    action: Literal["drop", "forward", "alert"] = "drop"


class Dcqcn(_Model):
    """DCQCN on the servers' RDMA NICs: reaction point (sender) and notification point
    (receiver). Defaults: the paper's values as the DCQCN authors' and HPCC's simulators
    reproduce them (physics reference 3.2)."""

    g: float = Field(default=1 / 256, gt=0, le=1, description="alpha gain")
    alpha_period_us: float = Field(default=55.0, gt=0, description="alpha update period")
    timer_us: float = Field(default=55.0, gt=0, description="rate increase timer T")
    byte_counter: int = Field(default=10_000_000, ge=1, description="rate increase bytes B")
    fast_recovery_steps: int = Field(default=5, ge=0, le=64, description="F")
    r_ai_mbps: float = Field(default=40.0, gt=0, description="additive increase")
    r_hai_mbps: float = Field(default=400.0, gt=0, description="hyper increase")
    min_rate_mbps: float = Field(default=100.0, gt=0, description="rate floor")
    cnp_interval_us: float = Field(default=50.0, gt=0, description="at most one CNP per flow")
    initial_alpha: float = Field(default=1.0, ge=0, le=1)


class Buffers(_Model):
    """Shared buffer pools of each switch, bytes."""

    ingress_lossless_pool: int = Field(default=60000000, ge=1)
    egress_lossless_pool: int = Field(default=60000000, ge=1)
    egress_lossy_pool: int = Field(default=20000000, ge=1)
    dynamic_th: int = Field(default=0, ge=-8, le=7)


class TrafficClass(_Model):
    """A class of host traffic: the DSCP hosts mark it with and the TC switches give it."""

    dscp: int = Field(ge=0, le=63)
    tc: int = Field(ge=0, le=7)
    ports: list[int] = Field(default=[], description="destination TCP/UDP ports hosts mark so")
    loss_budget_percent: float | None = Field(
        default=None,
        ge=0,
        le=100,
        description="lossy classes: share of their packets they may lose outside faults "
        "(none: best effort, loss reported, not judged); a class on a lossless priority may "
        "lose none",
    )


def _default_classes() -> dict[str, TrafficClass]:
    return {
        "roce": TrafficClass(dscp=26, tc=3),
        "cnp": TrafficClass(dscp=48, tc=6),
        "storage": TrafficClass(dscp=10, tc=1, ports=[873, 2049]),
        "default": TrafficClass(dscp=0, tc=0),
    }


class Qos(_Model):
    """The lossless QoS policy: PFC, ECN, buffers and classes."""

    lossless_priorities: list[int] = Field(default=[3], min_length=1, max_length=2)
    classes: dict[str, TrafficClass] = Field(default_factory=_default_classes)
    ecn: Ecn = Field(default_factory=Ecn)
    pfc_watchdog: PfcWatchdog = Field(default_factory=PfcWatchdog)
    buffers: Buffers = Field(default_factory=Buffers)
    dcqcn: Dcqcn = Field(default_factory=Dcqcn)
    rdma_scheduler_weight: int = Field(
        default=80, ge=1, le=100, description="DWRR weight, RoCE queue"
    )

    @field_validator("lossless_priorities")
    @classmethod
    def _priorities(cls, value: list[int]) -> list[int]:
        wrong = [p for p in value if not 0 <= p <= 7] + [
            p for p in set(value) if value.count(p) > 1
        ]
        if wrong:
            raise ValueError(f"priorities are distinct numbers 0..7 ({wrong[0]} is not)")
        return sorted(value)

    @field_validator("classes")
    @classmethod
    def _classes(cls, value: dict[str, TrafficClass]) -> dict[str, TrafficClass]:
        for needed in ("roce", "cnp"):
            if needed not in value:
                raise ValueError(f"class {needed!r} is required")
        owner: dict[int, str] = {}
        for name, c in value.items():
            if c.dscp in owner:
                raise ValueError(f"classes {owner[c.dscp]} and {name} share DSCP {c.dscp}")
            owner[c.dscp] = name
        return value

    def lossless(self, name: str) -> bool:
        """Whether the class `name` is lossless: its TC is one of the lossless priorities."""
        return name in self.classes and self.classes[name].tc in self.lossless_priorities


MARGIN_MS = 500
"""Failover budget beyond BFD detection: BGP withdrawal and FIB programming."""


class Failover(_Model):
    """How long a failure may cost traffic, detection and convergence together, ms: what
    `failover` judges and the switches' detection must fit in. Unset: BFD's detection
    (`bfd.multiplier` x `bfd.interval_ms`; the BGP hold time when BFD is off) plus 500 ms,
    written out when the intent is resolved."""

    link_ms: int | None = Field(
        default=None, ge=1, le=600000, description="a link or node that goes down (loss of signal)"
    )
    gray_ms: int | None = Field(
        default=None,
        ge=1,
        le=600000,
        description="a gray failure: the link stays up (packet loss, rate, a routing daemon)",
    )


class Collectives(_Model):
    """How close to their analytical bound collectives must run (`collective_efficiency`)."""

    max_slowdown: float = Field(
        default=4.0, ge=1, description="mean iteration at most this times the bound"
    )
    max_p99_over_p50: float = Field(default=1.5, ge=1, description="iteration time spread")
    max_cv: float = Field(default=0.25, gt=0, description="iteration std dev / mean")


class Fabric(_Model):
    """A leaf-spine fabric for AI training: the root of `fabric.yaml`."""

    name: str = Field(
        default="fabric",
        pattern=f"^{LAB_NAME.pattern}$",
        description="lab name: tags all it creates",
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
    failover: Failover = Field(default_factory=Failover)
    collectives: Collectives = Field(default_factory=Collectives)

    @model_validator(mode="after")
    def _budgets(self) -> Fabric:
        bfd = self.bfd.multiplier * self.bfd.interval_ms
        detection = (bfd if self.bfd.enabled else self.bgp.holdtime * 1000) + MARGIN_MS
        if self.failover.link_ms is None:
            self.failover.link_ms = detection
        if self.failover.gray_ms is None:
            self.failover.gray_ms = detection
        return self

    @property
    def uplink_speed(self) -> int:
        """Leaf-spine link speed in Mb/s."""
        return self.leaves.uplink_speed or self.leaves.speed


def parse(data: Any, file: str) -> Fabric:
    """Validate intent data; the first problem is raised as one `InputError` line."""
    return parse_model(Fabric, data, file)


def load(path: Path) -> Fabric:
    """Read and validate `fabric.yaml`."""
    return parse(strict_yaml(path), str(path))


def dump(fabric: Fabric) -> str:
    """The resolved intent as YAML, every default written out."""
    return yaml.safe_dump(fabric.model_dump(mode="json"), sort_keys=False)


def schema() -> str:
    """JSON Schema of `fabric.yaml`, for editors."""
    return json.dumps(Fabric.model_json_schema(), indent=2)
