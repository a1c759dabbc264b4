"""The containers of a deployed lab, by node: exec, network namespace, ports <-> `ethN`."""

from __future__ import annotations

import subprocess
from functools import cached_property
from typing import TYPE_CHECKING

from labs.clab import namespace, tools
from labs.kernel import ECMP_HASH
from twin.errors import LabError
from twin.lab.directory import Lab

if TYPE_CHECKING:
    import docker

CARRIER = {True: "on", False: "off"}
NO_ARP_REPLY = "8"  # arp_ignore 8: do not reply for any local address (ip-sysctl.rst)


class Containers:
    """A deployed lab's containers, reached through one Docker client."""

    def __init__(self, lab: Lab, engine: docker.DockerClient | None = None) -> None:
        self.lab = lab
        self.engine = engine or tools.client()
        self._pids: dict[str, int] = {}

    def run(self, node: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
        """Run a command in a node's container."""
        return tools.exec_in(self.engine, self.lab, node, argv)

    def start(self, node: str, argv: list[str]) -> None:
        """Start a command in a node's container and return at once (a daemon)."""
        tools.start_detached(self.engine, self.lab, node, argv)

    def set_kernel(self, node: str) -> None:
        """Set a switch's kernel as the twin needs it: ECMP hashed on the 5-tuple
        (`labs.kernel.ECMP_HASH`: the image leaves a new namespace's policy 0), and ARP replies
        off on its `ethN`, for the image's TAP port answers for it (containerlab pull request
        3390). Containerlab moving an interface into the container's namespace (deploy,
        `start --node`) resets the latter, and a restarted container has a new namespace, so
        both are set after each."""
        names = {f"net.ipv4.conf.{eth}.arp_ignore": NO_ARP_REPLY for eth in self.port[node]}
        namespace.set_sysctls(self.pid(node), {**ECMP_HASH, **names})

    def pid(self, node: str) -> int:
        """The host pid of a node's container (cached until `forget`)."""
        if node not in self._pids:
            self._pids[node] = tools.pid(self.engine, self.lab, node)
        return self._pids[node]

    def forget(self, node: str) -> None:
        """Drop a node's cached pid (its container was stopped or restarted)."""
        self._pids.pop(node, None)

    @cached_property
    def eth(self) -> dict[str, dict[str, str]]:
        """Per node: port (SONiC name, or NIC) -> container interface (`ethN`)."""
        return {
            node: {port: names["clab"] for port, names in ports.items()}
            for node, ports in self.lab.ifmap.items()
        }

    @cached_property
    def port(self) -> dict[str, dict[str, str]]:
        """Per node: container interface (`ethN`) -> port."""
        return {node: {eth: port for port, eth in m.items()} for node, m in self.eth.items()}

    def link_ends(self, spec: str) -> list[tuple[str, str]]:
        """The two (node, ethN) ends of a link named `node:port` or `node:peer`."""
        node, _, other = spec.partition(":")
        if node not in self.lab.graph.nodes or not other:
            raise LabError(f"lab {self.lab.name}: no link {spec!r} (node:port or node:peer)")
        for _, peer, e in self.lab.graph.edges(node, data=True):
            mine, theirs = ("a", "b") if e["a"] == node else ("b", "a")
            if other in (e[f"{mine}_port"], peer):
                return [
                    (node, self.eth[node][e[f"{mine}_port"]]),
                    (str(peer), self.eth[str(peer)][e[f"{theirs}_port"]]),
                ]
        raise LabError(f"lab {self.lab.name}: {node} has no port or neighbour {other!r}")

    def set_link(self, spec: str, up: bool) -> list[tuple[str, str]]:
        """Set both container interfaces of a link up or down, and a switch end's port carrier
        with them; the ends.

        docker-sonic-vs keeps its port (a TAP) LOWER_UP whatever `ethN` does (sonic-sairedis
        vslib turns `ethN`'s carrier into a SAI notification only), so zebra would keep the
        routes through it; `ip link set dev PORT carrier off|on` in the switch does what a
        hardware switch's kernel sees when the link goes."""
        ends = self.link_ends(spec)
        for node, eth in ends:
            namespace.set_state(self.pid(node), eth, up)
            self.set_carrier(node, self.port[node][eth], up)
        return ends

    def set_carrier(self, node: str, port: str, up: bool) -> None:
        """Set a switch port's kernel carrier (nothing on a server: its NIC follows the wire)."""
        if node not in self.lab.switches():
            return
        done = self.run(node, ["ip", "link", "set", "dev", port, "carrier", CARRIER[up]])
        if done.returncode != 0:
            raise LabError(f"{node}: carrier of {port}: {done.stderr.strip()[:200]}")

    def set_peer_carriers(self, node: str, up: bool) -> None:
        """Set the carrier of every switch port cabled to `node` (the node went down or came
        back: a hardware port loses its link when the neighbour does)."""
        for _, peer, e in self.lab.graph.edges(node, data=True):
            theirs = "b_port" if e["a"] == node else "a_port"
            self.set_carrier(str(peer), e[theirs], up)
