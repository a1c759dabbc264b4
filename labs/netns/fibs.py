"""A netns twin's FIB in neutral form: each switch's `ip -j route` in its namespace, mapped
back to SONiC ports by `labs.kernel.from_snapshot`."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from labs import cmdlog
from labs.kernel import from_snapshot
from labs.netns.plan import netns_name
from twin.lab.directory import Lab
from twin.model.fib import Fib
from twin.model.wiring import Wiring


def ip_route(lab: Lab, switch: str) -> list[dict[str, Any]]:
    """A switch's kernel routes, as `ip -j route` prints them."""
    done = cmdlog.run(["ip", "-n", netns_name(lab.name, switch), "-j", "route", "show"])
    routes: list[dict[str, Any]] = json.loads(done.stdout or "[]")
    return routes


def live(lab: Lab, wiring: Wiring) -> Fib:
    """Every node's FIB now."""
    with ThreadPoolExecutor(8) as pool:
        tables = dict(
            zip(lab.switches(), pool.map(lambda s: ip_route(lab, s), lab.switches()), strict=True)
        )
    return from_snapshot(wiring, tables)
