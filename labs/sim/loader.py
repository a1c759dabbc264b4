"""Read an experiment file (YAML; the format is documented in docs/simulator.md).

Quantities take units (``40G``, ``1us``, ``200KB``). QoS given at the top level applies to
every switch and host; a switch's own ``qos`` is merged over it, and within a profile each
listed PG or queue is merged over its default.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

from labs.sim import units
from labs.sim.build import ExperimentError
from labs.sim.model import (
    Checks,
    Dcqcn,
    Experiment,
    Fault,
    Flow,
    Host,
    Link,
    LinkFault,
    Monitor,
    PacketLoss,
    PfcStorm,
    PgParams,
    QosProfile,
    QueueParams,
    Switch,
    Transports,
    TxOff,
    Watchdog,
    alpha_from_dynamic_th,
)

T = TypeVar("T")
Convert = Callable[[Any], Any]


def _int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int | float) or v != int(v):
        raise units.UnitError(f"{v!r} is not an integer")
    if not -(2**31) <= v < 2**31:
        raise units.UnitError(f"{v!r} is out of range")
    return int(v)


def _float(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise units.UnitError(f"{v!r} is not a number")
    return float(v)


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise units.UnitError(f"{v!r} is not true or false")
    return v


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise units.UnitError(f"{v!r} is not a string")
    return v


def _strs(v: Any) -> list[str]:
    if not isinstance(v, list):
        raise units.UnitError(f"{v!r} is not a list")
    return [_str(x) for x in v]


def _ints(v: Any) -> tuple[int, ...]:
    if not isinstance(v, list):
        raise units.UnitError(f"{v!r} is not a list")
    return tuple(_int(x) for x in v)


def _index(where: str, key: Any) -> int:
    """A PG or queue number 0-7, written as a number or a quoted one (``"3"``)."""
    text = str(key).strip()
    if isinstance(key, bool) or not text.isdigit() or not 0 <= int(text) < 8:
        raise ExperimentError(f"{where}: {key!r} is not a number 0-7")
    return int(text)


def _mapping(where: str, value: Any) -> dict[Any, Any]:
    """A mapping (None: empty), or a one-line error naming `where`."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ExperimentError(f"{where}: expected a mapping, got {value!r}")
    return value


def _optional(convert: Convert) -> Convert:
    return lambda v: None if v is None else convert(v)


def _fields(
    cls: type[T], where: str, data: Any, converters: Mapping[str, Convert], base: T | None = None
) -> T:
    """`base` (or a default `cls`) with the keys of `data` converted and replaced."""
    if not isinstance(data, dict):
        raise ExperimentError(f"{where}: expected a mapping, got {data!r}")
    values: dict[str, Any] = {}
    for key, raw in data.items():
        name = str(key).replace("-", "_")
        if name not in converters:
            raise ExperimentError(f"{where}: unknown key {key!r} (known: {', '.join(converters)})")
        try:
            values[name] = converters[name](raw)
        except (units.UnitError, ValueError, TypeError) as exc:
            raise ExperimentError(f"{where}.{key}: {exc}") from None
    if base is not None:
        return dataclasses.replace(base, **values)  # type: ignore[type-var]
    try:
        return cls(**values)
    except TypeError as exc:
        raise ExperimentError(f"{where}: {exc}") from None


PG_FIELDS: dict[str, Convert] = {
    "reserved": units.size,
    "headroom": lambda v: None if v in (None, "auto") else units.size(v),
    "xon": units.size,
    "xon_offset": units.size,
    "alpha": _float,
    "static_threshold": _optional(units.size),
}
QUEUE_FIELDS: dict[str, Convert] = {
    "strict": _bool,
    "weight": _int,
    "ecn": _bool,
    "wred_drop": _bool,
    "kmin": units.size,
    "kmax": units.size,
    "pmax": _float,
    "max_bytes": units.size,
}
WATCHDOG_FIELDS: dict[str, Convert] = {
    "detection": units.seconds,
    "restoration": units.seconds,
    "action": lambda v: _choice(v, ("drop", "forward")),
}


def _choice(v: Any, allowed: tuple[str, ...]) -> str:
    if v not in allowed:
        raise units.UnitError(f"{v!r} is not one of {', '.join(allowed)}")
    return str(v)


def _pg(where: str, data: Any, base: PgParams) -> PgParams:
    """A PG mapping; ``dynamic_th: n`` (SONiC) may stand for ``alpha: 2**n``."""
    if isinstance(data, dict) and "dynamic_th" in data:
        data = {("alpha" if k == "dynamic_th" else k): v for k, v in data.items()}
        try:
            data["alpha"] = alpha_from_dynamic_th(_int(data["alpha"]))
        except units.UnitError as exc:
            raise ExperimentError(f"{where}.dynamic_th: {exc}") from None
    return _fields(PgParams, where, data, PG_FIELDS, base)


def qos(where: str, data: Any, base: QosProfile) -> QosProfile:
    """`base` with the fields of a ``qos`` mapping merged over it."""
    if not isinstance(data, dict):
        raise ExperimentError(f"{where}: expected a mapping, got {data!r}")
    data = dict(data)
    pgs = dict(base.pgs)
    for key, value in _mapping(f"{where}.pgs", data.pop("pgs", None)).items():
        pg = _index(f"{where}.pgs", key)
        pgs[pg] = _pg(f"{where}.pgs.{key}", value, base.pg(pg))
    queues = dict(base.queues)
    for key, value in _mapping(f"{where}.queues", data.pop("queues", None)).items():
        q = _index(f"{where}.queues", key)
        queues[q] = _fields(
            QueueParams, f"{where}.queues.{key}", value, QUEUE_FIELDS, base.queue(q)
        )
    converters: dict[str, Convert] = {
        "dscp_to_tc": lambda v: {_int(k): _int(t) for k, t in dict(v).items()},
        "tc_to_queue": _ints,
        "tc_to_pg": _ints,
        "lossless": lambda v: frozenset(_ints(v)),
        "pause_quanta": _int,
        "pfc_response_quanta": _optional(_int),
        "refresh_fraction": _float,
        "dwrr_quantum": units.size,
        "ecn_at": lambda v: _choice(v, ("dequeue", "enqueue")),
        "watchdog": lambda v: (
            None if v is None else _fields(Watchdog, f"{where}.watchdog", v, WATCHDOG_FIELDS)
        ),
    }
    merged = _fields(QosProfile, where, data, converters, base)
    return dataclasses.replace(merged, pgs=pgs, queues=queues)


def _link(i: int, data: Any) -> Link:
    where = f"links[{i}]"
    if isinstance(data, list):
        if len(data) not in (3, 4):
            raise ExperimentError(f"{where}: [a, b, speed] or [a, b, speed, delay]")
        data = dict(zip(("a", "b", "speed", "delay"), data, strict=False))
    return _fields(
        Link,
        where,
        data,
        {"a": _str, "b": _str, "speed": units.rate, "length_m": _float, "delay": units.seconds},
    )


FLOW_FIELDS: dict[str, Convert] = {
    "name": _str,
    "src": _str,
    "dst": _str,
    "size": _optional(units.size),
    "rate": _optional(units.rate),
    "start": units.seconds,
    "stop": _optional(units.seconds),
    "dscp": _int,
    "priority": _optional(_int),
    "cc": lambda v: _choice(v, ("dcqcn", "none")),
    "ecn_capable": _optional(_bool),
    "packet_bytes": _optional(units.size),
    "ttl": _int,
    "after": lambda v: tuple(_str(x) for x in (v if isinstance(v, list) else [v])),
    "after_delay": units.seconds,
    "src_port": _optional(_str),
    "transport": lambda v: _choice(v, ("open", "rc", "tcp")),
}


def _fault(i: int, data: Any) -> Fault:
    where = f"faults[{i}]"
    if isinstance(data, dict) and "link_down" in data:
        data = {("port" if k == "link_down" else k): v for k, v in data.items()}
        conv: dict[str, Convert] = {
            "port": _str,
            "down": units.seconds,
            "up": _optional(units.seconds),
        }
        return _fields(LinkFault, where, data, conv)
    if isinstance(data, dict) and "pfc_storm" in data:
        data = {("port" if k == "pfc_storm" else k): v for k, v in data.items()}
        conv = {
            "port": _str,
            "start": units.seconds,
            "end": units.seconds,
            "priorities": _ints,
            "quanta": _int,
            "interval": _optional(units.seconds),
        }
        return _fields(PfcStorm, where, data, conv)
    if isinstance(data, dict) and "loss" in data:
        data = {("port" if k == "loss" else k): v for k, v in data.items()}
        conv = {
            "port": _str,
            "start": units.seconds,
            "end": _optional(units.seconds),
            "probability": _float,
            "count": _int,
        }
        return _fields(PacketLoss, where, data, conv)
    if isinstance(data, dict) and "tx_off" in data:
        data = {("port" if k == "tx_off" else k): v for k, v in data.items()}
        conv = {"port": _str, "start": units.seconds, "end": units.seconds}
        return _fields(TxOff, where, data, conv)
    raise ExperimentError(
        f"{where}: a fault is {{link_down: node:port, down: ...}}, {{pfc_storm: node:port, ...}},"
        " {loss: node:port, ...} or {tx_off: node:port, start: ..., end: ...}"
    )


def _list(data: Mapping[str, Any], key: str) -> list[Any]:
    value = data.get(key) or []
    if not isinstance(value, list):
        raise ExperimentError(f"{key}: expected a list")
    return value


def experiment(data: Any, name: str = "experiment") -> Experiment:
    """An Experiment from the parsed YAML document."""
    if not isinstance(data, dict):
        raise ExperimentError("an experiment file is a mapping")
    data = dict(data)
    known = {
        "name",
        "seed",
        "duration",
        "stop_when_done",
        "packet_bytes",
        "header_bytes",
        "gap_bytes",
        "qos",
        "switches",
        "hosts",
    }
    known |= {"links", "flows", "faults", "dcqcn", "transports", "monitor", "checks"}
    unknown = set(data) - known
    if unknown:
        raise ExperimentError(f"unknown keys {sorted(unknown)} (known: {sorted(known)})")
    base = qos("qos", data.get("qos") or {}, QosProfile())
    switches = []
    for i, s in enumerate(_list(data, "switches")):
        where = f"switches[{i}]"
        if not isinstance(s, dict):
            raise ExperimentError(f"{where}: expected a mapping")
        s = dict(s)
        own = qos(f"{where}.qos", s.pop("qos", None) or {}, base)
        port_qos = {
            str(p): qos(f"{where}.port_qos.{p}", q, own)
            for p, q in _mapping(f"{where}.port_qos", s.pop("port_qos", None)).items()
        }
        routes = {
            str(d): _convert(f"{where}.routes.{d}", ps, _strs)
            for d, ps in _mapping(f"{where}.routes", s.pop("routes", None)).items()
        }
        sw = _fields(
            Switch,
            where,
            s,
            {
                "name": _str,
                "buffer_bytes": units.size,
                "cell_bytes": units.size,
                "cell_descriptor": units.size,
            },
        )
        switches.append(dataclasses.replace(sw, qos=own, port_qos=port_qos, routes=routes))
    hosts = []
    for i, h in enumerate(_list(data, "hosts")):
        where = f"hosts[{i}]"
        h = {"name": h} if isinstance(h, str) else dict(_mapping(where, h))
        own = qos(f"{where}.qos", h.pop("qos", None) or {}, base)
        hosts.append(
            dataclasses.replace(_fields(Host, where, h, {"name": _str, "address": _str}), qos=own)
        )
    flows = [
        _fields(Flow, f"flows[{i}]", f, FLOW_FIELDS) for i, f in enumerate(_list(data, "flows"))
    ]
    dcqcn = _fields(
        Dcqcn,
        "dcqcn",
        data.get("dcqcn") or {},
        {
            "g": _float,
            "alpha_period": units.seconds,
            "timer": units.seconds,
            "byte_counter": units.size,
            "f": _int,
            "r_ai": units.rate,
            "r_hai": units.rate,
            "min_rate": units.rate,
            "cnp_interval": units.seconds,
            "cnp_mode": lambda v: _choice(v, ("window", "holdoff")),
            "initial_alpha": _float,
            "clamp_after_increase": _bool,
            "cnp_dscp": _int,
            "cnp_priority": _int,
        },
    )
    transports = _fields(
        Transports,
        "transports",
        data.get("transports") or {},
        {
            "rc_ack_every": _int,
            "rc_timeout_exponent": _int,
            "tcp_ack_every": _int,
            "dupack_threshold": _int,
            "tcp_rto_min": units.seconds,
            "tcp_rto_max": units.seconds,
            "tcp_rto_initial": units.seconds,
            "tcp_initial_window": _int,
            "dctcp_g": _float,
            "trace": _bool,
        },
    )
    monitor = _fields(
        Monitor,
        "monitor",
        data.get("monitor") or {},
        {"interval": units.seconds, "ports": lambda v: tuple(_str(x) for x in v), "flows": _bool},
    )
    checks = _fields(
        Checks,
        "checks",
        data.get("checks") or {},
        {
            "interval": units.seconds,
            "deadlock": _bool,
            "stall": units.seconds,
            "stop_on_deadlock": _bool,
            "pause_storm": units.seconds,
        },
    )
    return Experiment(
        switches=switches,
        hosts=hosts,
        links=[_link(i, x) for i, x in enumerate(_list(data, "links"))],
        flows=flows,
        faults=[_fault(i, x) for i, x in enumerate(_list(data, "faults"))],
        dcqcn=dcqcn,
        transports=transports,
        duration=_top(data, "duration", units.seconds, 1.0),
        stop_when_done=_top(data, "stop_when_done", _bool, True),
        packet_bytes=_top(data, "packet_bytes", units.size, 4096),
        header_bytes=_top(data, "header_bytes", units.size, 62),
        gap_bytes=_top(data, "gap_bytes", units.size, 20),
        monitor=monitor,
        checks=checks,
        name=_top(data, "name", _str, name),
    )


def _top(data: dict[str, Any], key: str, convert: Callable[[Any], T], default: Any) -> T:
    """A top-level value converted, or a one-line error naming its key."""
    return _convert(key, data.get(key, default), convert)


def _convert(where: str, value: Any, convert: Callable[[Any], T]) -> T:
    """`value` converted, or a one-line error naming `where`."""
    try:
        return convert(value)
    except (units.UnitError, ValueError, TypeError) as exc:
        raise ExperimentError(f"{where}: {exc}") from None


def load(path: str | Path) -> tuple[Experiment, int | None]:
    """The experiment in a YAML file and the seed it names, if any."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ExperimentError(f"{path}: not YAML ({exc})") from None
    try:
        exp = experiment(data, name=path.stem)
        seed = _top(data, "seed", _optional(_int), None)
    except ExperimentError as exc:
        raise ExperimentError(f"{path}: {exc}") from None
    return exp, seed
