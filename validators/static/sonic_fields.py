"""`sonic_fields`: every field of the checked CONFIG_DB tables is one SONiC's daemons parse.

The YANG models accept fields the daemons never read: orchagent's qosorch refuses a whole
SCHEDULER entry with a field it does not know, and skips unknown fields of most other tables.
`twin/platforms/sonic-fields.yml` lists, per table, the fields orchagent and the cfgmgr
daemons compare against, each with the sonic-swss source line that parses it (the commit is
in the file); this check fails on any other field, on an entry without a field the daemon
requires (a PFC_WD port without `detection_time`) and on a value it refuses (a scheduler
`type` other than DWRR, WRR or STRICT, a watchdog timer out of its range), naming switch,
table, key and field.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

import twin
from twin import jsonio
from twin.lab.directory import Lab
from validators.registry import Params, static
from validators.result import Finding, Result, verdict

FIELDS = Path(twin.__file__).parent / "platforms" / "sonic-fields.yml"

JUDGED: jsonio.Memo[tuple[int, list[tuple[str, str]]]] = jsonio.Memo(4096)
"""Each table's judgement (`_judged`), by its name and content."""


@functools.cache
def table() -> dict[str, Any]:
    """The daemons' fields (`twin/platforms/sonic-fields.yml`)."""
    data: dict[str, Any] = yaml.safe_load(FIELDS.read_text())
    return data


def _numbered(spec: dict[str, Any], field: str) -> bool:
    return field.isdigit() and spec["low"] <= int(field) <= spec["high"]


def problem(name: str, key: str, field: str) -> str | None:
    """Why the daemon would not take `field` of `name|key` (None when it parses it)."""
    spec = table()["tables"][name]
    if "numbered" in spec:
        rule = spec["numbered"]
        if _numbered(rule, field):
            return None
        return (
            f"{field!r} is not a number in {rule['low']}-{rule['high']} "
            f"({spec['daemon']} parses the fields as numbers at {rule['at']})"
        )
    own = spec.get("keys", {}).get(key, spec)
    if field in own["fields"]:
        return None
    unknown = own["unknown"]
    return (
        f"field {field!r} is not one {spec['daemon']} parses: {unknown['action']} "
        f"({unknown['at']}, sonic-swss {table()['commit'][:7]})"
    )


def value_problem(name: str, key: str, field: str, value: Any) -> str | None:
    """Why the daemon would refuse `value` of `field` in `name|key` (None when it takes it)."""
    spec = table()["tables"][name]
    if key in spec.get("keys", {}):
        return None
    rule = spec.get("values", {}).get(field)
    if rule is None:
        return None
    text = str(value)
    if "one_of" in rule:
        if text in rule["one_of"]:
            return None
        wanted = f"one of {', '.join(rule['one_of'])}"
    else:
        low, high = rule["range"]
        if text.isdigit() and low <= int(text) <= high:
            return None
        wanted = f"an integer in {low}-{high}"
    return (
        f"{field}={text[:40]!r} is refused by {spec['daemon']}: it takes {wanted} "
        f"({rule['at']}, sonic-swss {table()['commit'][:7]})"
    )


def missing(name: str, key: str, entry: dict[str, Any]) -> list[str]:
    """What the daemon says of `name|key` for each field it requires that `entry` lacks."""
    spec = table()["tables"][name]
    if key in spec.get("keys", {}):
        return []
    return [
        f"field {field!r} is missing: {spec['daemon']} refuses the entry without it "
        f"({at}, sonic-swss {table()['commit'][:7]})"
        for field, at in spec.get("required", {}).items()
        if field not in entry
    ]


@static("sonic_fields")
def sonic_fields(lab: Lab, params: Params) -> list[Result]:
    """Every field of PORT, the QoS, buffer and PFC watchdog tables, PORTCHANNEL and INTERFACE
    is one the daemon reading the table parses, with a value it takes, and every field it
    requires is there (sonic-swss, per source line).

    >>> from validators.examples import tiny_lab, edit_json
    >>> lab = tiny_lab()
    >>> sonic_fields(lab, {})[0].status.value
    'pass'
    >>> edit_json(lab, "leaf1", lambda db: db["SCHEDULER"]["scheduler.lossy"].update(priority="6"))
    >>> print(sonic_fields(lab, {})[0].findings[0])  # doctest: +ELLIPSIS
    leaf1 scheduler.lossy SCHEDULER: field 'priority' is not one orchagent (qosorch) parses: ...
    >>> lab = tiny_lab()
    >>> edit_json(lab, "leaf1", lambda db: db["PFC_WD"]["Ethernet0"].pop("detection_time"))
    >>> print(sonic_fields(lab, {})[0].findings[0])  # doctest: +ELLIPSIS
    leaf1 Ethernet0 PFC_WD: field 'detection_time' is missing: orchagent (pfcwdorch) refuses ...
    """
    known = table()["tables"]
    findings: list[Finding] = []
    checked = 0
    for switch in lab.switches():
        db = lab.config_db(switch)
        for name in sorted(set(db) & set(known)):
            fields, whys = _judged(name, db[name])
            checked += fields
            findings += [Finding(switch, why, key, name) for key, why in whys]
    ok = f"{checked} fields of {len(known)} tables are all parsed by SONiC's daemons"
    return [verdict("sonic_fields", "fabric", findings, ok, {"fields": checked})]


def _judged(name: str, entries: dict[str, Any]) -> tuple[int, list[tuple[str, str]]]:
    """The fields of a table and (key, why) of each of its problems; judged once for the
    switches that hold the table word for word (a fabric's leaves share their QoS, buffer
    and watchdog tables: 174 switches' 2,856 such tables at 1,024 servers are 314 distinct)."""
    return JUDGED.get([name, entries], lambda: _judge(name, entries))


def _judge(name: str, entries: dict[str, Any]) -> tuple[int, list[tuple[str, str]]]:
    fields, whys = 0, []
    for key, entry in entries.items():
        here = missing(name, key, entry) if isinstance(entry, dict) else []
        for field, value in entry.items() if isinstance(entry, dict) else ():
            fields += 1
            here += [
                why
                for why in (problem(name, key, field), value_problem(name, key, field, value))
                if why
            ]
        whys += [(key, why) for why in here]
    return fields, whys
