"""Differences between device configs: a lab's and what its intent renders (`config_drift`),
or two labs' (`twin diff`), as findings by device, table, key and field."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator
from typing import Any

from twin.design.graph import design
from twin.labdir import Lab
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


def rendered_configs(lab: Lab) -> Configs:
    """What the lab's intent renders for every device (designed and rendered again)."""
    d = design(lab.fabric)
    configs: Configs = {}
    for index, switch in enumerate(d.switches()):
        db = json.loads(json.dumps(config_db.render(d, switch, index)))
        configs[switch] = ("config_db.json", db)
        configs[f"{switch}/frr.conf"] = ("frr.conf", frr_conf.render(d, switch))
    configs.update({s: ("host.json", host_conf.render(d, s)) for s in d.nodes("server")})
    return configs


def differences(
    before: Configs, after: Configs, names: tuple[str, str] = ("in the intent", "here")
) -> list[Finding]:
    """Every difference between two sets of device configs: config_db.json by table, key and
    field, frr.conf by changed line, host.json by key; `names` say where each value is.

    >>> a = {"leaf1": ("config_db.json", {"PORT": {"Ethernet0": {"mtu": "9100"}}})}
    >>> b = {"leaf1": ("config_db.json", {"PORT": {"Ethernet0": {"mtu": "1500"}}})}
    >>> print(differences(a, b, ("in base", "in candidate"))[0])
    leaf1 Ethernet0 PORT: mtu: "9100" in base, "1500" in candidate
    """
    found: list[Finding] = []
    for device in [*before, *(d for d in after if d not in before)]:
        file, old = before.get(device, (after[device][0], ABSENT))
        new = after.get(device, (file, ABSENT))[1]
        if old == new:  # the usual case, at C speed
            continue
        node = device.partition("/")[0]
        if file == "frr.conf":
            lines = difflib.unified_diff(
                _lines(old), _lines(new), f"{node}/frr.conf", lineterm="", n=0
            )
            found += [
                Finding(node, line, "", "frr.conf")
                for line in lines
                if line[:1] in "+-" and not line.startswith(("+++", "---"))
            ]
            continue
        for path, want, have in json_diff(old, new):
            if file == "host.json":
                found.append(
                    Finding(node, _difference(".".join(path), want, have, names), "", file)
                )
            else:
                table, key, field = (*path, "", "")[:3]
                found.append(Finding(node, _difference(field, want, have, names), key, table))
    return found


def _lines(text: Any) -> list[str]:
    return [] if text is ABSENT else str(text).splitlines()


def _difference(where: str, old: Any, new: Any, names: tuple[str, str]) -> str:
    """'where: old value in the intent, new value here'."""
    show = ["absent" if v is ABSENT else json.dumps(v) for v in (old, new)]
    return f"{where + ': ' if where else ''}{show[0]} {names[0]}, {show[1]} {names[1]}"
