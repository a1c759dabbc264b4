"""Differences between device configs: a lab's and what its intent renders (`config_drift`),
or two labs' (`twin diff`), as findings by device, table, key and field."""

from __future__ import annotations

import difflib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from twin import jsonio
from twin.lab.directory import Lab, redesigned
from twin.render import config_db, frr_conf, host_conf
from validators.result import Finding

ABSENT = object()


def json_diff(
    intent: Any, actual: Any, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], Any, Any]]:
    """(path, intent's value, actual value) wherever two JSON documents differ (ABSENT when a
    key is missing on one side).

    >>> list(json_diff({"A": {"x": "1", "y": "2"}}, {"A": {"x": "1", "y": "3"}}))
    [(('A', 'y'), '2', '3')]
    """
    if isinstance(intent, dict) and isinstance(actual, dict):
        for key in list(intent) + [k for k in actual if k not in intent]:
            yield from json_diff(intent.get(key, ABSENT), actual.get(key, ABSENT), (*path, key))
    elif intent != actual:
        yield path, intent, actual


Configs = dict[str, tuple[str, Any]]
"""Device -> (file, content): a switch's config_db.json and frr.conf text (keyed
`switch/frr.conf`), a server's host.json."""


def lab_configs(lab: Lab) -> Configs:
    """The configs on disk of every device of a lab."""
    configs: Configs = {}
    for switch in lab.switches():
        configs[switch] = ("config_db.json", lab.config_db(switch))
        configs[f"{switch}/frr.conf"] = ("frr.conf", lab.frr_conf(switch))
    configs.update({s: ("host.json", lab.host(s)) for s in lab.nodes("server")})
    return configs


_SHARED = threading.local()
"""This thread's `sharing` scope: the labs' rendered configs by `id`, with the labs."""


@contextmanager
def sharing() -> Iterator[None]:
    """Inside, `rendered_configs` renders each `Lab` (its intent read once) once for every
    caller in this thread (`config_drift` and `intent_values`: 0.9 s of CPU at 1,024
    servers); dropped at the end, a large lab's rendered configs being hundreds of MB.
    Callers must not change what it returns."""
    if getattr(_SHARED, "labs", None) is not None:
        yield  # an enclosing scope shares
        return
    _SHARED.labs = {}
    try:
        yield
    finally:
        _SHARED.labs = None


def rendered_configs(lab: Lab) -> Configs:
    """What the lab's intent renders for every device (designed, like the lab it grew from if
    it did, and rendered again), made once per lab inside `sharing`."""
    labs: dict[int, tuple[Lab, Configs]] | None = getattr(_SHARED, "labs", None)
    if labs is None:
        return _rendered(lab)
    if id(lab) not in labs:
        labs[id(lab)] = (lab, _rendered(lab))
    return labs[id(lab)][1]


def _rendered(lab: Lab) -> Configs:
    """`rendered_configs` made."""
    d = redesigned(lab)
    configs: Configs = {}
    for switch in d.switches():
        db = jsonio.copied(config_db.render(d, switch))
        configs[switch] = ("config_db.json", db)
        configs[f"{switch}/frr.conf"] = ("frr.conf", frr_conf.render(d, switch))
    configs.update({s: ("host.json", host_conf.render(d, s)) for s in d.nodes("server")})
    return configs


def differences(
    before: Configs, after: Configs, names: tuple[str, str] = ("in the intent", "here")
) -> list[Finding]:
    """Every difference between two sets of device configs: config_db.json by table, key and
    field, frr.conf by changed line, host.json by key; `names` say where each value is. A
    device on one side only is one finding (removed or added, with what its configs carry);
    one removed and one added with the same address (a server's, a switch's loopback) is a
    rename, its configs compared with each other. Removed, renamed and added devices come
    first.

    >>> a = {"leaf1": ("config_db.json", {"PORT": {"Ethernet0": {"mtu": "9100"}}})}
    >>> b = {"leaf1": ("config_db.json", {"PORT": {"Ethernet0": {"mtu": "1500"}}})}
    >>> print(differences(a, b, ("in base", "in candidate"))[0])
    leaf1 Ethernet0 PORT: mtu: "9100" in base, "1500" in candidate
    >>> print(differences(a, {}, ("in base", "in candidate"))[0])
    leaf1: removed (only in base): 1 port
    """
    renamed = _renames(before, after)
    devices: list[Finding] = []  # listed first: removed, renamed, added
    found: list[Finding] = []
    for device in before:
        if device in after:
            found += _compared(device, before[device], after[device], names)
        elif device in renamed:
            target = renamed[device]
            if device == _node(device):
                devices.append(Finding(target, f"renamed from {device}"))
            found += _compared(target, before[device], after[target], names)
        elif device == _node(device):
            devices.append(Finding(device, f"removed (only {names[0]}): {carried(before, device)}"))
    taken = set(renamed.values())
    devices += [
        Finding(d, f"added (only {names[1]}): {carried(after, d)}")
        for d in after
        if d not in before and d not in taken and d == _node(d)
    ]
    return devices + found


def _node(device: str) -> str:
    """The node of a Configs key (`leaf1/frr.conf` -> leaf1)."""
    return device.partition("/")[0]


def _compared(
    device: str, old: tuple[str, Any], new: tuple[str, Any], names: tuple[str, str]
) -> list[Finding]:
    """The differences of one device's config file between two sides."""
    file, before, after = old[0], old[1], new[1]
    if before == after:  # the usual case, at C speed
        return []
    node = _node(device)
    if file == "frr.conf":
        lines = difflib.unified_diff(
            _lines(before), _lines(after), f"{node}/frr.conf", lineterm="", n=0
        )
        return [
            Finding(node, line, "", "frr.conf")
            for line in lines
            if line[:1] in "+-" and not line.startswith(("+++", "---"))
        ]
    found = []
    for path, want, have in json_diff(before, after):
        if file == "host.json":
            found.append(Finding(node, _difference(".".join(path), want, have, names), "", file))
        else:
            table, key, field = (*path, "", "")[:3]
            found.append(Finding(node, _difference(field, want, have, names), key, table))
    return found


def _renames(before: Configs, after: Configs) -> dict[str, str]:
    """Removed device -> added device with the same address (Configs keys: a switch's
    frr.conf's too)."""
    added: dict[str, str] = {}
    for device in after:
        address = _address(after[device])
        if device not in before and address and device == _node(device):
            added.setdefault(address, device)
    out: dict[str, str] = {}
    for device in before:
        if device in after or device != _node(device):
            continue
        target = added.pop(_address(before[device]) or "-", None)
        if target:
            out[device] = target
            if f"{device}/frr.conf" in before and f"{target}/frr.conf" in after:
                out[f"{device}/frr.conf"] = f"{target}/frr.conf"
    return out


def _address(config: tuple[str, Any]) -> str:
    """A device's address: a server's, a switch's loopback ('' when none is readable)."""
    file, content = config
    if not isinstance(content, dict):
        return ""
    if file == "host.json":
        return str(content.get("address") or "")
    loopbacks = content.get("LOOPBACK_INTERFACE")
    keys = [k for k in loopbacks if "|" in k] if isinstance(loopbacks, dict) else []
    return min(keys, default="").partition("|")[2]


SHOWN_LINKS = 8
"""Links listed of a removed or added device."""


def carried(configs: Configs, node: str) -> str:
    """What a device's configs carry, in a line: its address, a switch's ASN and ports, its
    links (a server's NICs and their peers, a switch's port descriptions)."""
    file, content = configs[node]
    if not isinstance(content, dict):
        return file
    address = _address(configs[node])
    parts = [f"address {address}"] if address else []
    links: list[str] = []
    if file == "host.json":
        nics = content.get("interfaces")
        for nic in nics if isinstance(nics, list) else []:
            if isinstance(nic, dict):
                links.append(f"{nic.get('name')} to {nic.get('peer')} {nic.get('peer_port')}")
    else:
        meta = _table(content, "DEVICE_METADATA").get("localhost")
        if isinstance(meta, dict) and isinstance(meta.get("bgp_asn"), str):
            parts.append(f"ASN {meta['bgp_asn']}")
        ports = _table(content, "PORT")
        parts.append(f"{len(ports)} port{'' if len(ports) == 1 else 's'}")
        for name, port in ports.items():
            if isinstance(port, dict) and port.get("description"):
                links.append(f"{name} to {port['description']}")
    if links:
        more = len(links) - SHOWN_LINKS
        parts.append(", ".join(links[:SHOWN_LINKS]) + (f" and {more} more" if more > 0 else ""))
    return "; ".join(parts) or file


def _table(db: dict[str, Any], name: str) -> dict[str, Any]:
    table = db.get(name)
    return table if isinstance(table, dict) else {}


def _lines(text: Any) -> list[str]:
    return [] if text is ABSENT else str(text).splitlines()


def _difference(where: str, old: Any, new: Any, names: tuple[str, str]) -> str:
    """'where: old value in the intent, new value here'."""
    show = ["absent" if v is ABSENT else json.dumps(v) for v in (old, new)]
    return f"{where + ': ' if where else ''}{show[0]} {names[0]}, {show[1]} {names[1]}"
