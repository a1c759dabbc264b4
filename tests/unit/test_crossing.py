"""`validators.dynamic.crossing`'s backward search against a walk of every ECMP path, on a
three-tier fabric (two pods, dual-homed servers, MLAG peer-links), for every link and every
node as the faulted element, in the intact FIB and in FIBs after failures."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import cast

import pytest
import yaml

from labs.backend import Fault
from labs.failures import Failures, Network
from tests.conftest import SMALL
from twin.lab.directory import Lab
from twin.model.fib import Fib, Lookup
from twin.model.wiring import Wiring, links, shared
from twin.scenario.records import FaultRecord
from validators.dynamic.crossing import Port, _element, _Hits
from validators.examples import generate


@pytest.fixture(scope="module")
def lab() -> Lab:
    """examples/small.yaml with 8 servers under two pods and 2 super-spines."""
    data = yaml.safe_load(SMALL.read_text())
    data["servers"]["count"] = 8
    data["leaves"].pop("count")
    data["spines"]["ports"] = 4
    data["superspines"] = {"count": 2, "ports": 8}
    return generate(Path(tempfile.mkdtemp()) / "lab", data)


def walked(wiring: Wiring, fib: Fib, src: str, dst: str) -> tuple[set[Port], set[str]]:
    """Every port and node of every ECMP path from `src` to `dst` (the oracle)."""
    find, address = Lookup(fib), int(wiring.hosts[dst].address.ip)
    ports: set[Port] = set()
    nodes, todo = {src}, [src]
    while todo:
        here = todo.pop()
        for hop in find(here, address) or ():
            far = wiring.far(here, hop.port)
            ports.add((here, hop.port))
            if far is None:
                continue
            ports.add(far)
            if far[0] not in nodes:
                nodes.add(far[0])
                if far[0] != dst:
                    todo.append(far[0])
    return ports, nodes


def test_the_backward_search_finds_what_walking_every_path_finds(lab: Lab) -> None:
    wiring = shared(lab)
    intact = Network(lab, Failures())
    fibs = [
        intact.fib,
        intact.after(Fault("link-down", link="leaf1:spine1")).fib,
        intact.after(Fault("node-down", node="spine1")).fib,
    ]
    servers = lab.nodes("server")
    elements: list[tuple[set[Port], str | None]] = [
        _element(lab, wiring, cast(FaultRecord, {"link": f"{a}:{a_port}"}))
        for a, a_port, _, _ in links(lab)
    ]
    elements += [(set(), node) for node in lab.graph.nodes]
    found = set()
    for fib in fibs:
        paths = {(s, d): walked(wiring, fib, s, d) for s in servers for d in servers}
        find = Lookup(fib)  # shared by the elements, as the faults judged on one FIB share it
        for ends, node in elements:
            hits = _Hits(wiring, find, ends, node)
            for (src, dst), (ports, nodes) in paths.items():
                expected = bool(ports & ends) or (node is not None and node in nodes)
                assert hits(src, dst) == expected, (src, dst, sorted(ends), node)
                found.add(expected)
    assert found == {True, False}
