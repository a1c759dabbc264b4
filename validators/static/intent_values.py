"""`intent_values`: every CONFIG_DB field and frr.conf statement the intent fixes holds the
intent's value.

The intent is designed and rendered again (`twin.lab.diff.rendered_configs`, as
`config_drift`): that is where each value comes from, never from the config under test. Per
switch, every key of the judged tables that the intent renders must be there, and each of
its fields must hold the intent's value, or be absent where SONiC's daemons then use that
same value (`twin.configs.defaults`). Entries the intent does not render (an added buffer
profile, another port's map) are not judged here. Not judged: what the intent leaves free
(port descriptions and aliases, neighbour names), the switch's own metadata
(DEVICE_METADATA), BGP timers beside BFD, and the schedulers (`schedulers` judges their
proportions); the DSCP -> TC map is judged on the DSCPs of the intent's classes, the TC maps
on the TCs of its classes (no packet carries another TC).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

from twin.configs.defaults import absent
from twin.intent.fabric import Qos
from twin.lab.diff import ABSENT, rendered_configs
from twin.lab.directory import Lab
from validators.registry import Params, static
from validators.result import Finding, Result, merged, verdict

ADDRESSING = "the design's addressing"
BUNDLES = "the design's bundles and MLAG pairs"
SOURCES = {
    "PORT": "the platform's port layout, the design's speeds and mtu.switch",
    "LOOPBACK_INTERFACE": ADDRESSING,
    "INTERFACE": ADDRESSING,
    "PORTCHANNEL_INTERFACE": ADDRESSING,
    "VLAN_INTERFACE": ADDRESSING,
    "BGP_NEIGHBOR": "the design's addressing and ASNs",
    "PORTCHANNEL": BUNDLES,
    "PORTCHANNEL_MEMBER": BUNDLES,
    "VLAN": BUNDLES,
    "VLAN_MEMBER": BUNDLES,
    "MCLAG_DOMAIN": BUNDLES,
    "MCLAG_INTERFACE": BUNDLES,
    "MCLAG_UNIQUE_IP": BUNDLES,
    "DSCP_TO_TC_MAP": "qos.classes",
    "TC_TO_PRIORITY_GROUP_MAP": "qos.classes, the lossless priorities",
    "TC_TO_QUEUE_MAP": "qos.classes",
    "MAP_PFC_PRIORITY_TO_QUEUE": "the lossless priorities",
    "PFC_PRIORITY_TO_PRIORITY_GROUP_MAP": "the lossless priorities",
    "PORT_QOS_MAP": "qos.classes, the lossless priorities, qos.pfc_watchdog",
    "QUEUE": "qos.classes, the lossless priorities, qos.ecn",
    "WRED_PROFILE": "qos.ecn",
    "BUFFER_POOL": "qos.buffers",
    "BUFFER_PROFILE": "qos.buffers, the headroom design (twin/design/headroom.py)",
    "BUFFER_PG": "the lossless priorities' headroom",
    "BUFFER_QUEUE": "the lossless priorities' buffers",
    "CABLE_LENGTH": "the design's cable lengths",
    "PFC_WD": "qos.pfc_watchdog",
}
"""The judged tables and what in the intent fixes each."""
FREE = {("PORT", "alias"), ("PORT", "description"), ("BGP_NEIGHBOR", "name")}
"""Fields the intent leaves free."""
UNJUDGED = {("BGP_NEIGHBOR", "holdtime"), ("BGP_NEIGHBOR", "keepalive")}
"""Fields the intent sets without saying whether another value harms (timers beside BFD)."""
SKIPPED = FREE | UNJUDGED
"""Fields not compared."""
FRR_FREE = ("frr ", "hostname ", "service ", "timers ", "coalesce-time ")
"""frr.conf statements the intent leaves free or does not speak to (`description` too)."""


HOST_JUDGED = ("address", "interfaces", "routes", "dscp_marking", "rdma.devices")
"""host.json keys judged here: what the design fixes of a server's wiring, addressing,
routes and marking rules (its MTU and RDMA settings are `host_rdma`'s; the hostname is free;
the bond and the NICs' speed the twin emulates)."""
HOST_SKIPPED = {"speed", "class"}
"""Not judged: the NICs' speed (emulated) and a marking rule's `class`, a label: a rule marks
by its ports and DSCP alone (the deploy's iptables rules)."""


def _walk(want: Any, got: Any, path: str) -> Iterator[tuple[str, Any, Any]]:
    """(path, the intent's value, this one) wherever a host file differs, lists by index
    (a marking rule's ports as a set)."""
    if isinstance(want, dict) and isinstance(got, dict):
        for key, value in want.items():
            if key not in HOST_SKIPPED:
                yield from _walk(value, got.get(key, ABSENT), f"{path}.{key}")
    elif isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        if path.endswith(".ports"):
            if sorted(want) != sorted(got):
                yield path, want, got
            return
        for i, (a, b) in enumerate(zip(want, got, strict=True)):
            yield from _walk(a, b, f"{path}.{i}")
    elif want != got:
        yield path, want, got


def _host(server: str, want: dict[str, Any], got: dict[str, Any]) -> list[Finding]:
    """A server's host file against the intent's rendering, on `HOST_JUDGED`."""
    found = []
    for key in HOST_JUDGED:
        top, _, sub = key.partition(".")
        a, b = want.get(top, ABSENT), got.get(top, ABSENT)
        if sub:
            a = a.get(sub, ABSENT) if isinstance(a, dict) else ABSENT
            b = b.get(sub, ABSENT) if isinstance(b, dict) else ABSENT
        for path, value, given in _walk(a, b, key):
            shown = "absent" if given is ABSENT else json.dumps(given)
            message = f"{shown}; the intent's {json.dumps(value)} (the design's)"
            found.append(Finding(server, message, "", f"host.json {path}"))
    return found


def _used(qos: Qos) -> dict[str, set[str]]:
    """The entries of each map that the intent's classes use."""
    tcs = {str(c.tc) for c in qos.classes.values()} | {"0"}
    return {
        "DSCP_TO_TC_MAP": {str(c.dscp) for c in qos.classes.values()},
        "TC_TO_PRIORITY_GROUP_MAP": tcs,
        "TC_TO_QUEUE_MAP": tcs,
    }


def _entry(
    switch: str, table: str, key: str, want: dict[str, Any], got: dict[str, Any], db: Any
) -> list[Finding]:
    """One entry's fields against the intent's."""
    if want.items() <= got.items():  # every field the intent's (most entries)
        return []
    source = SOURCES[table]
    found = []
    for field, value in want.items():
        if (table, field) in SKIPPED:
            continue
        if field not in got:
            default = absent(table, field)
            meta = db.get("DEVICE_METADATA", {}).get("localhost", {})
            if table == "BGP_NEIGHBOR" and meta.get("default_bgp_status") == "down":
                default = "down"
            if default == value:
                continue
            then = f" (SONiC then uses {default})" if default is not None else ""
            message = f"{field} absent{then}; the intent's {value} ({source})"
        elif got[field] != value:
            message = f"{field} {got[field]}; the intent's {value} ({source})"
        else:
            continue
        found.append(Finding(switch, message, key, table))
    return found


def _switch(switch: str, want: dict[str, Any], db: dict[str, Any], qos: Qos) -> list[Finding]:
    """A switch's config_db against the intent's rendering, table by table."""
    used = _used(qos)
    found = []
    for table, source in SOURCES.items():
        intended = want.get(table)
        if not intended:
            continue
        given = db.get(table)
        if not isinstance(given, dict):
            message = f"table missing: the intent has {len(intended)} entries ({source})"
            found.append(Finding(switch, message, "", table))
            continue
        for key, fields in intended.items():
            entry = given.get(key)
            if not isinstance(entry, dict):
                found.append(Finding(switch, f"missing; the intent has it ({source})", key, table))
                continue
            if table in used:
                fields = {f: v for f, v in fields.items() if f in used[table]}
            found += _entry(switch, table, key, fields, entry, db)
    return found


def _statements(text: str) -> Counter[str]:
    """frr.conf's statements the intent fixes (comments, block ends and what it leaves free
    apart)."""
    lines = (line.strip() for line in text.splitlines())
    return Counter(
        line
        for line in lines
        if line
        and not line.startswith(("!", "exit", "end"))
        and not line.startswith(FRR_FREE)
        and " description " not in f" {line} "
    )


def _frr(switch: str, want: str, got: str) -> list[Finding]:
    """Each statement of the intent's frr.conf that this one lacks (or holds changed)."""
    missing = _statements(want) - _statements(got)
    return [
        Finding(switch, f"'{line}' missing: the intent's routing has it", "", "frr.conf")
        for line in missing
    ]


@static("intent_values")
def intent_values(lab: Lab, params: Params) -> list[Result]:
    """Every CONFIG_DB field and frr.conf statement the intent fixes is as it renders them.

    Scope `config_db`: per switch, the ports (speed, lanes, index, FEC, MTU, state), the
    addressing, BGP neighbours (ASN, local address, state), bundles, VLANs and MLAG tables, the
    QoS maps on the entries the intent's classes use, the port QoS bindings, queues, WRED,
    buffer pools, profiles, PGs and queues, cable lengths and the PFC watchdog hold the
    intent's values; a field left out passes where SONiC then uses the intent's value (the
    port MTU 9100). Scope `frr`: every statement of the intent's frr.conf is there
    (hostname, descriptions, version, service and timers apart). Scope `hosts`: each
    server's address, NICs' peers and gateways, routes, DSCP marking rules and RDMA devices
    are the design's. A finding names the device,
    the table and key (or the frr.conf statement) and says what the intent holds. Not judged:
    entries the intent does not render, DEVICE_METADATA, BGP timers, SCHEDULER
    (`schedulers`). No thresholds.

    >>> from validators.examples import tiny_lab, edit_json
    >>> lab = tiny_lab()
    >>> [r.status.value for r in intent_values(lab, {})]
    ['pass', 'pass', 'pass']
    >>> edit_json(lab, "leaf1", lambda db: db["BUFFER_POOL"]["ingress_lossless_pool"].update(
    ...     mode="static"))
    >>> print(intent_values(lab, {})[0].findings[0])  # doctest: +ELLIPSIS
    leaf1 ingress_lossless_pool BUFFER_POOL: mode static; the intent's dynamic (qos.buffers)
    """
    rendered = rendered_configs(lab)
    qos = lab.fabric.qos
    tables: list[Finding] = []
    frr: list[Finding] = []
    switches = lab.switches()
    for switch in switches:
        tables += _switch(switch, rendered[switch][1], lab.config_db(switch), qos)
        frr += _frr(switch, rendered[f"{switch}/frr.conf"][1], lab.frr_conf(switch))
    servers = lab.nodes("server")
    hosts = [f for s in servers for f in _host(s, rendered[s][1], lab.host(s))]
    figures = {"switches": len(switches)}
    return [
        verdict(
            "intent_values",
            "config_db",
            merged(tables),
            f"{len(switches)} switches hold the intent's values in {len(SOURCES)} tables",
            figures,
        ),
        verdict(
            "intent_values",
            "frr",
            frr,
            f"{len(switches)} switches' frr.conf hold the intent's routing statements",
            figures,
        ),
        verdict(
            "intent_values",
            "hosts",
            hosts,
            f"{len(servers)} servers wired, addressed and routed as the design says",
            {"servers": len(servers)},
        ),
    ]
