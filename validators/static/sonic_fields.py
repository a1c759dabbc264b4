"""`sonic_fields`: every field of the checked CONFIG_DB tables is one SONiC's daemons parse.

The YANG models accept fields the daemons never read: orchagent's qosorch refuses a whole
SCHEDULER entry with a field it does not know, and skips unknown fields of most other tables.
`twin/platforms/sonic-fields.yml` lists, per table, the fields orchagent and the cfgmgr
daemons compare against, each with the sonic-swss source line that parses it (the commit is
in the file); this check fails on any other field, naming switch, table, key and field.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

import twin
from twin.labdir import Lab
from validators.registry import Params, static
from validators.result import Finding, Result, verdict

FIELDS = Path(twin.__file__).parent / "platforms" / "sonic-fields.yml"


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


@static("sonic_fields")
def sonic_fields(lab: Lab, params: Params) -> list[Result]:
    """Every field of PORT, the QoS, buffer and PFC watchdog tables, PORTCHANNEL and INTERFACE
    is one the daemon reading the table parses (sonic-swss, per source line).

    >>> from validators.examples import tiny_lab, edit_json
    >>> lab = tiny_lab()
    >>> sonic_fields(lab, {})[0].status.value
    'pass'
    >>> edit_json(lab, "leaf1", lambda db: db["SCHEDULER"]["scheduler.lossy"].update(priority="6"))
    >>> print(sonic_fields(lab, {})[0].findings[0])  # doctest: +ELLIPSIS
    leaf1 scheduler.lossy SCHEDULER: field 'priority' is not one orchagent (qosorch) parses: ...
    """
    known = table()["tables"]
    findings: list[Finding] = []
    checked = 0
    for switch in lab.switches():
        db = lab.config_db(switch)
        for name in sorted(set(db) & set(known)):
            for key, entry in db[name].items():
                for field in entry:
                    checked += 1
                    why = problem(name, key, field)
                    if why:
                        findings.append(Finding(switch, why, key, name))
    ok = f"{checked} fields of {len(known)} tables are all parsed by SONiC's daemons"
    return [verdict("sonic_fields", "fabric", findings, ok, {"fields": checked})]
