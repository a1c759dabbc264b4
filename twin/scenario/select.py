"""Portable scenarios: endpoints, links and nodes chosen by selector, resolved against the lab
before the scenario is checked, so one scenario runs on any fabric (docs/scenarios.md).

Servers (`servers`, `src`, `dst` of a traffic phase):

    server7                  a server by name
    servers[0], servers[-1]  by index in the lab's order
    all / any                every server / one at random (the scenario's `seed`)
    {behind: leaf1}          the servers attached to a leaf (`leaves[0]` works too)
    {rack: 0}                the servers of a rack: the leaf group (MLAG pair) they hang on,
                             by index in the lab's order (-1: the last)
    {pair: leaf3}            the servers of the MLAG pair (leaf group) holding that leaf
    {any: 3}                 three servers at random; with `behind`/`rack`/`pair`, among those
    {..., index: 1}          the second of those
    {..., first: 8}          the first eight of those (all of them when fewer)
    {..., except: SELECTOR}  those but the servers another selector names ({except: servers[13]}:
                             every server but the fourteenth)
    {..., otherwise: SELECTOR}
                             another selector's servers when this one selects none on the lab
                             (an `index` past its servers, a rack the lab lacks)

Where one server is wanted (`dst`, a backup's `src`), a selector of several takes the first
not already an endpoint of the phase (`index` pins one), `any` a random one not already an
endpoint; where a list is wanted (`servers`, an incast's `src`) it gives all it selects.

Links (`faults[].link`, `capture`) and nodes (`faults[].node`):

    leaf1:spine1, server2:nic0       NODE:PEER or NODE:PORT, as before
    uplink of leaf1, uplink 2 of leaves[0]
                                     a leaf's uplinks (toward spines) in port order
    server link of servers[0], server link 1 of {behind leaf1}
                                     a server's links (nic0, nic1, ...)
    leaves[0], spines[-1], servers[3]
                                     a node by role and index

A link or node written the same way resolves to the same element throughout the scenario
(a link-up restores the link its link-down took, even when picked at random).
"""

from __future__ import annotations

import random
import re
from typing import Any

from twin.errors import InputError
from twin.lab.directory import Lab

INDEXED = re.compile(r"^(servers|leaves|spines|superspines)\[(-?\d+)\]$")
LINK = re.compile(r"^(uplink|server link)(?:\s+(\d+))?\s+of\s+(.+)$")
BRACED = re.compile(r"^\{\s*(behind|rack|pair)\s+(\S+)\s*\}$")
ROLES = {"servers": "server", "leaves": "leaf", "spines": "spine", "superspines": "superspine"}
SELECTOR_KEYS = {"behind", "rack", "pair", "any", "index", "first", "except", "otherwise"}


class SelectsNone(InputError):
    """A well-formed selector that selects no server of this lab (`otherwise` falls back)."""


class Selector:
    """Resolves the selectors of one scenario against one lab (random picks from `seed`)."""

    def __init__(self, lab: Lab, file: str, seed: int) -> None:
        self.lab, self.file = lab, file
        self.random = random.Random(seed)
        self.servers = lab.nodes("server")
        self.elements: dict[str, str] = {}

    def fail(self, key: str, problem: str) -> InputError:
        return InputError(self.file, key, problem)

    def none(self, key: str, problem: str) -> SelectsNone:
        return SelectsNone(self.file, key, problem)

    def node(self, text: str, key: str, role: str | None = None) -> str:
        """A node by name or `ROLE[i]` (of `role` when given)."""
        found = INDEXED.match(text.strip())
        if found:
            kind, index = found.group(1), int(found.group(2))
            if role and ROLES[kind] != role:
                raise self.fail(key, f"{text!r} is not a {role}")
            nodes = self.lab.nodes(ROLES[kind])
            if not -len(nodes) <= index < len(nodes):
                raise self.fail(key, f"{text!r}: lab {self.lab.name} has {len(nodes)} {kind}")
            return nodes[index]
        name = text.strip()
        if name not in self.lab.graph.nodes or (
            role and self.lab.graph.nodes[name]["role"] != role
        ):
            raise self.fail(key, f"no {role or 'node'} {name!r} in lab {self.lab.name}")
        return name

    def _group(self, value: Any, key: str) -> list[str]:
        """The servers of a rack: the leaf group at an index."""
        groups = sorted({self.lab.graph.nodes[s]["group"] for s in self.servers})
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.fail(key, f"rack must be an index, not {value!r}")
        if not -len(groups) <= value < len(groups):
            raise self.none(key, f"rack {value}: lab {self.lab.name} has {len(groups)} racks")
        return [s for s in self.servers if self.lab.graph.nodes[s]["group"] == groups[value]]

    def _behind(self, value: Any, key: str, whole_pair: bool) -> list[str]:
        leaf = self.node(str(value), key, "leaf")
        leaves = {leaf}
        if whole_pair and self.lab.graph.nodes[leaf].get("mlag_peer"):
            leaves.add(self.lab.graph.nodes[leaf]["mlag_peer"])
        return [s for s in self.servers if leaves & set(self.lab.graph.nodes[s]["leaves"])]

    def candidates(self, value: Any, key: str) -> tuple[list[str], int | None, int | None]:
        """The servers a selector names, the index it pins and how many at random it wants."""
        if isinstance(value, str):
            text = value.strip()
            braced = BRACED.match(text)
            if braced:
                word, arg = braced.groups()
                value = {word: int(arg) if re.fullmatch(r"-?\d+", arg) else arg}
            elif text == "all":
                return list(self.servers), None, None
            elif text == "any":
                return list(self.servers), None, 1
            elif INDEXED.match(text):
                return [self.node(text, key, "server")], None, None
            else:
                return [text], None, None  # a name: the scenario's checks judge it
        if not isinstance(value, dict) or not set(value) <= SELECTOR_KEYS or not value:
            raise self.fail(key, f"a server selector has keys {sorted(SELECTOR_KEYS)}")
        if "otherwise" in value:
            own = {k: v for k, v in value.items() if k != "otherwise"}
            try:
                return self.candidates(own, key)
            except SelectsNone:
                return self.candidates(value["otherwise"], f"{key}.otherwise")
        chosen = list(self.servers)
        if "behind" in value:
            behind = set(self._behind(value["behind"], key, False))
            chosen = [s for s in chosen if s in behind]
        if "pair" in value:
            pair = set(self._behind(value["pair"], key, True))
            chosen = [s for s in chosen if s in pair]
        if "rack" in value:
            rack = set(self._group(value["rack"], key))
            chosen = [s for s in chosen if s in rack]
        if "except" in value:
            left_out = set(self.many(value["except"], f"{key}.except", set()))
            chosen = [s for s in chosen if s not in left_out]
        if not chosen:
            raise self.none(key, f"{value} selects no server of lab {self.lab.name}")
        index, many, first = value.get("index"), value.get("any"), value.get("first")
        for name, number in (("index", index), ("any", many), ("first", first)):
            if number is not None and (not isinstance(number, int) or isinstance(number, bool)):
                raise self.fail(f"{key}.{name}", f"must be a whole number, not {number!r}")
        if first is not None:
            if first < 1:
                raise self.fail(f"{key}.first", f"{first}: at least 1")
            chosen = chosen[:first]
        if index is not None and not -len(chosen) <= index < len(chosen):
            raise self.none(f"{key}.index", f"{index}: {value} selects {len(chosen)} servers")
        if many is not None and not 1 <= many <= len(chosen):
            raise self.fail(f"{key}.any", f"{many}: {value} selects {len(chosen)} servers")
        return chosen, index, many

    def many(self, value: Any, key: str, used: set[str]) -> list[str]:
        """Every server a selector (or a list of them) gives."""
        if isinstance(value, list):
            out: list[str] = []
            for i, item in enumerate(value):
                out += [s for s in self.many(item, f"{key}.{i}", used | set(out)) if s not in out]
            return out
        chosen, index, many = self.candidates(value, key)
        if index is not None:
            return [chosen[index]]
        if many is not None:
            free = [s for s in chosen if s not in used] or chosen
            return self.random.sample(free, min(many, len(free)))
        return chosen

    def one(self, value: Any, key: str, used: set[str]) -> str:
        """One server: the selector's pinned one, else the first (or a random one) that is not
        already an endpoint of the phase."""
        chosen, index, many = self.candidates(value, key)
        if index is not None:
            return chosen[index]
        free = [s for s in chosen if s not in used] or chosen
        return self.random.choice(free) if many is not None else free[0]

    def link(self, value: Any, key: str) -> str:
        """A link as NODE:PORT or NODE:PEER (the same spelling, the same link)."""
        text = str(value).strip()
        if text not in self.elements:
            self.elements[text] = self._link(text, key)
        return self.elements[text]

    def _link(self, text: str, key: str) -> str:
        found = LINK.match(text)
        if not found:
            node, colon, port = text.partition(":")
            return f"{self.node(node, key)}:{port}" if colon and INDEXED.match(node) else text
        kind, number, of = found.group(1), int(found.group(2) or 0), found.group(3)
        if kind == "uplink":
            node = self.node(of, key, "leaf")
            ports = self._ports(node, ("spine", "superspine"))
        else:
            node = self.one(of.strip(), key, set())
            ports = self._ports(node, ("leaf",))
        if not 0 <= number < len(ports):
            raise self.fail(key, f"{text!r}: {node} has {len(ports)} such links")
        return f"{node}:{ports[number]}"

    def _ports(self, node: str, toward: tuple[str, ...]) -> list[str]:
        """The node's ports toward nodes of those roles, in port order."""
        g = self.lab.graph
        ports = []
        for _, peer, e in g.edges(node, data=True):
            if g.nodes[peer]["role"] in toward:
                ports.append(e["a_port"] if e["a"] == node else e["b_port"])
        return sorted(ports, key=_natural)


def _natural(port: str) -> tuple[str, int]:
    """Ethernet8 before Ethernet16."""
    digits = re.search(r"\d+$", port)
    return (port[: digits.start()], int(digits.group())) if digits else (port, -1)


def resolve(data: Any, lab: Lab, file: str) -> Any:
    """The scenario's raw YAML with every selector replaced by names of the lab (anything
    else, even wrong, left for the scenario's own checks)."""
    if not isinstance(data, dict):
        return data
    seed = data.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise InputError(file, "seed", f"must be a whole number, not {seed!r}")
    pick = Selector(lab, file, seed)
    out = dict(data)
    traffic = data.get("traffic")
    if isinstance(traffic, list):
        out["traffic"] = [_phase(pick, t, f"traffic.{i}") for i, t in enumerate(traffic)]
    faults = data.get("faults")
    if isinstance(faults, list):
        out["faults"] = [_fault(pick, f, f"faults.{i}") for i, f in enumerate(faults)]
    capture = data.get("capture")
    if isinstance(capture, list):
        out["capture"] = [pick.link(c, f"capture.{i}") for i, c in enumerate(capture)]
    return out


def _phase(pick: Selector, phase: Any, key: str) -> Any:
    if not isinstance(phase, dict):
        return phase
    out = dict(phase)
    used: set[str] = set()
    servers = phase.get("servers")
    if servers is not None and servers != "all":
        out["servers"] = pick.many(servers, f"{key}.servers", used)
    src = phase.get("src")
    if src is not None:
        if phase.get("kind") == "incast" or isinstance(src, list):
            out["src"] = pick.many(src, f"{key}.src", used)
            used.update(out["src"])
        else:
            out["src"] = pick.one(src, f"{key}.src", used)
            used.add(out["src"])
    dst = phase.get("dst")
    if dst is not None:
        out["dst"] = pick.one(dst, f"{key}.dst", used)
    return out


def _fault(pick: Selector, fault: Any, key: str) -> Any:
    if not isinstance(fault, dict):
        return fault
    out = dict(fault)
    if fault.get("link") is not None:
        out["link"] = pick.link(fault["link"], f"{key}.link")
    node = fault.get("node")
    if isinstance(node, str) and INDEXED.match(node.strip()):
        out["node"] = pick.node(node, f"{key}.node")
    return out
