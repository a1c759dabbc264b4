"""`config_drift`: where a lab's configs differ from what its intent renders."""

from __future__ import annotations

from twin.lab.diff import differences, lab_configs, rendered_configs
from twin.lab.directory import Lab
from validators.registry import Params, static
from validators.result import Figure, Result, Status


@static("config_drift")
def config_drift(lab: Lab, params: Params) -> list[Result]:
    """Configs that differ from what the lab's intent renders, listed (informational). No
    thresholds.

    The intent (`fabric.yaml`) is designed and rendered again; every `config_db.json` is
    compared by table, key and field, every `frr.conf` line by line, every `host.json` by key.
    The verdict is `info`, never a failure: an edited config is what a change under test is,
    and the other validators judge whether it is right. `twin diff` lists the same
    differences between two labs.

    >>> from validators.examples import tiny_lab, edit_json
    >>> lab = tiny_lab()
    >>> config_drift(lab, {})[0].reason
    '4 switches and 2 servers configured as the intent renders'
    >>> edit_json(lab, "leaf2", lambda db: db["PORT_QOS_MAP"]["Ethernet0"].update(pfc_enable="4"))
    >>> r = config_drift(lab, {})[0]
    >>> r.status.value, r.reason
    ('info', '1 difference on leaf2 from what the intent renders')
    >>> print(r.findings[0])
    leaf2 Ethernet0 PORT_QOS_MAP: pfc_enable: "3" in the intent, "4" here
    """
    findings = differences(rendered_configs(lab), lab_configs(lab))
    drifted = list(dict.fromkeys(f.device for f in findings))
    if findings:
        many = "s" if len(findings) > 1 else ""
        more = f" and {len(drifted) - 5} more" if len(drifted) > 5 else ""
        shown = ", ".join(drifted[:5]) + more
        reason = f"{len(findings)} difference{many} on {shown} from what the intent renders"
    else:
        switches, servers = len(lab.switches()), len(lab.nodes("server"))
        reason = f"{switches} switches and {servers} servers configured as the intent renders"
    figures: dict[str, Figure] = {"devices_drifted": len(drifted), "differences": len(findings)}
    return [Result("config_drift", "fabric", Status.INFO, reason, figures, findings)]
