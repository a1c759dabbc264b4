"""Changes as files: `twin apply LAB CHANGE -o NEW` and `twin incident NAME OUT`, their
refusals in one line with nothing written, and exit codes 0/2/3 of the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.simlab import small_lab
from twin.cli import main as cli


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = small_lab(tmp_path_factory.mktemp("apply") / "small")
    (path / "runs" / "old").mkdir(parents=True)
    return path


def change(tmp: Path, text: str) -> Path:
    path = tmp / "change.yaml"
    path.write_text(text)
    return path


def test_apply_writes_a_changed_copy(
    lab: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edits = change(
        tmp_path,
        "configs/leaf*/config_db.json:\n  - {delete: PFC_WD.Ethernet0}\n"
        "configs/server1/host.json:\n  - {set: dscp_marking.0.dscp, value: 26}\n"
        'configs/spine1/frr.conf:\n  - {append: "ip route 10.2.0.16/29 10.1.0.1 250"}\n',
    )
    out = tmp_path / "new"
    assert cli.main(["apply", str(lab), str(edits), "-o", str(out)]) == 0
    db = json.loads((out / "configs" / "leaf1" / "config_db.json").read_text())
    assert "Ethernet0" not in db["PFC_WD"] and "Ethernet8" in db["PFC_WD"]
    assert (
        json.loads((out / "configs/server1/host.json").read_text())["dscp_marking"][0]["dscp"] == 26
    )
    assert (out / "configs/spine1/frr.conf").read_text().endswith("10.1.0.1 250\n")
    base = json.loads((lab / "configs" / "leaf1" / "config_db.json").read_text())
    assert "Ethernet0" in base["PFC_WD"]  # the base lab is left as it was
    assert not (out / "runs").exists()
    capsys.readouterr()
    assert cli.main(["diff", str(lab), str(out)]) in (0, 1)
    shown = capsys.readouterr().out
    assert "leaf1 Ethernet0 PFC_WD" in shown and "ip route 10.2.0.16/29" in shown


def test_intent_edits_render_the_configs_again(lab: Path, tmp_path: Path) -> None:
    edits = change(tmp_path, "intent:\n  - {set: qos.lossless_priorities, value: [3, 4]}\n")
    out = tmp_path / "new"
    assert cli.main(["apply", str(lab), str(edits), "-o", str(out)]) == 0
    db = json.loads((out / "configs" / "leaf1" / "config_db.json").read_text())
    enabled = {q["pfc_enable"] for q in db["PORT_QOS_MAP"].values() if "pfc_enable" in q}
    assert enabled == {"3,4"}


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("configs/leaf*/config_db.json:\n  - {delete: NO_TABLE.x}\n", "NO_TABLE.x: no such key"),
        ("configs/nosuch*/host.json:\n  - {set: a, value: 1}\n", "matches no file of the lab"),
        ("configs/leaf1/frr.conf:\n  - {remove: not a line}\n", "no line 'not a line'"),
        ("configs/leaf1/frr.conf:\n  - {frobnicate: 1}\n", "an edit is one of set"),
        ("- just a list\n", "must map lab files"),
        (f"configs/leaf1/frr.conf:\n  - {{append: {'7' * 5000}}}\n", "more than 4300 digits"),
    ],
)
def test_a_change_that_does_not_apply_writes_nothing(
    lab: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, shown: str
) -> None:
    edits, out = change(tmp_path, text), tmp_path / "new"
    capsys.readouterr()
    assert cli.main(["apply", str(lab), str(edits), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and shown in err and str(edits) in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["change.yaml"]


def test_apply_refuses_an_existing_output(
    lab: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edits = change(tmp_path, "configs/leaf1/config_db.json:\n  - {delete: PFC_WD.Ethernet0}\n")
    capsys.readouterr()
    assert cli.main(["apply", str(lab), str(edits), "-o", str(lab)]) == 2
    assert "-o: exists and is not empty" in capsys.readouterr().err


def test_incident_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["incident", "pause-storm", str(tmp_path / "ps")]) == 0
    printed = capsys.readouterr().out
    marks = [
        json.loads((tmp_path / "ps" / side / "configs/server1/host.json").read_text())
        for side in ("before", "after")
    ]
    assert [m["dscp_marking"][0]["dscp"] for m in marks] == [26, 10]
    assert "twin run" in printed and "1-pause-storm/scenario.yaml" in printed
    assert cli.main(["incident", "nosuch", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "known: pause-storm, micro-bursts, deadlock, pfc-storm" in err
    assert not (tmp_path / "x").exists()


def test_incident_and_apply_print_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--json: the labs written and the scenario, for scripts; the same facts as the text."""
    ps = tmp_path / "ps"
    capsys.readouterr()
    assert cli.main(["incident", "pause-storm", str(ps), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["before"] == str(ps / "before") and data["after"] == str(ps / "after")
    assert Path(data["scenario"]).is_file() and data["scenario"].endswith("scenario.yaml")
    fix = Path(data["scenario"]).parent / "fix.yaml"
    argv = ["apply", data["before"], str(fix), "-o", str(tmp_path / "fixed"), "--json"]
    assert cli.main(argv) == 0
    assert json.loads(capsys.readouterr().out) == {
        "lab": str(tmp_path / "fixed"),
        "base": data["before"],
        "change": str(fix),
    }


def test_an_internal_error_is_one_line_exit_3(
    lab: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(_: str) -> Path:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr("twin.change.incident.find", broken)
    assert cli.main(["incident", "pause-storm", "/nonexistent/never"]) == 3
    err = capsys.readouterr().err
    assert err == "twin: internal error in twin incident: ZeroDivisionError: division by zero\n"
