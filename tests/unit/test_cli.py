"""The `twin` command: bad intents give one golden error line and exit 2; show; schema.

Every `tests/errors/NAME.yaml` is run through `twin generate` from the repository root and
must print exactly `tests/errors/NAME.log` on stderr, exit 2 and write nothing. Regenerate the
logs with `tests/regenerate_golden.py` and review the diff.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from labs import registry
from twin.cli import main as cli
from twin.cli.verbs.run import with_data_plane
from twin.intent import fabric as intent
from twin.lab import directory as labdir

REPO = Path(__file__).resolve().parents[2]
ERRORS = REPO / "tests" / "errors"
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
CASES = sorted(ERRORS.glob("*.yaml"))


@pytest.fixture(scope="module")
def small_lab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The lab of examples/small.yaml."""
    out = tmp_path_factory.mktemp("cli") / "small"
    source = REPO / "examples" / "small.yaml"
    labdir.generate(intent.load(source), out, str(source))
    return out


def test_every_error_case_has_a_log() -> None:
    assert len(CASES) >= 30
    missing = [c.name for c in CASES if not c.with_suffix(".log").is_file()]
    orphans = [p.name for p in ERRORS.glob("*.log") if not p.with_suffix(".yaml").is_file()]
    assert missing == [] and orphans == []


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_bad_intent_gives_its_golden_line(
    case: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(REPO)
    out = tmp_path / "lab"
    code = cli.main(["generate", str(case.relative_to(REPO)), "-o", str(out)])
    captured = capsys.readouterr()
    expected = case.with_suffix(".log").read_text()
    assert code == 2
    assert captured.err == expected
    assert captured.out == ""
    # One line naming the file, then the key (or YAML line) and the problem.
    assert expected.count("\n") == 1
    assert expected.startswith(f"twin: tests/errors/{case.name}: ")
    # Nothing written: neither the lab nor a temporary sibling.
    assert list(tmp_path.iterdir()) == []


def test_design_error_leaves_an_existing_lab_untouched(
    small_lab: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "lab"
    labdir.generate(intent.load(REPO / "examples" / "small.yaml"), out)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    code = cli.main(["generate", str(ERRORS / "oversubscribed.yaml"), "-o", str(out), "--force"])
    assert code == 2
    assert "oversubscription.max" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lab"]


def test_missing_intent_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.yaml"
    code = cli.main(["generate", str(missing), "-o", str(tmp_path / "lab")])
    assert code == 2
    assert capsys.readouterr().err == f"twin: {missing}: No such file or directory\n"
    assert not (tmp_path / "lab").exists()


def test_no_verb_prints_help_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    out = capsys.readouterr().out
    assert "generate" in out and "show" in out and "schema" in out


def test_generate_prints_the_headline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "lab"
    assert cli.main(["generate", str(REPO / "examples" / "reference.yaml"), "-o", str(out)]) == 0
    assert capsys.readouterr().out == (
        f"{out}: 8 leaves, 4 spines, 50 servers, oversubscription 0.812:1, ECMP width 4\n"
    )
    assert (out / "topology.clab.yml").is_file()


def test_generate_refuses_a_non_empty_directory_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "lab"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    code = cli.main(["generate", str(REPO / "examples" / "small.yaml"), "-o", str(out)])
    assert code == 2
    assert "directory exists and is not empty (use --force" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    small = str(REPO / "examples" / "small.yaml")
    # --force replaces a lab directory only (tests/integration/test_lab_safety.py): not this one.
    assert cli.main(["generate", small, "-o", str(out), "--force"]) == 2
    assert "not a lab directory" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lab"]


# --------------------------------------------------------------------------- twin show
def test_show_prints_figures_nodes_and_links(
    small_lab: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["show", str(small_lab)]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert lines[0] == f"lab small ({small_lab})"
    figures = {line.rsplit("  ", 1)[0].strip(): line.rsplit(" ", 1)[1] for line in lines[2:15]}
    assert figures["servers"] == "4"
    assert figures["leaves"] == "4"
    assert figures["spines"] == "2"
    assert figures["ECMP width (leaf to leaf)"] == "2"
    assert figures["tiers"] == "2"
    for node in ("spine1", "spine2", "leaf1", "leaf4", "server1", "server4"):
        assert any(line.startswith(f"{node} ") for line in lines), node
    # leaf-spine links carry their /31, the peer-link too; every server NIC is listed.
    links = lines[next(i for i, line in enumerate(lines) if line.startswith("kind ")) + 2 :]
    # 4 leaves x 2 spines, 2 peer-links, 4 servers x 2 NICs.
    kinds = [line.split()[0] for line in links]
    assert (kinds.count("fabric"), kinds.count("peerlink"), kinds.count("server")) == (8, 2, 8)
    assert len(links) == 18
    assert "leaf1:Ethernet0 (PortChannel101)" in text


def test_show_takes_a_labs_fabric_file_or_an_intent(
    small_lab: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["show", str(small_lab)]) == 0
    whole = capsys.readouterr().out
    assert cli.main(["show", str(small_lab / "fabric.yaml")]) == 0
    assert capsys.readouterr().out == whole
    intent = REPO / "examples" / "small.yaml"
    assert cli.main(["show", str(intent)]) == 0
    designed = capsys.readouterr().out
    assert designed.splitlines()[0] == f"lab small (designed from {intent}, not generated)"
    assert designed.splitlines()[1:] == whole.splitlines()[1:]


def test_show_refuses_a_directory_that_is_not_a_lab(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["show", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"twin: {tmp_path}: not a lab directory (fabric.yaml missing; run twin generate)\n"
    )


# --------------------------------------------------------------------------- twin schema
def _schema(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert cli.main(["schema"]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        ref = schema["$ref"]
        assert ref.startswith("#/$defs/"), ref
        schema = root["$defs"][ref.removeprefix("#/$defs/")]
    return schema


def _accepts(schema: dict[str, Any], value: Any, root: dict[str, Any], where: str) -> list[str]:
    """Problems of `value` against the subset of JSON Schema pydantic emits (no jsonschema)."""
    schema = _resolve(schema, root)
    if "anyOf" in schema:
        options = [_accepts(s, value, root, where) for s in schema["anyOf"]]
        return [] if any(not o for o in options) else [f"{where}: matches no anyOf branch"]
    kind = schema.get("type")
    python: dict[str, type | tuple[type, ...]] = {
        "object": dict,
        "array": list,
        "string": str,
        "boolean": bool,
        "null": type(None),
        "integer": int,
        "number": (int, float),
    }
    numeric_bool = kind in ("integer", "number") and isinstance(value, bool)
    if kind is not None and (not isinstance(value, python[kind]) or numeric_bool):
        return [f"{where}: {value!r} is not {kind}"]
    problems = []
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where}: {value!r} not in {schema['enum']}")
    if "minimum" in schema and value < schema["minimum"]:
        problems.append(f"{where}: below minimum")
    if "maximum" in schema and value > schema["maximum"]:
        problems.append(f"{where}: above maximum")
    if kind == "object":
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                problems += _accepts(props[key], item, root, f"{where}.{key}")
            elif extra is False:
                problems.append(f"{where}.{key}: unknown key")
            elif isinstance(extra, dict):
                problems += _accepts(extra, item, root, f"{where}.{key}")
    if kind == "array" and "items" in schema:
        for i, item in enumerate(value):
            problems += _accepts(schema["items"], item, root, f"{where}.{i}")
    return problems


def test_schema_is_a_json_schema_of_the_intent(capsys: pytest.CaptureFixture[str]) -> None:
    schema = _schema(capsys)
    import jsonschema  # a dev dependency

    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == set(intent.Fabric.model_fields)
    # Every reference resolves and every object refuses unknown keys, as the intent does.
    text = json.dumps(schema)
    for name in schema["$defs"]:
        assert schema["$defs"][name]["additionalProperties"] is False, name
    refs = {part.split('"')[0] for part in text.split('"$ref": "#/$defs/')[1:]}
    assert refs <= set(schema["$defs"]) and refs


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.stem for e in EXAMPLES])
def test_schema_accepts_the_examples(example: Path, capsys: pytest.CaptureFixture[str]) -> None:
    schema = _schema(capsys)
    data = yaml.safe_load(example.read_text())
    try:
        import jsonschema
    except ImportError:
        assert _accepts(schema, data, schema, example.stem) == []
    else:
        jsonschema.validate(data, schema)


def test_schema_check_refuses_what_the_intent_refuses(capsys: pytest.CaptureFixture[str]) -> None:
    schema = _schema(capsys)
    unknown = _accepts(schema, {"servers": {"cuont": 3}}, schema, "f")
    assert unknown == ["f.servers.cuont: unknown key"]
    assert _accepts(schema, {"spines": {"count": True}}, schema, "f") != []
    assert _accepts(schema, {"spines": {"count": "4"}}, schema, "f") != []
    assert _accepts(schema, {"spines": {"speed": "400G"}}, schema, "f") == []
    assert _accepts(schema, {"servers": {"nics": 9}}, schema, "f") != []


@pytest.mark.parametrize(
    ("flags", "backend", "simulated"),
    [
        ([], "netns", True),  # a live twin observes no data plane: the simulator plays it too
        ([], "clab", True),
        (["--no-sim"], "netns", False),
        ([], "fake", False),  # the routing model's stand-in plays alone, unless asked
        (["--sim"], "fake", True),
        ([], "sim", False),  # the simulator is the data plane already
        (["--sim"], "sim", False),
    ],
)
def test_run_plays_the_data_plane_on_the_simulator_where_the_backend_cannot(
    flags: list[str], backend: str, simulated: bool
) -> None:
    """`twin run LAB` on netns or clab adds the simulator's data plane, as the main job (`twin
    run` with no arguments) does; `--no-sim` leaves it out, `--sim` adds it on any backend."""
    args = cli.parser(["run"]).parse_args(["run", "lab", *flags, "--backend", backend])
    assert with_data_plane(args, registry.get(backend)) is simulated


def test_run_takes_sim_or_no_sim_not_both(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.parser(["run"]).parse_args(["run", "lab", "--sim", "--no-sim"])
    assert exited.value.code == 2
    assert "not allowed with argument --sim" in capsys.readouterr().err


def test_completion_reads_a_labs_design_without_following_a_link(tmp_path: Path) -> None:
    """Completion runs as the user who types, often root: a design.json planted as a link to
    another file is not read (nor is one larger than any design twin writes)."""
    from twin.cli.verbs import completion

    graph = {"graph": {"nodes": [{"id": "leaf1"}], "links": []}}
    real = tmp_path / "real"
    real.mkdir()
    (real / "design.json").write_text(json.dumps(graph))
    assert completion.names(real, links=False)[0] == "leaf1"
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "design.json").symlink_to(real / "design.json")
    assert completion.names(planted, links=False) == []
    with (real / "design.json").open("a") as big:  # still JSON: trailing white space
        big.write(" " * completion.DESIGN_BYTES)
    assert completion.names(real, links=False) == []


@pytest.mark.parametrize("enabled", [True, False])
def test_run_plays_without_the_collector_and_puts_it_back(
    monkeypatch: pytest.MonkeyPatch, enabled: bool
) -> None:
    """`twin run` turns Python's collector off from the lab's load to its verdict (its objects
    live to the end), and leaves it as it found it, even when the run fails; `resume` puts it
    back early, only when it was on."""
    import argparse
    import gc
    from collections.abc import Callable

    from twin.cli.verbs import run

    seen: list[bool] = []

    def opened(args: argparse.Namespace, resume: Callable[[], None]) -> int:
        seen.append(gc.isenabled())
        resume()
        seen.append(gc.isenabled())
        raise RuntimeError("the run failed")

    monkeypatch.setattr(run, "_opened", opened)
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        with pytest.raises(RuntimeError):
            run.run(argparse.Namespace())
        assert seen == [False, enabled]
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


@pytest.mark.parametrize(("computed", "collecting"), [(True, False), (False, True)])
def test_a_live_run_collects_and_a_computed_one_does_not(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, computed: bool, collecting: bool
) -> None:
    """The collector stays off for a backend whose play is a computation (the simulator: its
    objects live to the end) and is back on for a live twin, whose run lasts minutes."""
    import argparse
    import gc
    import types

    from twin.cli.verbs import run
    from twin.lab.directory import Lab
    from twin.scenario import model as scenarios

    seen: list[bool] = []

    def load(*_: object, **__: object) -> None:
        seen.append(gc.isenabled())
        raise RuntimeError("stop here")

    monkeypatch.setattr(Lab, "open", staticmethod(lambda path: path))
    monkeypatch.setattr(run, "backend", lambda args, lab: types.SimpleNamespace(computed=computed))
    monkeypatch.setattr(scenarios, "load", load)
    was = gc.isenabled()
    try:
        gc.enable()
        with pytest.raises(RuntimeError, match="stop here"):
            run.run(argparse.Namespace(lab=tmp_path, scenario=None))
        assert seen == [collecting]
        assert gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()


def test_a_progress_line_is_one_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """The timeline's phases that start together print from their own threads: a line written
    in pieces (print's text, then its newline) ran two of them together in the README."""
    from twin.cli.verbs.deploy import progress

    writes: list[str] = []

    class Stderr:
        def write(self, text: str) -> int:
            writes.append(text)
            return len(text)

        def flush(self) -> None:
            pass

        def isatty(self) -> bool:
            return False

    monkeypatch.setattr("sys.stderr", Stderr())
    progress("t=  6.0s  incast: 16 flows")
    assert writes == ["  .. t=  6.0s  incast: 16 flows\n"]
