"""Incidents (`examples/incidents/<name>/`): a production incident reproduced as a change to a
lab's configs, the fix, and the scenario that shows it.

    fabric.yaml     the fabric (or `fabric: ../fabric.yaml`, a path relative to the incident)
    change.yaml     edits that make the base lab into the lab of the incident ("before")
    fix.yaml        edits on top of the change that fix it ("after")
    scenario.yaml   what to run on both (`twin run --backend sim`)

An edit file maps a file of the lab directory (a glob: `configs/server*/host.json`) to a
list of edits, applied in order to every file it matches:

    configs/leaf*/config_db.json:
      - {set: PFC_WD.Ethernet0.detection_time, value: "200"}   # dotted path; list indices
      - {delete: PFC_WD}                                       # a key (and what it holds)
    configs/spine1/frr.conf:
      - {append: "ip route 10.2.0.16/29 10.1.0.1 250"}          # a line of a text file
      - {insert: "  network 10.2.0.16/29", after: "  network 10.0.0.1/32"}
      - {remove: "ip route 10.2.0.16/29 10.1.0.1 250"}
    intent:                                                    # fabric.yaml, then rendered
      - {set: qos.lossless_priorities, value: [3, 4]}

`intent:` edits change the lab's fabric.yaml (same `set`/`delete` paths) and render every
config again from it, before the file edits apply (so edits of the configs come after).

`twin apply LAB CHANGE.yaml -o NEW` writes a new lab: LAB changed (`apply_to`);
`twin incident NAME OUT` writes OUT/before and OUT/after (`build`; NAME an incident of
examples/incidents, or its directory). A change that does not apply leaves nothing written.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from twin import safeio
from twin.errors import InputError
from twin.intent import fabric as intent
from twin.lab import directory as labdir
from twin.lab import outdir

INCIDENTS = (Path(__file__).parents[1] / "incidents").resolve()
"""The incidents `twin incident NAME` knows (<n>-NAME): examples/incidents, through the link
twin/incidents, which the wheel holds as package data."""
LEFT_BEHIND = ("runs", "logs", "validate", labdir.STATE_FILE, "events.jsonl")
"""What `twin apply` does not copy from the base lab: its runs and its twin's state."""


def _walk(data: Any, keys: list[str]) -> tuple[Any, str | int]:
    """The container holding the last key of a dotted path, and that key."""
    for key in keys[:-1]:
        data = data[int(key)] if isinstance(data, list) else data[key]
    last = keys[-1]
    return data, int(last) if isinstance(data, list) else last


def _edit_json(data: Any, edit: dict[str, Any], file: str) -> None:
    path = str(edit.get("set", edit.get("delete", "")))
    try:
        holder, key = _walk(data, path.split("."))
        if "set" in edit:
            holder[key] = edit["value"]
        else:
            del holder[key]
    except (KeyError, IndexError, ValueError, TypeError):
        raise InputError(file, path, "no such key in the lab file") from None


def _edit_text(text: str, edit: dict[str, Any], file: str) -> str:
    if "append" in edit:
        return text.rstrip("\n") + "\n" + str(edit["append"]) + "\n"
    lines = text.splitlines()
    line = str(edit.get("after", edit.get("remove", "")))
    if line not in lines:
        raise InputError(file, "after" if "after" in edit else "remove", f"no line {line!r}")
    if "insert" in edit:
        at = lines.index(line) + 1
        return "\n".join([*lines[:at], str(edit["insert"]), *lines[at:]]) + "\n"
    return "\n".join(x for x in lines if x != line) + "\n"


def _edits(edits_file: Path) -> dict[str, list[dict[str, Any]]]:
    """The edit file, its shape checked: file pattern -> list of edits."""
    try:
        edits = yaml.safe_load(edits_file.read_text()) or {}
    except yaml.YAMLError as exc:
        raise InputError(str(edits_file), "", f"not YAML: {one_line(exc)}") from None
    except ValueError:  # int(): more digits than Python converts
        digits = sys.get_int_max_str_digits()
        raise InputError(str(edits_file), "", f"an integer of more than {digits} digits") from None
    if not isinstance(edits, dict):
        raise InputError(str(edits_file), "", "must map lab files (or intent) to lists of edits")
    for pattern, steps in edits.items():
        if not isinstance(steps, list) or not all(isinstance(e, dict) for e in steps):
            raise InputError(str(edits_file), str(pattern), "must be a list of edits")
        for i, step in enumerate(steps):
            verbs = {"set", "delete", "append", "insert", "remove"} & set(step)
            if len(verbs) != 1 or ("set" in step and "value" not in step):
                raise InputError(
                    str(edits_file),
                    f"{pattern}.{i}",
                    "an edit is one of set (with value), delete, append, insert (with after), "
                    "remove",
                )
    return edits


def one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def _regenerate(lab: Path, steps: list[dict[str, Any]], edits_file: Path) -> None:
    """Edit the lab's intent and render the lab again from it."""
    data = yaml.safe_load((lab / "fabric.yaml").read_text())
    for step in steps:
        _edit_json(data, step, f"{edits_file}: intent")
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "fabric.yaml"
        source.write_text(yaml.safe_dump(data, sort_keys=False))
        labdir.generate(intent.load(source), lab, f"{edits_file}: intent", force=True)


def apply(lab: Path, edits_file: Path) -> None:
    """Apply an edit file to a lab directory (its intent edits first)."""
    edits = _edits(edits_file)
    if "intent" in edits:
        _regenerate(lab, edits.pop("intent"), edits_file)
    for pattern, steps in edits.items():
        files = sorted(lab.glob(pattern))
        if not files:
            raise InputError(str(edits_file), pattern, "matches no file of the lab")
        for path in files:
            where = f"{edits_file}: {path.relative_to(lab)}"
            if path.suffix == ".json":
                data = json.loads(path.read_text())
                for step in steps:
                    _edit_json(data, step, where)
                path.write_text(json.dumps(data, indent=2) + "\n")
            else:
                text = path.read_text()
                for step in steps:
                    text = _edit_text(text, step, where)
                path.write_text(text)


def fabric_file(incident: Path) -> Path:
    """The incident's fabric: its own fabric.yaml, or the one it names."""
    own = incident / "fabric.yaml"
    data = yaml.safe_load(own.read_text()) if own.exists() else None
    if isinstance(data, dict) and set(data) == {"fabric"}:
        return (incident / str(data["fabric"])).resolve()
    return own


@contextmanager
def fresh(out: Path) -> Iterator[Path]:
    """A new directory to fill (`out` checked fresh first; `twin.safeio.fresh_dir`), renamed
    to `out` when the block succeeds, removed when it fails: nothing half-made is left."""
    outdir.check(out, "-o")
    with safeio.fresh_dir(out) as tmp:
        yield tmp


def _copy_lab(base: Path, out: Path) -> None:
    """The lab's files without its runs and its twin's state."""
    labdir.Lab.open(base)
    labdir.refuse_links(base, ("configs", "clab"))
    for entry in base.iterdir():
        if entry.name in LEFT_BEHIND:
            continue
        if entry.is_dir():
            shutil.copytree(entry, out / entry.name)
        else:
            shutil.copy2(entry, out / entry.name)


def apply_to(base: Path, change: Path, out: Path) -> Path:
    """`twin apply`: a new lab `out`, the base lab with the change applied."""
    _edits(change)
    with fresh(out) as tmp:
        _copy_lab(base, tmp)
        apply(tmp, change)
    return out


def find(name: str) -> Path:
    """An incident by name (`pause-storm`, `1-pause-storm`) or directory."""
    path = Path(name)
    if (path / "change.yaml").is_file():
        return path
    known = sorted(p for p in INCIDENTS.glob("*/change.yaml"))
    for found in known:
        if name in (found.parent.name, found.parent.name.partition("-")[2]):
            return found.parent
    names = ", ".join(p.parent.name.partition("-")[2] for p in known)
    raise InputError(name, "", f"no incident of that name or directory (known: {names})")


def build(incident: Path, out: Path) -> tuple[Path, Path]:
    """The lab of the incident (`out/before`) and the fixed one (`out/after`)."""
    source = fabric_file(incident)
    with fresh(out) as tmp:
        for lab, files in (("before", ["change.yaml"]), ("after", ["change.yaml", "fix.yaml"])):
            labdir.generate(intent.load(source), tmp / lab, str(source))
            for name in files:
                apply(tmp / lab, incident / name)
    return out / "before", out / "after"
