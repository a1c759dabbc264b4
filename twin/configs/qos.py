"""Reading the QoS of a lab's configs: a switch port's maps, PFC, queues and buffers, and
what the servers mark.

Keys follow SONiC: per-port tables are keyed `PORT|INDEX` where INDEX may be a range (`3-4`);
PORT_QOS_MAP names the maps a port uses (`dscp_to_tc_map` falls back to the `global` entry);
a DSCP a map does not list goes to TC 0.

>>> db = {"PORT_QOS_MAP": {"global": {"dscp_to_tc_map": "M"}, "Ethernet0": {"pfc_enable": "3,4"}},
...       "DSCP_TO_TC_MAP": {"M": {"26": "3"}}, "QUEUE": {"Ethernet0|3-4": {"scheduler": "s"}}}
>>> pfc_enabled(db, "Ethernet0"), [traffic_class(db, "Ethernet0", d) for d in (26, 10)]
(frozenset({3, 4}), [3, 0])
>>> by_port(db, "QUEUE")["Ethernet0"]
{3: {'scheduler': 's'}, 4: {'scheduler': 's'}}
"""

from __future__ import annotations

from collections.abc import Iterator

from twin.configs.host import dscp, markings, section
from twin.lab.directory import Lab
from twin.render.config_db import QOS_MAPS, ConfigDb
from twin.render.config_db import by_port as by_port  # re-exported for the validators
from twin.render.config_db import number as number


def switch_ports(lab: Lab) -> Iterator[tuple[str, ConfigDb, list[str]]]:
    """Each switch, its config_db and its cabled ports: the server, fabric and MLAG peer-link
    ports, every port servers' traffic can cross (failovers included)."""
    for switch in lab.switches():
        yield switch, lab.config_db(switch), [p.name for p in lab.ports(switch)]


def cabled_queues(
    lab: Lab,
) -> Iterator[tuple[str, ConfigDb, Maps, str, dict[int, dict[str, str]]]]:
    """Each cabled port of each switch (`switch_ports`): the switch, its config_db and maps,
    the port, and the port's QUEUE entries by queue index."""
    for switch, db, cabled in switch_ports(lab):
        queues, maps = by_port(db, "QUEUE"), Maps(db)
        for name in cabled:
            yield switch, db, maps, name, queues.get(name, {})


def port_qos(db: ConfigDb, port: str) -> dict[str, str]:
    """The port's PORT_QOS_MAP entry (empty when it has none)."""
    entry: dict[str, str] = db.get("PORT_QOS_MAP", {}).get(port, {})
    return entry


def priorities(text: str) -> frozenset[int]:
    """Priorities of a `pfc_enable`-style list ('3,4')."""
    return frozenset(int(p) for p in text.split(",") if p.strip())


def pfc_enabled(db: ConfigDb, port: str) -> frozenset[int]:
    """Priorities the port enables PFC on."""
    return priorities(port_qos(db, port).get("pfc_enable", ""))


def map_name(db: ConfigDb, port: str, field: str) -> str | None:
    """Name of the map a port uses for `field` (a PORT_QOS_MAP field)."""
    name = port_qos(db, port).get(field)
    if name is None and field == "dscp_to_tc_map":
        name = port_qos(db, "global").get(field)
    return name


def qos_map(db: ConfigDb, port: str, field: str) -> dict[int, int] | None:
    """The map a port uses for `field`, as ints; None when it names none or a missing one."""
    name = map_name(db, port, field)
    table = db.get(QOS_MAPS[field], {})
    if name is None or name not in table:
        return None
    return {int(k): int(v) for k, v in table[name].items()}


class Maps:
    """A switch's QoS maps as `qos_map` gives them, each map read once however many ports
    use it. The maps are shared: read them, do not change them.

    >>> maps = Maps({"PORT_QOS_MAP": {"global": {"dscp_to_tc_map": "M"}},
    ...              "DSCP_TO_TC_MAP": {"M": {"26": "3"}}})
    >>> maps("Ethernet0", "dscp_to_tc_map") is maps("Ethernet8", "dscp_to_tc_map")
    True
    """

    def __init__(self, db: ConfigDb) -> None:
        self.db = db
        self._read: dict[tuple[str, str | None], dict[int, int] | None] = {}

    def __call__(self, port: str, field: str) -> dict[int, int] | None:
        """The map the port uses for `field` (a PORT_QOS_MAP field), as `qos_map`."""
        key = (field, map_name(self.db, port, field))
        if key not in self._read:
            self._read[key] = qos_map(self.db, port, field)
        return self._read[key]


def traffic_class(db: ConfigDb, port: str, dscp: int) -> int:
    """The TC a packet with this DSCP gets on ingress at the port."""
    return (qos_map(db, port, "dscp_to_tc_map") or {}).get(dscp, 0)


def host_dscps(lab: Lab) -> dict[str, set[int]]:
    """What the servers mark: 'roce' and 'cnp' (RDMA settings), and each marking rule's class."""
    marks: dict[str, set[int]] = {"roce": set(), "cnp": set()}
    for server in lab.nodes("server"):
        host = lab.host(server)
        rdma = section(host, "rdma")
        for name, key in (("roce", "dscp"), ("cnp", "cnp_dscp")):
            if (value := dscp(rdma, key)) is not None:
                marks[name].add(value)
        for name, value in markings(host):
            marks.setdefault(name, set()).add(value)
    return marks
