"""A host file that still names its server (its address and NICs) is judged, not refused
(issue 32): a setting missing or of the wrong type is a failing row naming the server and the
key, exit 1; a file that is not JSON or does not say which server it is stays one line, exit
2. What is expected comes from the intent (examples/small.yaml's: MTU 9000, RoCE DSCP 26, CNP
48, ECN on, DCQCN as `qos.dcqcn`, an RDMA device per NIC, the design's routes and cabling)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import lab_name, write_lab
from twin.cli import main as cli
from twin.errors import InputError
from twin.lab import check as labcheck
from twin.lab.directory import Lab

Host = dict[str, Any]
JUDGED: dict[str, tuple[Callable[[Host], object], str, str]] = {
    "mtu removed": (lambda h: h.pop("mtu"), "host_rdma", "host.json mtu"),
    "mtu a string": (lambda h: h.update(mtu="9000"), "host_rdma", "host.json mtu"),
    "ECN a word": (lambda h: h["rdma"].update(ecn="yes"), "host_rdma", "host.json rdma.ecn"),
    "CNP DSCP above 63": (
        lambda h: h["rdma"].update(cnp_dscp=96),
        "pfc_consistency",
        "host.json rdma",
    ),
    "RoCE priority a word": (
        lambda h: h["rdma"].update(pfc_priority="three"),
        "host_rdma",
        "host.json rdma.pfc_priority",
    ),
    "DCQCN alpha above 1": (
        lambda h: h["rdma"]["dcqcn"].update(initial_alpha=2.0),
        "host_rdma",
        "host.json rdma.dcqcn.initial_alpha",
    ),
    "DCQCN parameters a list": (
        lambda h: h["rdma"].update(dcqcn=[1]),
        "host_rdma",
        "host.json rdma.dcqcn",
    ),
    "an RDMA device over another NIC": (
        lambda h: h["rdma"]["devices"][0].update(netdev="nic7"),
        "host_rdma",
        "host.json rdma.devices",
    ),
    "an RDMA device without its NIC": (
        lambda h: h["rdma"]["devices"][1].pop("netdev"),
        "host_rdma",
        "host.json rdma.devices",
    ),
    "a marking rule without its DSCP": (
        lambda h: h["dscp_marking"][0].pop("dscp"),
        "intent_values",
        "host.json dscp_marking.0.dscp",
    ),
    "routes removed": (lambda h: h.pop("routes"), "intent_values", "host.json routes"),
    "a route over no NIC": (
        lambda h: h["routes"][0]["nexthops"][0].update(dev="eth7"),
        "intent_values",
        "host.json routes.0.nexthops.0.dev",
    ),
    "a route without its destination": (
        lambda h: h["routes"][0].pop("dst"),
        "intent_values",
        "host.json routes.0.dst",
    ),
    "a NIC without its gateway": (
        lambda h: h["interfaces"][0].pop("gateway"),
        "intent_values",
        "host.json interfaces.0.gateway",
    ),
    "a NIC cabled to another port": (
        lambda h: h["interfaces"][1].update(peer_port="Ethernet72"),
        "intent_values",
        "host.json interfaces.1.peer_port",
    ),
}
"""What each edit of server1's host file is, the validator that judges it and the key."""
LABELS: dict[str, Callable[[Host], object]] = {
    "a marking rule without its class": lambda h: h["dscp_marking"][0].pop("class"),
    "a marking rule with another class name": lambda h: h["dscp_marking"][0].update(
        {"class": "nfs"}
    ),
    "no hostname": lambda h: h.pop("hostname"),
}
"""Edits of labels nothing applies (the deploy marks by port and DSCP; the design's node name
names the server): they pass, and a deploy takes them."""
REFUSED: dict[str, tuple[Callable[[Path], object], str]] = {
    "not JSON": (lambda p: p.write_text('{"address": '), "host.json: line 1: not valid JSON"),
    "no address": (lambda p: _edit(p, lambda h: h.pop("address")), "host.json: address: "),
    "no NICs": (lambda p: _edit(p, lambda h: h.pop("interfaces")), "host.json: interfaces: "),
    "a NIC without its name": (
        lambda p: _edit(p, lambda h: h["interfaces"][0].pop("name")),
        "host.json: interfaces.0.name: ",
    ),
}
"""Host files that do not say which server they are: one line, exit 2."""


def _edit(path: Path, change: Callable[[Host], object]) -> None:
    host = json.loads(path.read_text())
    change(host)
    path.write_text(json.dumps(host))


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_lab(tmp_path_factory.mktemp("hosts") / "lab", lab_name())


@pytest.fixture
def lab(pristine: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "lab"
    shutil.copytree(pristine, copy)
    return copy


@pytest.mark.parametrize("case", JUDGED, ids=list(JUDGED))
def test_a_host_file_that_names_its_server_is_judged(
    lab: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    change, validator, key = JUDGED[case]
    _edit(lab / "configs" / "server1" / "host.json", change)
    out = lab / "out"
    assert cli.main(["validate", str(lab), "--out", str(out)]) == 1, capsys.readouterr().err
    results = json.loads((out / "report.json").read_text())["results"]
    rows = [
        f"{f['device']} {f['where']}"
        for r in results
        if r["validator"] == validator and r["status"] == "fail"
        for f in r["findings"]
    ]
    assert any(row.startswith(f"server1 {key}") for row in rows), rows


@pytest.mark.parametrize("case", JUDGED, ids=list(JUDGED))
def test_a_deploy_still_refuses_what_it_cannot_apply_or_judges_it(lab: Path, case: str) -> None:
    """Before a deploy that sets kernels up, a host file must hold what the deploy applies;
    the RDMA settings it does not apply (soft-RoCE takes none) are judged there too."""
    change = JUDGED[case][0]
    _edit(lab / "configs" / "server1" / "host.json", change)
    applied = not case.startswith(("ECN", "CNP", "RoCE", "DCQCN"))
    if applied:
        with pytest.raises(InputError) as caught:
            labcheck.check(Lab.open(lab), live=True)
        assert "server1/host.json: " in str(caught.value)
    else:
        labcheck.check(Lab.open(lab), live=True)
    labcheck.check(Lab.open(lab), live=True, applied=False)


@pytest.mark.parametrize("case", REFUSED, ids=list(REFUSED))
def test_a_host_file_that_does_not_name_its_server_is_refused(
    lab: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    change, expected = REFUSED[case]
    change(lab / "configs" / "server1" / "host.json")
    assert cli.main(["validate", str(lab), "--out", str(lab / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err, err
    assert not (lab / "out").exists()


@pytest.mark.parametrize("case", LABELS, ids=list(LABELS))
def test_a_label_edited_passes(lab: Path, case: str, capsys: pytest.CaptureFixture[str]) -> None:
    _edit(lab / "configs" / "server1" / "host.json", LABELS[case])
    labcheck.check(Lab.open(lab), live=True)
    out = lab / "out"
    assert cli.main(["validate", str(lab), "--out", str(out)]) == 0, capsys.readouterr().out
