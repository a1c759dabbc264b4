"""Reading what users write: strict YAML and one-line validation errors for pydantic models."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from twin.errors import InputError

M = TypeVar("M", bound=BaseModel)


def _key(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc if not str(part).startswith("function-"))


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def parse_model(model: type[M], data: Any, file: str) -> M:
    """Validate data against a model; the first problem is raised as one `InputError` line."""
    if not isinstance(data, dict):
        raise InputError(file, "", "the file must be a mapping of keys to values")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        message = re.sub(r"^Value error, ", "", first["msg"])
        if first["type"] == "extra_forbidden":
            message = "unknown key"
        elif first["type"].endswith("_type") and _is_scalar(first["input"]):
            message += f", not {json.dumps(first['input'])}"
        raise InputError(file, _key(first["loc"]), message) from None


def _no_duplicate_keys(node: yaml.Node | None, file: str, path: tuple[str, ...] = ()) -> None:
    """Refuse a mapping that repeats a key (PyYAML silently keeps the last one)."""
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value)
            if isinstance(key_node, yaml.ScalarNode) and key != "<<":
                if key in seen:
                    raise InputError(
                        file,
                        ".".join((*path, key)),
                        f"duplicate key (line {key_node.start_mark.line + 1}; "
                        f"first on line {seen[key]})",
                    )
                seen[key] = key_node.start_mark.line + 1
            _no_duplicate_keys(value_node, file, (*path, key))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _no_duplicate_keys(item, file, (*path, str(i)))


def strict_yaml(path: Path) -> Any:
    """Read a YAML file, refusing duplicate keys; an empty file reads as {}."""
    file = str(path)
    try:
        loader = yaml.SafeLoader(path.read_text())
        try:
            node = loader.get_single_node()
            _no_duplicate_keys(node, file)
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except OSError as exc:
        raise InputError(file, "", exc.strerror or str(exc)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else ""
        raise InputError(file, where, f"not valid YAML: {getattr(exc, 'problem', exc)}") from None
    return data if data is not None else {}
