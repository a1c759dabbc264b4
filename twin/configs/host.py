"""Reading a server's host file leniently: a setting that is absent, or that its key cannot
hold (a DSCP above 63, a word where a number goes), is one the server's stack never applies,
so the kernel's or the NIC's own default is in force. `twin.lab.check` refuses only a host
file that does not say which server it is (its address and NICs) or, for a deploy, a value
the deploy cannot apply; the rest is judged (`host_rdma`, `intent_values`,
`pfc_consistency`), and the simulator and the routing model read it through here.

>>> host = {"mtu": "9000", "rdma": {"dscp": 26, "cnp_dscp": 96},
...         "dscp_marking": [{"class": "storage", "dscp": 10}, {"dscp": 12}, "x"]}
>>> mtu(host), dscp(section(host, "rdma"), "dscp"), dscp(section(host, "rdma"), "cnp_dscp")
(1500, 26, None)
>>> markings(host)
[('storage', 10)]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

LINUX_MTU = 1500
"""A NIC's MTU when none is set: Linux's Ethernet default (include/uapi/linux/if_ether.h
ETH_DATA_LEN, set by net/ethernet/eth.c ether_setup)."""


def section(host: Mapping[str, Any], key: str) -> dict[str, Any]:
    """A host file's object at `key` (`rdma`, `rdma.dcqcn`'s parent): empty when absent or
    not an object."""
    value = host.get(key)
    return value if isinstance(value, dict) else {}


def whole(value: Any, low: int, high: int) -> int | None:
    """A whole number within low..high, else None (a bool is not a number).

    >>> whole(9000, 68, 65535), whole(True, 0, 7), whole(4.0, 0, 7), whole(80, 0, 63)
    (9000, None, 4, None)
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not float(value).is_integer() or not low <= value <= high:
        return None
    return int(value)


def either(value: int | None, default: int) -> int:
    """A setting read (`whole`, `dscp`), else the default in force.

    >>> either(0, 48), either(None, 48)
    (0, 48)
    """
    return default if value is None else value


def real(value: Any, default: float) -> float:
    """A number, else the default."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return float(value)


def mtu(host: Mapping[str, Any]) -> int:
    """The MTU the server's NICs take: the host file's, else Linux's default."""
    return whole(host.get("mtu"), 68, 65535) or LINUX_MTU


def dscp(settings: Mapping[str, Any], key: str) -> int | None:
    """A DSCP setting (`rdma.dscp`, `rdma.cnp_dscp`, a rule's `dscp`), None when it sets none."""
    return whole(settings.get(key), 0, 63)


def markings(host: Mapping[str, Any]) -> list[tuple[str, int]]:
    """(class, DSCP) of each `dscp_marking` rule that marks: a rule without its class or a
    DSCP marks nothing."""
    rules = host.get("dscp_marking")
    out = []
    for rule in rules if isinstance(rules, list) else []:
        if isinstance(rule, dict) and isinstance(rule.get("class"), str):
            value = dscp(rule, "dscp")
            if value is not None:
                out.append((rule["class"], value))
    return out
