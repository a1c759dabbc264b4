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

`python -m twin.incident INCIDENT_DIR OUT` writes OUT/before and OUT/after.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

from twin import labdir
from twin.errors import InputError
from twin.intent import fabric as intent


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


def apply(lab: Path, edits_file: Path) -> None:
    """Apply an edit file to a lab directory."""
    edits: dict[str, list[dict[str, Any]]] = yaml.safe_load(edits_file.read_text()) or {}
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


def build(incident: Path, out: Path) -> tuple[Path, Path]:
    """The lab of the incident (`out/before`) and the fixed one (`out/after`)."""
    source = fabric_file(incident)
    before, after = out / "before", out / "after"
    for lab, files in ((before, ["change.yaml"]), (after, ["change.yaml", "fix.yaml"])):
        labdir.generate(intent.load(source), lab, str(source), force=True)
        for name in files:
            apply(lab, incident / name)
    return before, after


def main(argv: list[str]) -> int:
    """`python -m twin.incident INCIDENT_DIR OUT`."""
    if len(argv) != 2:
        print("usage: python -m twin.incident INCIDENT_DIR OUT", file=sys.stderr)
        return 2
    try:
        before, after = build(Path(argv[0]), Path(argv[1]))
    except (InputError, OSError) as exc:
        print(f"twin.incident: {exc}", file=sys.stderr)
        return 2
    print(f"{before}\n{after}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
