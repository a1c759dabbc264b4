"""What a validator returns: a verdict per scope, with figures and findings, JSON-ready.

A `Result` is one verdict of one validator on one scope (the whole fabric, a priority, a
failure set): `pass`, `fail`, `not-observable` when the backend cannot see what the check
needs, or `info` when it only lists something for a person (config drift). `Finding`s say
where a problem is: device, port and the table (or other place) holding it.

>>> problem = Finding("spine1", "pfc_enable lacks 3", "Ethernet0", "PORT_QOS_MAP")
>>> r = verdict("demo", "fabric", [problem], "every port enables PFC", {"ports": 8})
>>> r.status.value, r.reason
('fail', '1 finding: spine1 Ethernet0 PORT_QOS_MAP: pfc_enable lacks 3')
>>> Result.from_json(r.to_json()) == r
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

Figure = int | float | str


class Status(StrEnum):
    """The verdict of one validator on one scope."""

    PASS = "pass"
    FAIL = "fail"
    NOT_OBSERVABLE = "not-observable"
    INFO = "info"
    """Listed for a person to read (what differs from the intent); never passes or fails."""


@dataclass(frozen=True)
class Finding:
    """One problem: on which device and port, in which table (or other place), and what."""

    device: str
    message: str
    port: str = ""
    where: str = ""

    def __str__(self) -> str:
        place = " ".join(p for p in (self.device, self.port, self.where) if p)
        return f"{place}: {self.message}"


@dataclass(frozen=True)
class Result:
    """One validator's verdict on one scope, with measured figures and findings."""

    validator: str
    scope: str
    status: Status
    reason: str
    figures: dict[str, Figure] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON data."""
        data = asdict(self)
        data["status"] = self.status.value
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Result:
        """The inverse of `to_json`."""
        return cls(
            data["validator"],
            data["scope"],
            Status(data["status"]),
            data["reason"],
            dict(data.get("figures", {})),
            [Finding(**f) for f in data.get("findings", [])],
        )


def merged(findings: list[Finding]) -> list[Finding]:
    """The same problem on several ports of a device as one finding naming the ports.

    >>> fs = [Finding("leaf1", "no PFC", p, "PORT_QOS_MAP") for p in ("Ethernet0", "Ethernet8")]
    >>> merged(fs)
    [Finding(device='leaf1', message='no PFC', port='Ethernet0,Ethernet8', where='PORT_QOS_MAP')]
    """
    ports: dict[tuple[str, str, str], list[str]] = {}
    for f in findings:
        ports.setdefault((f.device, f.message, f.where), []).append(f.port)
    return [
        Finding(device, message, ",".join(p for p in names if p), where)
        for (device, message, where), names in ports.items()
    ]


def verdict(
    validator: str, scope: str, findings: list[Finding], ok: str, figures: Mapping[str, Figure]
) -> Result:
    """Fail with the first finding as reason when there are findings, else pass with `ok`."""
    if not findings:
        return Result(validator, scope, Status.PASS, ok, dict(figures), [])
    count = f"{len(findings)} finding{'s' if len(findings) > 1 else ''}"
    return Result(validator, scope, Status.FAIL, f"{count}: {findings[0]}", dict(figures), findings)
