"""`yang`: every switch's config_db.json is valid for the SONiC YANG models."""

from __future__ import annotations

from twin.lab.directory import Lab
from twin.yang import check
from validators.registry import Params, static
from validators.result import Finding, Result, Status, verdict

PLAIN_FROM = 32
"""From this many switches a lab's configs are first passed by the plain models
(`twin.yang.plain`): loading them costs about what 20-30 large configs' leafrefs do."""


def _finding(switch: str, problem: check.Problem) -> Finding:
    message = f"{problem.field}: {problem.message}" if problem.field else problem.message
    return Finding(switch, message, problem.key or "", problem.table or "config_db.json")


@static("yang", max_problems=50)
def yang(lab: Lab, params: Params) -> list[Result]:
    """Every switch's config_db.json loads as `config reload` would: the SONiC YANG models'
    tables, types, ranges, patterns, references and `must` rules (twin/yang/check.py, with
    libyang). `max_problems` (50): problems listed per switch.

    >>> from validators.examples import tiny_lab, edit_json
    >>> lab = tiny_lab()
    >>> yang(lab, {"max_problems": 50})[0].reason
    '4 switches valid for the SONiC YANG models'
    >>> edit_json(lab, "leaf1", lambda db: db["PORT"]["Ethernet0"].update(mtu="99999"))
    >>> print(yang(lab, {"max_problems": 50})[0].findings[0])
    leaf1 Ethernet0 PORT: mtu: Value "99999" is out of type uint16 min/max bounds.
    """
    if not check.yang_available():
        reason = "the libyang binding is not installed (pip install libyang==2.7.1)"
        return [Result("yang", "fabric", Status.NOT_OBSERVABLE, reason)]
    switches = lab.switches()
    limit, plain = params["max_problems"], len(switches) >= PLAIN_FROM
    findings = [
        _finding(switch, p)
        for switch in switches
        for p in check.problems(lab.config_db(switch), max_problems=limit, plain=plain)
    ]
    invalid = len({f.device for f in findings})
    ok = f"{len(switches)} switches valid for the SONiC YANG models"
    return [
        verdict("yang", "fabric", findings, ok, {"switches": len(switches), "invalid": invalid})
    ]
