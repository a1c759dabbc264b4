"""What the container renderers read of a lab directory: `twin.lab.directory.Lab` is one. The
renderers sit below the lab directory, which calls them, so they name this rather than it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import networkx as nx

    from twin.intent.fabric import Fabric
    from twin.render.config_db import ConfigDb


class LabSource(Protocol):
    """A lab's intent, design graph, port names and written configs."""

    @property
    def path(self) -> Path:
        """The lab directory."""

    @property
    def name(self) -> str:
        """The lab's name."""

    @property
    def fabric(self) -> Fabric:
        """The resolved intent."""

    @property
    def graph(self) -> nx.MultiGraph:
        """The design graph."""

    @property
    def ifmap(self) -> dict[str, dict[str, dict[str, str]]]:
        """Port -> Linux names per node."""

    def nodes(self, role: str) -> list[str]:
        """Nodes with this role, in design order."""

    def switches(self) -> list[str]:
        """Every switch."""

    def config_db(self, node: str) -> ConfigDb:
        """A switch's `config_db.json`."""

    def frr_conf(self, node: str) -> str:
        """A switch's `frr.conf`."""

    def host(self, node: str) -> dict[str, Any]:
        """A server's host file."""
