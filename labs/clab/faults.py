"""Faults on a clab twin (docs/containerlab.md has the table).

* link-down / link-up / link-flap: both container interfaces (`ethN`) of the link down / up,
  by netlink in each container's namespace, and a switch end's port carrier off / on in the
  switch (docker-sonic-vs keeps its TAP port up whatever `ethN` does).
* node-down / node-up: `containerlab stop` / `start --node` (the node's links are parked and
  its peers keep theirs), and the carrier of the switch ports cabled to it off / on; a switch
  is then started as containerlab's post-deploy does and its frr.conf pushed again, a server
  is set up again.
* daemon-kill / daemon-restart: `supervisorctl signal KILL` / `supervisorctl start` of the
  daemon (default bgpd) in the switch; frr.conf is pushed again after a restart.
* loss / rate / clear: `containerlab tools netem set` on both ends.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from labs import events
from labs.backend import Fault
from labs.clab import namespace, switches, tools
from labs.clab.containers import Containers
from twin.errors import LabError
from twin.lab.directory import Lab
from twin.render import sonic_vs

NODE_UP_TIMEOUT = 300.0


def _daemon(fault: Fault) -> str:
    return fault.daemon or "bgpd"


def _switch(boxes: Containers, fault: Fault) -> str:
    node = fault.node or ""
    if node not in boxes.lab.switches():
        raise LabError(f"lab {boxes.lab.name}: {fault.kind} needs a switch, not {node!r}")
    return node


def bring_up_switch(boxes: Containers, node: str, timeout: float) -> None:
    """Start a switch container's SONiC as containerlab's post-deploy does, then wait until it
    is ready and push its frr.conf (nodes/sonic/sonic.go: `supervisord`, `supervisorctl start
    bgpd`); its kernel set again (`Containers.set_kernel`: containerlab moved its `ethN`
    in anew)."""
    boxes.set_kernel(node)
    boxes.start(node, ["supervisord"])
    boxes.run(node, ["supervisorctl", "start", "bgpd"])
    deadline = time.monotonic() + timeout
    while (why := switches.missing(boxes.run, node)) is not None:
        if time.monotonic() > deadline:
            raise LabError(f"{node}: not ready after {timeout:.0f} s: {why}")
        time.sleep(1.0)
    switches.configure_frr(boxes.run, boxes.start, boxes.lab, node)


def host(lab: Lab, node: str) -> dict[str, Any]:
    """A server's container host file (`clab/<node>/host.json`: its routed /31 NICs)."""
    data: dict[str, Any] = json.loads(
        (lab.path / sonic_vs.FLAVOUR / node / "host.json").read_text()
    )
    return data


def set_up_server(boxes: Containers, node: str) -> str:
    """Configure a server container from its container host file; what RDMA got."""
    return namespace.configure_host(boxes.pid(node), host(boxes.lab, node))


def _netem(boxes: Containers, fault: Fault, values: list[str]) -> None:
    topo = str(tools.topology(boxes.lab))
    for node, eth in boxes.link_ends(fault.link or ""):
        name = tools.container_name(boxes.lab.name, node)
        tools.run(["tools", "netem", "set", "-t", topo, "-n", name, "-i", eth, *values])


def _node(boxes: Containers, fault: Fault, up: bool) -> None:
    node = fault.node or ""
    if node not in boxes.lab.graph.nodes:
        raise LabError(f"lab {boxes.lab.name}: no node {node!r}")
    topo = str(tools.topology(boxes.lab))
    tools.run(["start" if up else "stop", "-t", topo, "--node", node])
    boxes.forget(node)
    if not up:
        boxes.set_peer_carriers(node, False)
        return
    if node in boxes.lab.switches():
        bring_up_switch(boxes, node, NODE_UP_TIMEOUT)
    else:
        set_up_server(boxes, node)
    boxes.set_peer_carriers(node, True)


def _link(boxes: Containers, fault: Fault, up: bool) -> dict[str, Any]:
    ends = boxes.set_link(fault.link or "", up)
    return _log(boxes, "link-up" if up else "link-down", link=fault.link, ends=_ends(boxes, ends))


def _ends(boxes: Containers, ends: list[tuple[str, str]]) -> list[str]:
    """Both ends of a link as `node:port` (SONiC port or NIC names)."""
    return [f"{node}:{boxes.port[node][eth]}" for node, eth in ends]


def _flap(boxes: Containers, fault: Fault) -> dict[str, Any]:
    """Down and up `count` times, `period` seconds per half-cycle, each logged."""
    for _ in range(fault.count):
        _link(boxes, fault, False)
        time.sleep(fault.period)
        _link(boxes, fault, True)
        time.sleep(fault.period)
    ends = _ends(boxes, boxes.link_ends(fault.link or ""))
    return _log(
        boxes, "link-flap-done", link=fault.link, ends=ends, period=fault.period, count=fault.count
    )


def _log(boxes: Containers, kind: str, **fields: Any) -> dict[str, Any]:
    """The fault's event, in the form every backend logs (`fault`, `link`/`ends`, `node`)."""
    present = {k: v for k, v in fields.items() if v is not None}
    return events.append(boxes.lab.path, "fault", fault=kind, backend="clab", **present)


def _restart(boxes: Containers, fault: Fault) -> None:
    node = _switch(boxes, fault)
    boxes.run(node, ["supervisorctl", "start", _daemon(fault)])
    switches.configure_frr(boxes.run, boxes.start, boxes.lab, node)


FIRE: dict[str, Callable[[Containers, Fault], Any]] = {
    "link-down": lambda b, f: _link(b, f, False),
    "link-up": lambda b, f: _link(b, f, True),
    "link-flap": _flap,
    "node-down": lambda b, f: _node(b, f, False),
    "node-up": lambda b, f: _node(b, f, True),
    "daemon-kill": lambda b, f: b.run(
        _switch(b, f), ["supervisorctl", "signal", "KILL", _daemon(f)]
    ),
    "daemon-restart": lambda b, f: _restart(b, f),
    "loss": lambda b, f: _netem(b, f, ["--loss", str(f.percent or 0)]),
    "rate": lambda b, f: _netem(b, f, ["--rate", str(int((f.mbit or 0) * 1000))]),
    "clear": lambda b, f: _netem(b, f, []),
}


def fire(boxes: Containers, fault: Fault) -> dict[str, Any]:
    """Inject a fault now; the event it logged."""
    if fault.kind not in FIRE:
        raise LabError(f"the clab backend cannot inject {fault.kind} faults")
    logged = FIRE[fault.kind](boxes, fault)
    if isinstance(logged, dict):
        return logged
    fields: dict[str, Any] = {"link": fault.link, "node": fault.node, "daemon": fault.daemon}
    if fault.link:
        fields["ends"] = _ends(boxes, boxes.link_ends(fault.link))
    if fault.kind in ("loss", "rate"):
        fields.update(percent=fault.percent, mbit=fault.mbit)
    if fault.kind.startswith("daemon"):
        fields["daemon"] = _daemon(fault)
    return _log(boxes, fault.kind, **fields)
