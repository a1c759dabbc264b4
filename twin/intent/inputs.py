"""Reading what users write: strict YAML and one-line validation errors for pydantic models."""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import re
import stat
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from twin import jsonio
from twin.errors import InputError

M = TypeVar("M", bound=BaseModel)


def _key(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc if not str(part).startswith("function-"))


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


Place = tuple[int, int]
"""(line, column), counted from 1."""

_PLACES: dict[str, dict[tuple[str, ...], Place]] = {}
"""Per file `strict_yaml` read, where each key (by its path of keys and list indices) is."""


def place(file: str, loc: tuple[int | str, ...]) -> str:
    """' (line L, column C)' of the deepest key of `loc` that `strict_yaml` saw in `file`,
    or '' (a file not read as YAML, or data built in code)."""
    places = _PLACES.get(file, {})
    path = tuple(str(part) for part in loc if not str(part).startswith("function-"))
    while path:
        if path in places:
            line, column = places[path]
            return f" (line {line}, column {column})"
        path = path[:-1]
    return ""


@contextlib.contextmanager
def placed(file: str) -> Iterator[None]:
    """Add the YAML place of its key to an `InputError` about `file` raised inside (checks
    made after the model's, against the lab)."""
    try:
        yield
    except InputError as exc:
        where = place(file, tuple(exc.key.split("."))) if exc.file == file and exc.key else ""
        if not where:
            raise
        raise InputError(exc.file, exc.key, exc.problem + where) from None


def _model_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model that holds the last key of `loc`: fields by name or alias, list indices and
    mapping keys walked through their item type, `X | None` unwrapped."""
    current: Any = model
    for part in loc[:-1]:
        current = _optional(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            fields = current.model_fields
            field = fields.get(str(part)) or next(
                (f for f in fields.values() if f.alias == part), None
            )
            if field is None:
                return None
            current = field.annotation
        else:  # a list index or a mapping key: into the item type
            args = typing.get_args(current)
            current = args[-1] if args else None
    current = _optional(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _optional(annotation: Any) -> Any:
    """`X` of `X | None`; other annotations as they are."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return next(a for a in typing.get_args(annotation) if a is not type(None))
    return annotation


def suggestion(model: type[BaseModel], loc: tuple[int | str, ...]) -> str:
    """'; did you mean X?' for an unknown key close to a known one, else ''."""
    holder = _model_at(model, loc)
    if holder is None or not loc:
        return ""
    known = [f.alias or name for name, f in holder.model_fields.items()]
    close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else f" (known: {', '.join(known)})"


def parse_model(model: type[M], data: Any, file: str) -> M:
    """Validate data against a model; the first problem is raised as one `InputError` line,
    with the place of its key in the YAML file and, for an unknown key, the nearest known
    one."""
    if not isinstance(data, dict):
        raise InputError(file, "", "the file must be a mapping of keys to values")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        message = re.sub(r"^Value error, ", "", first["msg"])
        if first["type"] == "extra_forbidden":
            message = "unknown key" + suggestion(model, first["loc"])
        elif first["type"].endswith("_type") and _is_scalar(first["input"]):
            message += f", not {json.dumps(first['input'])}"
        raise InputError(file, _key(first["loc"]), message + place(file, first["loc"])) from None


def _no_duplicate_keys(node: yaml.Node | None, file: str, path: tuple[str, ...] = ()) -> None:
    """Refuse a mapping that repeats a key (PyYAML silently keeps the last one); note where
    each key is (`place`)."""
    if node is not None:
        _PLACES.setdefault(file, {})[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
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
            mark = key_node.start_mark
            _PLACES[file][(*path, key)] = (mark.line + 1, mark.column + 1)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _no_duplicate_keys(item, file, (*path, str(i)))


MAX_DEPTH = 64
"""Levels of nesting a file may have (a fabric needs five)."""
MAX_VALUES = 100_000
"""Values a file may hold once its aliases are expanded (a billion laughs is refused)."""
MAX_BYTES = 256 * 1024
"""Bytes a file may hold: the largest scenario the bounds allow (1,024 faults, 256 phases) is
about 90 KB, and a larger file would take seconds to parse before a bound refused it."""


def _bounded(node: yaml.Node, file: str) -> None:
    """Refuse nesting deeper than `MAX_DEPTH`, more than `MAX_VALUES` values with aliases
    expanded and an integer longer than Python converts, walking
    iteratively and stopping at the bound (so a bomb costs nothing)."""
    stack: list[tuple[yaml.Node, int]] = [(node, 1)]
    seen = 0
    while stack:
        here, depth = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            raise InputError(file, "", f"more than {MAX_VALUES:,} values (aliases expanded)")
        if depth > MAX_DEPTH:
            line = here.start_mark.line + 1
            raise InputError(file, f"line {line}", f"nested deeper than {MAX_DEPTH} levels")
        digits = sys.get_int_max_str_digits()  # int() refuses an integer of more
        if here.tag == "tag:yaml.org,2002:int" and len(here.value) > digits:
            line = here.start_mark.line + 1
            raise InputError(file, f"line {line}", f"an integer of more than {digits} digits")
        if isinstance(here, yaml.MappingNode):
            stack += [(child, depth + 1) for pair in here.value for child in pair]
        elif isinstance(here, yaml.SequenceNode):
            stack += [(child, depth + 1) for child in here.value]


CONFIG_BYTES = 16 << 20
"""Bytes a device's config may hold (config_db.json, frr.conf, host.json): the largest of
examples/big.yaml (2,048 servers, 3 tiers) is a super-spine's config_db.json of 0.34 MB."""
LAB_FILE_BYTES = 64 << 20
"""Bytes design.json and ifmap.json may hold: examples/big.yaml's are 6.9 and 2.1 MB."""
RUN_FILE_BYTES = 1 << 30
"""Bytes a file of a run may hold (queues.json: tens of MB of samples)."""


def _size(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit >> 10} KiB"


def read_bytes(path: Path, limit: int = MAX_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit`, or one line saying why not: not there,
    not a regular file (a FIFO or a device is refused before it is read: it could block or never
    end), larger than `limit` (refused by its size, before a byte is read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise InputError(str(path), "", exc.strerror or str(exc)) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise InputError(str(path), "", "not a regular file")
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(limit + 1) if st.st_size <= limit else b""
    if st.st_size > limit or len(data) > limit:
        raise InputError(str(path), "", f"larger than {_size(limit)} (the most twin reads)")
    return data


def read_file(path: Path, limit: int) -> bytes:
    """`read_bytes`, a file that is not there said `missing`."""
    if not os.path.lexists(path):
        raise InputError(str(path), "", "missing")
    return read_bytes(path, limit)


def read_text(path: Path, limit: int) -> str:
    """A UTF-8 text file of at most `limit` bytes (`read_bytes`), or one line saying why not."""
    try:
        return read_file(path, limit).decode()
    except UnicodeDecodeError as exc:
        raise InputError(str(path), f"byte {exc.start}", "not UTF-8 text") from None


def strict_yaml(path: Path) -> Any:
    """Read a YAML file, refusing what cannot be meant: not a regular file (a FIFO, a
    device), larger than `MAX_BYTES`, empty (or only comments), text that is not UTF-8 or
    holds a NUL byte, nesting or alias expansion beyond the bounds, and duplicate keys."""
    file = str(path)
    try:
        text = read_bytes(path).decode()
    except UnicodeDecodeError as exc:
        raise InputError(file, f"byte {exc.start}", "not UTF-8 text") from None
    if not text.strip():
        raise InputError(file, "", "the file is empty")
    if "\0" in text:
        line = text[: text.index("\0")].count("\n") + 1
        raise InputError(file, f"line {line}", "a NUL byte")
    try:
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                raise InputError(file, "", "the file is empty (only comments)")
            _bounded(node, file)
            _no_duplicate_keys(node, file)
            data = loader.construct_document(node)
        finally:
            loader.dispose()
    except RecursionError:
        raise InputError(file, "", f"nested deeper than {MAX_DEPTH} levels") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
        tab = _tab(text, mark.line) if mark else None
        if tab is not None:
            where, problem = f"line {tab}", "a tab in the indentation (YAML indents with spaces)"
        raise InputError(file, where, f"not valid YAML: {problem}") from None
    if data is None:
        raise InputError(file, "", "the file is empty (null)")
    return data


def _tab(text: str, line: int) -> int | None:
    """The line (from 1) of a tab in the indentation at or just before a YAML error's line
    (PyYAML reports it as a misplaced mapping or token), or None."""
    lines = text.splitlines()
    for number in (line, line - 1):
        if (
            0 <= number < len(lines)
            and "\t" in lines[number][: len(lines[number]) - len(lines[number].lstrip())]
        ):
            return number + 1
    return None


def read_json(path: Path, limit: int = LAB_FILE_BYTES) -> Any:
    """A JSON file of at most `limit` bytes, or one line naming it and what is wrong (missing,
    too large, not UTF-8, not JSON)."""
    return parse_json(path, read_file(path, limit))


def parse_json(path: Path, raw: bytes | str) -> Any:
    """JSON read from `path` (`jsonio.loads`: json.loads's values at orjson's speed), or one
    line naming it and what is wrong (not UTF-8, not JSON, an integer of more digits than
    Python converts)."""
    file = str(path)
    try:
        return jsonio.loads(raw)
    except UnicodeDecodeError:
        raise InputError(file, "", "not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise InputError(file, f"line {exc.lineno}", f"not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise InputError(file, "", "nested too deeply") from None
    except ValueError:  # int(): more digits than Python converts
        digits = sys.get_int_max_str_digits()
        raise InputError(file, "", f"an integer of more than {digits} digits") from None
