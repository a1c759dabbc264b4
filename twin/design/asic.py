"""The switch ASICs behind the SKUs a lab can name (twin/platforms/asics.yml) and how their
buffers count a frame: whole cells, the first also holding a descriptor. The generator, the
`headroom` validator and the simulator all count lossless headroom this way
(docs/simulator.md, Cells and pause timing)."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

import yaml

ASICS = Path(__file__).resolve().parents[1] / "platforms" / "asics.yml"


@dataclass(frozen=True)
class Cells:
    """How a node's buffer counts a frame: whole cells of `size` bytes, the first also
    holding a `descriptor` (size 1, descriptor 0: bytes)."""

    size: int = 1
    descriptor: int = 0

    def held(self, frame: int) -> int:
        """Buffer bytes a frame of `frame` bytes holds.

        >>> Cells(208, 0).held(64), Cells(144, 64).held(1086), Cells().held(1086)
        (208, 1152, 1086)
        """
        return -(-(frame + self.descriptor) // self.size) * self.size

    def scaled(self, wire: int, frames: Sequence[int]) -> int:
        """Buffer bytes that `wire` bytes of `frames` can hold at most: scaled by the frame
        holding the most per byte (a cell of 254 B: 1062-byte frames 1.196, 4158-byte 1.038).

        >>> Cells(254).scaled(10_000, (1062, 4158)), Cells().scaled(10_000, (1062, 4158))
        (11959, 10000)
        """
        worst = max(frames, key=lambda f: Fraction(self.held(f), f))
        return -(-wire * self.held(worst) // worst)


BYTES = Cells()
"""A buffer that counts bytes (the simulator's default switch)."""


@dataclass(frozen=True)
class Asic:
    """What a switch's ASIC fixes: its buffer cell (a frame holds
    ceil((frame + descriptor) / cell) of them) and where its queues decide ECN."""

    sku: str
    name: str
    cell_bytes: int
    descriptor: int
    ecn_at: Literal["dequeue", "enqueue"]

    @property
    def cells(self) -> Cells:
        """How its buffers count a frame."""
        return Cells(self.cell_bytes, self.descriptor)


@functools.cache
def _asic_table() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(ASICS.read_text())
    return data


def sku_asic(sku: str) -> Asic:
    """The ASIC of an SKU; one not in twin/platforms/asics.yml gets the table's default SKU's.

    >>> sku_asic("DellEMC-Z9332f-O32").cell_bytes, sku_asic("unknown").sku
    (254, 'Force10-S6000')
    """
    table = _asic_table()
    known = sku if sku in table["skus"] else str(table["default"])
    row = table["skus"][known]
    ecn_at: Literal["dequeue", "enqueue"] = "enqueue" if row["ecn_at"] == "enqueue" else "dequeue"
    return Asic(known, str(row["asic"]), int(row["cell"]), int(row["descriptor"]), ecn_at)


def asic(db: Mapping[str, Any]) -> Asic:
    """The ASIC of a switch's SKU (its config_db's DEVICE_METADATA hwsku).

    >>> a = asic({"DEVICE_METADATA": {"localhost": {"hwsku": "DellEMC-Z9332f-O32"}}})
    >>> a.name, a.cell_bytes, a.ecn_at
    ('Tomahawk3', 254, 'dequeue')
    >>> asic({}).cell_bytes
    208
    """
    return sku_asic(str(db.get("DEVICE_METADATA", {}).get("localhost", {}).get("hwsku", "")))
