"""What SONiC's daemons use for a CONFIG_DB field that an entry leaves out, where it is
the value the project renders: leaving such a field out changes nothing.

Each default with the upstream source that applies it (sonic-swss e6b0c5b, sonic-buildimage
and SAI headers as named).

>>> absent("PORT", "mtu"), absent("PORT", "fec")
('9100', None)
"""

from __future__ import annotations

DEFAULTS: dict[tuple[str, str], tuple[str, str]] = {
    ("PORT", "mtu"): ("9100", "cfgmgr/portmgr.h DEFAULT_MTU_STR, PortMgr::doTask"),
    ("PORTCHANNEL", "mtu"): ("9100", "cfgmgr/teammgr.cpp TeamMgr::doLagTask, portmgr.h"),
    ("PORTCHANNEL", "min_links"): (
        "1",
        "cfgmgr/teammgr.cpp TeamMgr::addLag writes min_ports only when set; libteam's LACP "
        "runner's min_ports default is 1",
    ),
    ("VLAN", "mtu"): ("9100", "cfgmgr/vlanmgr.cpp DEFAULT_MTU_STR, VlanMgr::doVlanTask"),
    ("VLAN", "admin_status"): ("up", "cfgmgr/vlanmgr.cpp VlanMgr::addHostVlan links it up"),
    ("WRED_PROFILE", "wred_yellow_enable"): ("false", "SAI saiwred.h SAI_WRED_ATTR_YELLOW_ENABLE"),
    ("WRED_PROFILE", "wred_red_enable"): ("false", "SAI saiwred.h SAI_WRED_ATTR_RED_ENABLE"),
    ("BGP_NEIGHBOR", "admin_status"): (
        "up",
        "sonic-buildimage bgpcfgd templates general/instance.conf.j2: no shutdown unless "
        "DEVICE_METADATA default_bgp_status is down",
    ),
}
"""(table, field) -> (the value in force when the field is absent, where SONiC sets it)."""


def absent(table: str, field: str) -> str | None:
    """The value in force when `field` is left out of a `table` entry (None: no default the
    project relies on)."""
    found = DEFAULTS.get((table, field))
    return None if found is None else found[0]
