"""The C core (labs/sim/csrc, built as the extension labs.sim._core) seen through ctypes."""

from __future__ import annotations

import ctypes
import importlib
import os
from array import array
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

from twin.errors import TwinError

if TYPE_CHECKING:
    from labs.sim.routing import RouteRows

P = ctypes.c_void_p
I32 = ctypes.c_int32
I64 = ctypes.c_int64
F64 = ctypes.c_double
PI32 = ctypes.POINTER(I32)
PI64 = ctypes.POINTER(I64)
PF64 = ctypes.POINTER(F64)

PORT_FIELDS = 12
"""Counters per port and priority that sim_port_stats writes (6 + the drop counters)."""
FLOW_FIELDS = 10
TRANSPORT_FIELDS = 7
"""Per flow, what sim_flow_transport writes."""
COLL_FIELDS = 12
"""Per slot of a collective, what sim_collective_stats writes."""
COUNTS = 10
"""What sim_counts writes."""

_SIGNATURES: dict[str, tuple[object, list[object]]] = {
    "sim_new": (P, [I32, I32, I32, I32, I32, I32, ctypes.c_uint64]),
    "sim_free": (None, [P]),
    "sim_set_node": (None, [P, I32, I32, I32, I64, I32]),
    "sim_set_profile": (None, [P, I32, PI32, PF64, PF64, PF64]),
    "sim_set_port": (None, [P, I32, I32, I32, I32, F64, F64]),
    "sim_set_link_ports": (None, [P, I32, I32, I32]),
    "sim_set_route_rows": (None, [P, I32, PI32, PI32, PI32, PI32, PI32, I32]),
    "sim_add_route_rows": (None, [P, F64, I32, PI32, PI32, PI32, PI32, PI32, I32]),
    "sim_set_flows": (None, [P, I32, I32, PI64, PF64, PI32]),
    "sim_set_dependents": (None, [P, PI32]),
    "sim_keep_runs": (None, [P, I32]),
    "sim_set_dcqcn": (None, [P, I32, PF64]),
    "sim_set_transport": (None, [P, PF64]),
    "sim_set_loss": (None, [P, I32, F64, F64, F64, I64]),
    "sim_add_link_event": (None, [P, I32, F64, I32]),
    "sim_add_rate_event": (None, [P, I32, F64, F64]),
    "sim_add_storm": (None, [P, I32, I32, I32, F64, F64, F64]),
    "sim_set_monitor": (None, [P, F64, PI32, I32, I32]),
    "sim_set_checks": (None, [P, F64, I32, F64, I32, F64]),
    "sim_set_wire": (None, [P, I32, I32]),
    "sim_run": (I32, [P, F64, I32]),
    "sim_now": (F64, [P]),
    "sim_port_stats": (None, [P, PI64]),
    "sim_flow_stats": (None, [P, I32, I32, PF64]),
    "sim_flow_drops": (None, [P, I32, I32, PF64]),
    "sim_flow_transport": (None, [P, I32, I32, PF64]),
    "sim_counts": (None, [P, PI64]),
    "sim_check_routes": (None, [P]),
    "sim_samples": (PI32, [P]),
    "sim_flow_samples": (PI64, [P]),
    "sim_cycles": (PI32, [P]),
    "sim_log_entry": (None, [P, I32, PI64]),
    "sim_add_collective": (
        I32,
        [P, I32, I32, I32, I32, I32, I32, F64, F64, PI64, PI32, ctypes.c_char_p, PI32, PI32, PI32],
    ),
    "sim_add_replay": (
        I32,
        [P, I32, I32, I32, I32, F64, F64, PI32, PI32, I32, PI32, ctypes.c_char_p, PI32, PI32, PI32],
    ),
    "sim_collective_stats": (None, [P, I32, PI64]),
    "sim_set_max_samples": (None, [P, I64]),
    "sim_sample_interval": (F64, [P]),
}


class EngineUnavailable(TwinError, RuntimeError):
    """The compiled core is missing or cannot be loaded."""


CORE_ENV = "TWIN_SIM_CORE"
"""A core to load instead of the one installed (`labs.sim.pgo`'s training, its bench)."""


@cache
def library() -> ctypes.CDLL:
    """The loaded core with its function signatures declared."""
    try:
        path = os.environ.get(CORE_ENV) or importlib.import_module("labs.sim._core").__file__
        lib = ctypes.CDLL(str(path))
    except (ImportError, OSError) as exc:
        raise EngineUnavailable(
            f"labs.sim: the C core is not built ({exc}); run `bash scripts/setup.sh` "
            "or `pip install -e .` (needs gcc and python3-dev)"
        ) from None
    missing = [name for name in _SIGNATURES if not hasattr(lib, name)]
    if missing:
        raise EngineUnavailable(
            f"labs.sim: the C core is older than its sources (no {', '.join(missing)}); "
            "run `pip install -e .`"
        )
    for name, (restype, argtypes) in _SIGNATURES.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes
    return lib


def i32(values: Sequence[int]) -> ctypes.Array[ctypes.c_int32]:
    return (I32 * max(len(values), 1)).from_buffer(array("i", values or [0]))


def i64(values: Sequence[int]) -> ctypes.Array[ctypes.c_int64]:
    return (I64 * max(len(values), 1)).from_buffer(array("q", values or [0]))


def f64(values: Sequence[float]) -> ctypes.Array[ctypes.c_double]:
    return (F64 * max(len(values), 1)).from_buffer(array("d", values or [0.0]))


def rows(table: RouteRows) -> tuple[Any, ...]:
    """A `RouteRows`' arrays as sim_set_route_rows takes them (dest, cells, hops, own_start,
    own)."""
    arrays = [
        np.ascontiguousarray(a, np.int32)
        for a in (table.dest, table.cells, table.hops, table.own_start, table.own)
    ]
    return tuple((a if len(a) else np.zeros(1, np.int32)).ctypes.data_as(PI32) for a in arrays)
