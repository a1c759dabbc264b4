"""A run's FIB snapshots (`fib/LABEL.json`): the first whole, with each distinct next-hop
list written once (`twin.model.fib.to_grouped`: a large fabric's spines carry the same 64-way
ECMP lists for hundreds of prefixes), each later one as its changes from that first
(docs/observations.md): a fault changes a few routes of a few nodes.

A change file is `{"encoding": "delta", "base": LABEL, "nodes": {node: {prefix: [next hops]
or null (the route is gone)} or null (the node's FIB is gone)}}`; a node it does not name has
the base's routes.

>>> from ipaddress import IPv4Network as N
>>> from twin.model.fib import NextHop
>>> a = {"leaf1": {N("10.0.0.0/24"): (NextHop("spine1", "Ethernet0"),), N("10.0.1.0/24"): ()}}
>>> b = {"leaf1": {N("10.0.0.0/24"): (NextHop("spine2", "Ethernet4"),)}}
>>> delta = encode(b, a, "start")
>>> delta["nodes"]
{'leaf1': {'10.0.0.0/24': [{'node': 'spine2', 'port': 'Ethernet4'}], '10.0.1.0/24': None}}
>>> decode(delta, lambda label: a, "fib/x.json") == b
True
"""

from __future__ import annotations

from collections.abc import Callable
from ipaddress import IPv4Network
from typing import Any

from twin.errors import InputError
from twin.model.fib import Fib, Routes, from_grouped, from_json, to_grouped, to_json


def encode(fib: Fib, base: Fib | None = None, label: str = "") -> dict[str, Any]:
    """The JSON of `fib`: whole (grouped), or as its changes from `base` (the snapshot
    `label`)."""
    if base is None:
        return to_grouped(fib)
    nodes: dict[str, Any] = {}
    for node in sorted(set(base) | set(fib)):
        old, new = base.get(node), fib.get(node)
        if new is None:
            nodes[node] = None
        elif old != new:
            old = old or {}
            changed = {p: hops for p, hops in new.items() if old.get(p) != hops}
            entry: dict[str, Any] = to_json({node: changed})[node]
            entry.update({str(p): None for p in sorted(old, key=str) if p not in new})
            nodes[node] = entry
    return {"encoding": "delta", "base": label, "nodes": nodes}


def decode(data: Any, base_of: Callable[[str], Fib], file: str) -> Fib:
    """The FIB of a snapshot's JSON (grouped, a change file whose base is read with
    `base_of(label)`, or whole as `to_json` writes it: an older twin's, a file by hand);
    anything malformed refused as one `InputError` line."""
    encoding = data.get("encoding") if isinstance(data, dict) else None
    if encoding == "grouped":
        return from_grouped(data, file)
    if encoding != "delta":
        return from_json(data, file)
    base, nodes = data.get("base"), data.get("nodes")
    if not isinstance(base, str) or not isinstance(nodes, dict):
        raise InputError(file, "base", "a change file names its base snapshot and its nodes")
    if not nodes:  # no route changed: the base itself
        return base_of(base)
    fib: Fib = dict(base_of(base))
    for node, entry in nodes.items():
        if entry is None:
            fib.pop(node, None)
            continue
        if not isinstance(entry, dict):
            raise InputError(file, f"nodes.{node}", "must be an object of prefix -> next hops")
        kept = {p: hops for p, hops in entry.items() if hops is not None}
        table: Routes = {**fib.get(node, {}), **from_json({node: kept}, file)[node]}
        for prefix in (p for p, hops in entry.items() if hops is None):
            try:
                table.pop(IPv4Network(prefix), None)
            except ValueError as exc:
                raise InputError(
                    file, f"nodes.{node}.{prefix}", f"not an IPv4 network ({exc})"
                ) from None
        fib[node] = table
    return fib
