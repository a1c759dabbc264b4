"""Packet-level simulator of a lossless RoCEv2 fabric: PFC, shared buffers, ECN and DCQCN.

Python API::

    from labs.sim import Experiment, Switch, Host, Link, Flow, simulate
    result = simulate(experiment, seed=1)        # -> Result
    result.to_json()

Command line: ``python -m labs.sim EXPERIMENT.yaml [-o OUT.json] [--seed N]``, i.e.
``twin.cli.verbs.sim.main(argv: list[str], prog="python -m labs.sim") -> int`` (0 ok, 1 deadlock
detected, 2 error; `prog` names the command in usage messages). The
model, the file format and the parameters are in docs/simulator.md; the hot loop is a C
core (labs/sim/csrc) built as the extension ``labs.sim._core`` and called through ctypes.
"""

from labs.sim.build import ExperimentError
from labs.sim.engine import simulate
from labs.sim.loader import load
from labs.sim.model import (
    Checks,
    Dcqcn,
    Experiment,
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
)
from labs.sim.native import EngineUnavailable
from labs.sim.result import Event, FlowResult, PortResult, PriorityCounters, Result

__all__ = [
    "Checks",
    "Dcqcn",
    "EngineUnavailable",
    "Event",
    "Experiment",
    "ExperimentError",
    "Flow",
    "FlowResult",
    "Host",
    "Link",
    "LinkFault",
    "Monitor",
    "PacketLoss",
    "PfcStorm",
    "PgParams",
    "PortResult",
    "PriorityCounters",
    "QosProfile",
    "QueueParams",
    "Result",
    "Switch",
    "Transports",
    "TxOff",
    "Watchdog",
    "load",
    "simulate",
]
