"""What a clab twin shows, in the neutral observation schema.

* FIB: each switch's kernel routes (`ip -j route show` in its container; SONiC-VS forwards in
  the container's kernel, on netdevs named after the SONiC ports: `Ethernet8`,
  `PortChannel1`), mapped to `Fib` by the lab's cabling (`labs.kernel.from_snapshot`).
* Counters: every container interface (`ethN`, read by netlink in the container's namespace),
  named back to its SONiC port or NIC through `ifmap.json`.
* BGP: `show bgp summary json` through vtysh in each switch container.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from labs import events
from labs.backend import Session
from labs.clab import namespace, switches
from labs.clab.containers import Containers
from labs.kernel import from_snapshot
from twin.model.fib import Fib
from twin.model.wiring import shared

WATCH_INTERVAL = 1.0


class ClabObserver:
    """Reads a running clab twin."""

    def __init__(self, boxes: Containers) -> None:
        self.boxes = boxes
        self.lab = boxes.lab

    def routes(self) -> dict[str, list[dict[str, Any]]]:
        """Each switch's `ip -j route show` (main table)."""

        def one(node: str) -> list[dict[str, Any]]:
            done = self.boxes.run(node, ["ip", "-j", "route", "show"])
            entries: list[dict[str, Any]] = json.loads(done.stdout or "[]")
            return entries

        with ThreadPoolExecutor(8) as pool:
            return dict(zip(self.lab.switches(), pool.map(one, self.lab.switches()), strict=True))

    def fib(self) -> Fib:
        """Every node's forwarding table now."""
        return from_snapshot(shared(self.lab), self.routes())

    def counters(self) -> dict[str, list[int]]:
        """Per `node:port`, the values of `COUNTER_FIELDS`, from the container interfaces."""
        result = {}
        for node, ports in self.boxes.port.items():
            seen = namespace.links(self.boxes.pid(node))
            for eth, port in ports.items():
                if eth in seen:
                    result[f"{node}:{port}"] = seen[eth]["counters"]
        return result

    def bgp(self) -> list[Session]:
        """Every switch's BGP sessions now."""
        with ThreadPoolExecutor(8) as pool:
            found = pool.map(
                lambda n: switches.sessions(self.boxes.run, self.lab, n), self.lab.switches()
            )
            return [s for seen in found for s in seen]

    @contextlib.contextmanager
    def watch(self) -> Iterator[list[dict[str, Any]]]:
        """While inside, poll BGP sessions and log each change (`bgp` events)."""
        changes: list[dict[str, Any]] = []
        stop = threading.Event()

        def poll() -> None:
            before = {(s.node, s.peer): s.state for s in self.bgp()}
            while not stop.wait(WATCH_INTERVAL):
                now = {(s.node, s.peer): s.state for s in self.bgp()}
                for (node, peer), state in now.items():
                    if before.get((node, peer)) != state:
                        changes.append(
                            events.append(self.lab.path, "bgp", node=node, peer=peer, state=state)
                        )
                before = now

        thread = threading.Thread(target=poll, name="clab-watch", daemon=True)
        thread.start()
        try:
            yield changes
        finally:
            stop.set()
            thread.join()
