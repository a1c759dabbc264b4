"""`twin diff` over labs whose devices differ: decommissioned servers and leaves are
findings (removed, with their address, ASN and links), new ones are added, and a renamed
server (same address, other name) is a rename compared field by field; never a crash."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from twin.cli import main as cli
from twin.intent import fabric as intent
from twin.lab import directory as labdir

SMALL = (REPO / "examples" / "small.yaml").read_text()


def lab(tmp: Path, name: str, servers: str = "count: 4", leaves: int = 4) -> Path:
    """The small fabric with other servers or leaves, generated into tmp/name."""
    text = SMALL.replace("servers:\n  count: 4", f"servers:\n  {servers}")
    source = tmp / f"{name}.yaml"
    source.write_text(text.replace("leaves:\n  count: 4", f"leaves:\n  count: {leaves}"))
    labdir.generate(intent.load(source), tmp / name, str(source))
    return tmp / name


def diff(base: Path, candidate: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert cli.main(["diff", str(base), str(candidate), "--json"]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def messages(data: dict[str, Any]) -> dict[str, str]:
    """Device -> message of the device-level findings (no port, no table)."""
    return {f["device"]: f["message"] for f in data["configs"] if not f["port"] + f["where"]}


def test_decommissioned_servers_and_leaves_are_findings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = lab(tmp_path, "base")
    smaller = lab(tmp_path, "smaller", "count: 2", leaves=2)
    data = diff(base, smaller, capsys)
    found = messages(data)
    assert found["server3"] == (
        "removed (only in base): address 10.2.0.11/29; "
        "nic0 to leaf3 Ethernet0, nic1 to leaf4 Ethernet0"
    )
    assert found["leaf4"].startswith("removed (only in base): address 10.0.0.6/32; ASN 65104; ")
    assert "Ethernet0 to server3:nic1" in found["leaf4"]
    assert {"leaf3", "server4"} <= set(found)
    assert [f["device"] for f in data["configs"][:4]] == ["leaf3", "leaf4", "server3", "server4"]
    back = messages(diff(smaller, base, capsys))
    assert back["server3"].startswith("added (only in candidate): address 10.2.0.11/29")


def test_a_renamed_server_is_compared_with_its_old_self(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """gpu1 has server1's address: a rename, its hostname the difference; with two servers
    the design puts gpu2 where server3 was, and server2 and server4 are removed."""
    base = lab(tmp_path, "base")
    gpus = lab(tmp_path, "gpus", "count: 2\n  name_prefix: gpu")
    data = diff(base, gpus, capsys)
    found = messages(data)
    assert found["gpu1"] == "renamed from server1" and found["gpu2"] == "renamed from server3"
    assert found["server2"].startswith("removed") and found["server4"].startswith("removed")
    hostname = [f for f in data["configs"] if f["device"] == "gpu1" and f["where"]]
    assert hostname[0]["message"] == 'hostname: "server1" in base, "gpu1" in candidate'


def test_rendered_configs_are_made_once_per_lab_inside_sharing_only() -> None:
    """Inside `sharing` the static validators of one lab share its rendered configs (a second
    lab gets its own); outside, each call renders afresh (nothing kept between runs)."""
    from twin.lab.diff import rendered_configs, sharing
    from validators.examples import tiny_lab

    one, other = tiny_lab(), tiny_lab()
    with sharing():
        first = rendered_configs(one)
        with sharing():  # nested: the enclosing scope's
            assert rendered_configs(one) is first
        assert rendered_configs(other) is not first
        assert rendered_configs(other) == first
    again = rendered_configs(one)
    assert again is not first and again == first
