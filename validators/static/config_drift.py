"""`config_drift`: where a lab's configs differ from what its intent renders."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator
from typing import Any

from twin.design.graph import design
from twin.labdir import Lab
from twin.render import config_db, frr_conf, host_conf
from validators.registry import Params, static
from validators.result import Finding, Result, verdict

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


def _difference(where: str, intent: Any, actual: Any) -> str:
    """'where: intent's value in the intent, actual value here'."""
    show = ["absent" if v is ABSENT else json.dumps(v) for v in (intent, actual)]
    return f"{where + ': ' if where else ''}{show[0]} in the intent, {show[1]} here"


def _db_findings(switch: str, intent: Any, actual: Any) -> list[Finding]:
    """config_db.json differences, named by table, key and field."""
    found = []
    for path, want, have in json_diff(intent, actual):
        table, key, field = (*path, "", "")[:3]
        found.append(Finding(switch, _difference(field, want, have), key, table))
    return found


def _frr_findings(switch: str, intent: str, actual: str) -> list[Finding]:
    """frr.conf differences as the changed lines of a unified diff."""
    lines = difflib.unified_diff(intent.splitlines(), actual.splitlines(), lineterm="", n=0)
    return [
        Finding(switch, line, "", "frr.conf")
        for line in lines
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


@static("config_drift")
def config_drift(lab: Lab, params: Params) -> list[Result]:
    """Configs that differ from what the lab's intent renders, as a diff. No thresholds.

    The intent (`fabric.yaml`) is designed and rendered again; every `config_db.json` is
    compared by table, key and field, every `frr.conf` line by line, every `host.json` by key.
    Any difference fails: edited configs are what a change review must see.

    >>> from validators.examples import tiny_lab, edit_json
    >>> lab = tiny_lab()
    >>> config_drift(lab, {})[0].reason
    '4 switches and 2 servers configured as the intent renders'
    >>> edit_json(lab, "leaf2", lambda db: db["PORT_QOS_MAP"]["Ethernet0"].update(pfc_enable="4"))
    >>> print(config_drift(lab, {})[0].findings[0])
    leaf2 Ethernet0 PORT_QOS_MAP: pfc_enable: "3" in the intent, "4" here
    """
    d = design(lab.fabric)
    findings: list[Finding] = []
    switches = d.switches()
    for index, switch in enumerate(switches):
        rendered = json.loads(json.dumps(config_db.render(d, switch, index)))
        findings += _db_findings(switch, rendered, lab.config_db(switch))
        findings += _frr_findings(switch, frr_conf.render(d, switch), lab.frr_conf(switch))
    servers = d.nodes("server")
    for server in servers:
        for path, want, have in json_diff(host_conf.render(d, server), lab.host(server)):
            findings.append(
                Finding(server, _difference(".".join(path), want, have), "", "host.json")
            )
    drifted = len({f.device for f in findings})
    ok = f"{len(switches)} switches and {len(servers)} servers configured as the intent renders"
    return [
        verdict(
            "config_drift",
            "fabric",
            findings,
            ok,
            {"devices_drifted": drifted, "differences": len(findings)},
        )
    ]
