"""twin.intent.fabric: defaults, strict types, refused keys and the resolved intent round trip."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from twin.errors import InputError
from twin.intent import fabric as intent

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


def _error(data: Any) -> str:
    with pytest.raises(InputError) as info:
        intent.parse(data, "f.yaml")
    return str(info.value)


def _load_error(tmp_path: Path, text: str) -> InputError:
    path = tmp_path / "fabric.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        intent.load(path)
    return info.value


def test_an_empty_mapping_is_the_default_fabric(tmp_path: Path) -> None:
    path = tmp_path / "fabric.yaml"
    path.write_text("{}  # every default (an empty file is refused)\n")
    fabric = intent.load(path)
    assert fabric == intent.Fabric()
    assert fabric.name == "fabric"
    assert fabric.servers.count == 8 and fabric.servers.dual_homed
    assert fabric.qos.lossless_priorities == [3]
    assert set(fabric.qos.classes) == {"roce", "cnp", "storage", "default"}


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.stem for e in EXAMPLES])
def test_resolved_intent_round_trips(example: Path, tmp_path: Path) -> None:
    fabric = intent.load(example)
    resolved = tmp_path / "fabric.yaml"
    resolved.write_text(intent.dump(fabric))
    again = intent.load(resolved)
    assert again == fabric
    assert intent.dump(again) == intent.dump(fabric)
    # Every default is written out: the resolved file names every field of every section.
    text = resolved.read_text()
    for section in intent.Fabric.model_fields:
        assert f"\n{section}:" in f"\n{text}", section


def test_speeds_accept_units() -> None:
    fabric = intent.parse(
        {"leaves": {"speed": "100G", "uplink_speed": "400Gb/s"}, "servers": {"nic_speed": 200000}},
        "f.yaml",
    )
    assert fabric.leaves.speed == 100000
    assert fabric.uplink_speed == 400000
    assert fabric.servers.nic_speed == 200000
    assert intent.parse({}, "f.yaml").uplink_speed == 400000


def test_lossless_priorities_are_sorted() -> None:
    fabric = intent.parse({"qos": {"lossless_priorities": [4, 3]}}, "f")
    assert fabric.qos.lossless_priorities == [3, 4]


BAD = [
    (
        {"servers": {"cuont": 3}},
        "servers.cuont: unknown key; did you mean count?",
    ),
    (
        {"qos": {"pfc_watchdog": {"interval": 1}}},
        "qos.pfc_watchdog.interval: unknown key "
        "(known: enabled, detection_ms, restoration_ms, poll_ms, action)",
    ),
    (
        {"spines": {"count": True}},
        "spines.count: Input should be a valid integer, not true",
    ),
    (
        {"servers": {"count": "8"}},
        'servers.count: Input should be a valid integer, not "8"',
    ),
    (
        {"servers": {"count": 8.0}},
        "servers.count: Input should be a valid integer, not 8.0",
    ),
    (
        {"servers": {"dual_homed": "yes"}},
        'servers.dual_homed: Input should be a valid boolean, not "yes"',
    ),
    (
        {"leaves": {"uplink_speed": True}},
        "leaves.uplink_speed: Input should be a valid integer, not true",
    ),
    (
        {"servers": None},
        "servers: Input should be a valid dictionary or instance of Servers, not null",
    ),
    (
        {"qos": {"classes": {"roce": {"dscp": 26}}}},
        "qos.classes.roce.tc: Field required",
    ),
    (
        {"servers": {"name_prefix": "spine"}},
        "servers.name_prefix: 'spine' would give servers the names of switches",
    ),
    (
        {"servers": {"name_prefix": "leaf1"}},
        "servers.name_prefix: 'leaf1' would give servers the names of switches",
    ),
    (
        {"servers": {"name_prefix": "superspine"}},
        "servers.name_prefix: 'superspine' would give servers the names of switches",
    ),
    (
        {"addressing": {"peer_links": "10.1.4.0/24"}},
        "addressing.peer_links: 10.1.4.0/24 overlaps addressing.fabric (10.1.0.0/16)",
    ),
    (
        {"addressing": {"loopbacks": "10.0.0.1/22"}},
        "addressing.loopbacks: not an IPv4 network: 10.0.0.1/22 has host bits set",
    ),
    (
        ["servers"],
        "the file must be a mapping of keys to values",
    ),
]


@pytest.mark.parametrize(("data", "line"), BAD)
def test_bad_intent_is_one_line(data: Any, line: str) -> None:
    message = _error(data)
    assert message == f"f.yaml: {line}"
    assert "\n" not in message


def test_other_server_prefixes_are_fine() -> None:
    for prefix in ("server", "gpu", "node", "leafy", "spines", "s"):
        assert intent.parse({"servers": {"name_prefix": prefix}}, "f").servers.name_prefix == prefix


def test_duplicate_top_level_key_is_refused(tmp_path: Path) -> None:
    error = _load_error(tmp_path, "name: a\nservers:\n  count: 4\nname: b\n")
    assert error.key == "name"
    assert error.problem == "duplicate key (line 4; first on line 1)"
    assert str(error) == f"{error.file}: name: duplicate key (line 4; first on line 1)"
    assert error.file == str(tmp_path / "fabric.yaml")


def test_duplicate_key_in_a_flow_mapping_is_refused(tmp_path: Path) -> None:
    error = _load_error(tmp_path, "qos:\n  classes:\n    roce: {dscp: 26, tc: 3, dscp: 24}\n")
    assert error.key == "qos.classes.roce.dscp"
    assert error.problem.startswith("duplicate key")


def test_duplicate_key_inside_a_list_is_refused(tmp_path: Path) -> None:
    error = _load_error(tmp_path, "x:\n  - a: 1\n    a: 2\n")
    assert error.key == "x.0.a"


def test_equal_values_under_different_keys_are_fine(tmp_path: Path) -> None:
    path = tmp_path / "fabric.yaml"
    path.write_text("spines:\n  count: 2\nleaves:\n  count: 2\n")
    fabric = intent.load(path)
    assert fabric.spines.count == 2 and fabric.leaves.count == 2


def test_yaml_anchors_and_merge_keys_still_work(tmp_path: Path) -> None:
    path = tmp_path / "fabric.yaml"
    path.write_text(
        "spines: &layer\n  ports: 64\n  speed: 400G\nleaves:\n  <<: *layer\n  ports: 32\n"
    )
    fabric = intent.load(path)
    assert fabric.spines.ports == 64
    assert fabric.leaves.ports == 32
    assert fabric.leaves.speed == 400000


def test_invalid_yaml_names_the_line(tmp_path: Path) -> None:
    error = _load_error(tmp_path, "servers:\n  count: 8\n nics: 2\n")
    assert error.key == "line 3, column 2"
    assert error.problem.startswith("not valid YAML: ")


def test_semantic_errors_name_the_line_and_column_and_the_clashing_values(tmp_path: Path) -> None:
    classes = "qos:\n  classes:\n    roce: {dscp: 26, tc: 3}\n    cnp: {dscp: 26, tc: 6}\n"
    error = _load_error(tmp_path, classes)
    assert error.key == "qos.classes"
    assert error.problem == "classes roce and cnp share DSCP 26 (line 2, column 3)"
    error = _load_error(tmp_path, "spine:\n  count: 2\n")
    assert (
        error.key == "spine"
        and error.problem == "unknown key; did you mean spines? (line 1, column 1)"
    )
    error = _load_error(tmp_path, "leaves:\n  count: 4\n  prots: 8\n")
    assert error.problem == "unknown key; did you mean ports? (line 3, column 3)"
    error = _load_error(tmp_path, "leaves:\n  count: x\n")
    assert error.problem.endswith('not "x" (line 2, column 3)')


def test_a_tab_in_the_indentation_is_named(tmp_path: Path) -> None:
    error = _load_error(tmp_path, "leaves:\n\tcount: 4\n")
    assert error.key == "line 2"
    assert error.problem == "not valid YAML: a tab in the indentation (YAML indents with spaces)"


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        intent.load(tmp_path / "missing.yaml")
    assert str(info.value) == f"{tmp_path / 'missing.yaml'}: No such file or directory"


def test_schema_speed_accepts_strings_and_numbers() -> None:
    import json

    schema = json.loads(intent.schema())
    speed = schema["$defs"]["Spines"]["properties"]["speed"]
    assert {branch["type"] for branch in speed["anyOf"]} == {"integer", "string"}
    assert schema["$defs"]["Servers"]["properties"]["count"]["type"] == "integer"
