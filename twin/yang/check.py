"""Validate a CONFIG_DB JSON (``config_db.json``) against the SONiC YANG models, offline.

This is what ``config reload`` does on a switch (sonic-yang-mgmt on top of libyang), done with
the Python binding ``libyang==2.7.1`` and the models copied into ``twin/yang/models/``:

1. every table must have a YANG model (``config reload`` refuses files with unmodelled tables);
2. CONFIG_DB JSON is translated into YANG instance data, driven only by the loaded schema: the
   module's top container ``sonic-xxx`` holds one container per table; a CONFIG_DB key that
   names a child container of the table (``DEVICE_METADATA|localhost``) fills that container,
   any other key goes to the table's list whose key count matches the ``|``-separated key parts
   (and, if several match, whose key types accept them); values get their YANG JSON encoding
   (numbers for 8..32-bit integers, booleans, arrays for leaf-lists; comma strings are split);
   "map" tables (a list whose only child is an inner one-key list, e.g. ``DSCP_TO_TC_MAP``,
   ``CABLE_LENGTH``) turn each ``field: value`` into an inner list entry;
3. the result is parsed strictly and validated by libyang (types, ranges, patterns, leafrefs,
   ``must``, mandatory nodes, uniqueness).

Values are type-checked one by one first (all such problems are reported at once). libyang then
stops at the first whole-tree error (leafref, must, mandatory), so :func:`validate_config_db`
takes the offending field (or entry) out and re-validates, up to ``max_problems`` times.
Entries that only fail because they refer to an entry taken out are not listed but counted in
a last line; other problems found after an entry was taken out say they may be consequences.
A ``"NULL": "NULL"`` field (Redis placeholder for an entry without fields) is ignored.

libyang is imported lazily: this module imports without it, and :func:`yang_available` tells
whether validation can run.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from twin import jsonio

if TYPE_CHECKING:  # pragma: no cover
    import libyang

YANG_DIR = Path(__file__).with_name("models")
"""The SONiC YANG models shipped with the package (sonic-buildimage, Apache-2.0)."""

ConfigDb = dict[str, dict[str, dict[str, Any]]]

# libyang base types whose RFC 7951 JSON encoding is a JSON number (64-bit ones are strings).
_NUMBER_TYPES = frozenset({"int8", "int16", "int32", "uint8", "uint16", "uint32"})
_LEAF_LIST_SEPARATORS = re.compile(r"[,;]")  # "1,2,3" (PORT adv_speeds); NTP src_intf uses ";"
_LOCATION = re.compile(r'(?:Data|Schema) location "(?P<path>.*)"')
_PREDICATE = re.compile(r"""\[(?P<name>[^=\]]+)=(?:'(?P<sq>[^']*)'|"(?P<dq>[^"]*)")\]""")
_REFERENCE_VALUE = re.compile(r'Invalid (?:leafref|union) value "(?P<value>[^"]*)"')
_LEAFREF_TARGET = re.compile(r'no target instance "(?P<path>[^"]*)"')
_LOCK = threading.Lock()  # one libyang context, process-global libyang logging settings


# --------------------------------------------------------------------------- schema index
class _Leaf:
    """A leaf or leaf-list of the schema, with what encoding its values needs.

    A value's check depends only on the leaf's type and the text (leafref targets are not
    checked before the whole tree is), so each distinct text is checked once per leaf and its
    JSON kind (or libyang's refusal) remembered: a fabric's configs repeat the same values on
    every port and queue.
    """

    __slots__ = ("_checked", "_ctx", "known", "leaf_list", "name", "node")

    def __init__(self, ctx: libyang.Context, node: libyang.SLeaf | libyang.SLeafList) -> None:
        import libyang

        self._ctx = ctx
        self.node = node
        self.name = str(node.name())
        self.leaf_list = isinstance(node, libyang.SLeafList)
        self._checked: dict[str, tuple[str | None, Any]] = {}
        self.known: dict[str, Any] = {}
        """The encoding of each text checked and accepted, for a leaf (not a leaf-list) whose
        type is not `empty`: what `encode` gives for that text, looked up without a call
        (the translation's hot path: 272,000 entries at 1,024 servers)."""

    def _seen(self, text: str) -> tuple[str | None, Any]:
        """(None, JSON encoding) of a text the type accepts, else (libyang's refusal, None)."""
        seen = self._checked.get(text)
        if seen is None:
            try:
                kind = _check_value(self._ctx, self.node, text)
            except _Rejected as exc:
                seen = (str(exc), None)
            else:
                if kind is None:
                    kind = _schema_kind(self.node.type())
                seen = (None, _encoding(kind, text))
                if not self.leaf_list and seen[1] is not _EMPTY:
                    self.known[text] = seen[1]
            self._checked[text] = seen
        return seen

    def accepts(self, text: str) -> bool:
        """Whether the leaf's type accepts ``text``."""
        return self._seen(text)[0] is None

    def scalar(self, value: Any) -> Any:
        """The YANG JSON encoding of one CONFIG_DB value; raises _Rejected."""
        text = value if type(value) is str else _scalar_text(value)
        refusal, encoded = self._checked.get(text) or self._seen(text)
        if refusal is not None:
            raise _Rejected(refusal)
        return [None] if encoded is _EMPTY else encoded

    def encode(self, value: Any) -> Any:
        """The YANG JSON encoding of a CONFIG_DB field (a list for a leaf-list)."""
        if not self.leaf_list:
            return self.scalar(value)
        if isinstance(value, str):
            items: list[Any] = [v.strip() for v in _LEAF_LIST_SEPARATORS.split(value)]
            items = [v for v in items if v]
        elif isinstance(value, list):
            items = [v for v in value if v != ""]
        else:
            items = [value]
        return [self.scalar(item) for item in items]


@dataclass(frozen=True)
class _ContainerModel:
    node: libyang.SContainer
    name: str
    children: dict[str, libyang.SNode]  # every child schema node by name
    leaves: dict[str, _Leaf]
    containers: dict[str, _ContainerModel]


@dataclass(frozen=True)
class _ListModel:
    node: libyang.SList
    name: str
    keys: tuple[_Leaf, ...]
    leaves: dict[str, _Leaf]  # non-key leaves and leaf-lists
    containers: dict[str, _ContainerModel]
    nodes: dict[str, libyang.SNode]  # leaves and keys by name (what an error may point at)
    map_list: str | None  # inner list of a "map" table (DSCP_TO_TC_MAP_LIST/...)
    map_key: _Leaf | None
    map_value: _Leaf | None

    def shape(self) -> str:
        return "|".join(f"<{k.name}>" for k in self.keys)


@dataclass(frozen=True)
class _TableModel:
    module: str
    top: str
    name: str
    lists: tuple[_ListModel, ...]
    containers: dict[str, _ContainerModel]

    @functools.cached_property
    def by_parts(self) -> dict[int, list[_ListModel]]:
        """The lists by the number of their keys (of `|`-separated parts of a CONFIG_DB key)."""
        found: dict[int, list[_ListModel]] = {}
        for lst in self.lists:
            found.setdefault(len(lst.keys), []).append(lst)
        return found


@dataclass(frozen=True)
class YangSchema:
    """A libyang context with all SONiC modules and the CONFIG_DB table -> model index."""

    ctx: libyang.Context
    tables: dict[str, _TableModel]
    yang_dir: Path
    translated: jsonio.Memo[dict[str, Any] | None] = field(
        default_factory=lambda: jsonio.Memo(TRANSLATED), compare=False
    )
    """The last `TRANSLATED` tables translated, by their name and content: the YANG data of
    each, None for one with a problem (`_translated`)."""


TRANSLATED = 512
"""How many translated tables `_translated` keeps (the most recently used)."""


def yang_available() -> bool:
    """True if the libyang binding can be imported (``pip install libyang==2.7.1``)."""
    try:
        import libyang  # noqa: F401
    except ImportError:
        return False
    return True


@functools.cache
def load_schema(yang_dir: str | Path = YANG_DIR) -> YangSchema:
    """Load every ``*.yang`` of ``yang_dir`` into one libyang context (cached per directory).

    Raises ImportError if the libyang binding is missing and libyang.LibyangError if a module
    does not load.
    """
    import libyang

    directory = Path(yang_dir)
    ctx = libyang.Context(str(directory))
    for path in sorted(directory.glob("*.yang")):
        ctx.load_module(path.stem)
    tables: dict[str, _TableModel] = {}
    for module in ctx:
        for table in _module_tables(module):
            tables.setdefault(table.name, table)
    return YangSchema(ctx=ctx, tables=tables, yang_dir=directory)


def load_context(yang_dir: str | Path = YANG_DIR) -> libyang.Context:
    """The cached libyang context with all SONiC modules loaded (see :func:`load_schema`)."""
    return load_schema(yang_dir).ctx


def _module_tables(module: libyang.Module) -> Iterator[_TableModel]:
    import libyang

    ctx = module.context
    name = str(module.name())
    for top in module.children(types=(libyang.SNode.CONTAINER,)):
        # SONiC convention: one top container named after the module, one child container per
        # CONFIG_DB table (non-config and event modules have no config tables).
        if top.name() != name or top.config_false():
            continue
        assert isinstance(top, libyang.SContainer)
        for table in top.children(types=(libyang.SNode.CONTAINER,)):
            if table.config_false():
                continue
            assert isinstance(table, libyang.SContainer)
            lists = tuple(
                _list_model(ctx, node)
                for node in table.children(types=(libyang.SNode.LIST,))
                if isinstance(node, libyang.SList)
            )
            containers = {
                str(c.name()): _container_model(ctx, c)
                for c in table.children(types=(libyang.SNode.CONTAINER,))
                if isinstance(c, libyang.SContainer)
            }
            if lists or containers:  # event modules have leaf-only containers: not tables
                yield _TableModel(name, str(top.name()), str(table.name()), lists, containers)


def _container_model(ctx: libyang.Context, node: libyang.SContainer) -> _ContainerModel:
    import libyang

    children = {str(c.name()): c for c in node.children()}
    leaves = {
        name: _Leaf(ctx, c)
        for name, c in children.items()
        if isinstance(c, libyang.SLeaf | libyang.SLeafList)
    }
    containers = {
        name: _container_model(ctx, c)
        for name, c in children.items()
        if isinstance(c, libyang.SContainer)
    }
    return _ContainerModel(node, str(node.name()), children, leaves, containers)


def _list_model(ctx: libyang.Context, node: libyang.SList) -> _ListModel:
    import libyang

    keys = _key_leaves(node)
    key_names = {k.name() for k in keys}
    leaves: dict[str, libyang.SLeaf | libyang.SLeafList] = {}
    containers: dict[str, _ContainerModel] = {}
    inner_lists: list[libyang.SList] = []
    for child in node.children():
        if isinstance(child, libyang.SLeaf | libyang.SLeafList):
            if child.name() not in key_names:
                leaves[str(child.name())] = child
        elif isinstance(child, libyang.SContainer):
            containers[str(child.name())] = _container_model(ctx, child)
        elif isinstance(child, libyang.SList):
            inner_lists.append(child)
    map_list = map_key = map_value = None
    if not leaves and not containers and len(inner_lists) == 1:
        inner = inner_lists[0]
        inner_keys = _key_leaves(inner)
        values = [
            c
            for c in inner.children()
            if isinstance(c, libyang.SLeaf | libyang.SLeafList) and not _is_key(c)
        ]
        if len(inner_keys) == 1 and len(values) == 1:
            map_list = str(inner.name())
            map_key, map_value = _Leaf(ctx, inner_keys[0]), _Leaf(ctx, values[0])
    return _ListModel(
        node,
        str(node.name()),
        tuple(_Leaf(ctx, k) for k in keys),
        {name: _Leaf(ctx, leaf) for name, leaf in leaves.items()},
        containers,
        {**leaves, **{str(k.name()): k for k in keys}},
        map_list,
        map_key,
        map_value,
    )


def _key_leaves(node: libyang.SList) -> tuple[libyang.SLeaf, ...]:
    import libyang

    keys = node.keys()  # list keys in model order (not a dict)
    return tuple(k for k in keys if isinstance(k, libyang.SLeaf))


def _is_key(node: libyang.SNode) -> bool:
    import libyang

    return isinstance(node, libyang.SLeaf) and bool(node.is_key())


# --------------------------------------------------------------------------- value encoding
class _Rejected(Exception):
    """A CONFIG_DB value that its YANG type refuses (message from libyang)."""


def _check_value(ctx: libyang.Context, node: libyang.SNode, text: str) -> str | None:
    """Validate ``text`` against the type of leaf ``node``; return the JSON kind of the type
    libyang chose ("number", "boolean", "empty", "string") or None if unknown (union behind a
    leafref). Raises _Rejected. Leafref targets are not checked here (no data tree yet)."""
    from _libyang import ffi, lib

    realtype = ffi.new("const struct lysc_type **")
    raw = text.encode("utf-8")
    ret = lib.lyd_value_validate(ctx.cdata, node.cdata, raw, len(raw), ffi.NULL, realtype, ffi.NULL)
    if ret not in (lib.LY_SUCCESS, lib.LY_EINCOMPLETE):
        message = _pop_errors(ctx) or f"invalid value {text!r}"
        raise _Rejected(message)
    ctype = realtype[0]
    while ctype != ffi.NULL and ctype.basetype == lib.LY_TYPE_LEAFREF:
        ctype = ffi.cast("struct lysc_type_leafref *", ctype).realtype
    if ctype == ffi.NULL or ctype.basetype == lib.LY_TYPE_UNION:
        return None
    return _kind(int(ctype.basetype))


@functools.cache
def _number_basetypes() -> frozenset[int]:
    from _libyang import lib

    return frozenset(int(getattr(lib, f"LY_TYPE_{t.upper()}")) for t in _NUMBER_TYPES)


def _kind(basetype: int) -> str:
    from _libyang import lib

    if basetype in _number_basetypes():
        return "number"
    if basetype == lib.LY_TYPE_BOOL:
        return "boolean"
    if basetype == lib.LY_TYPE_EMPTY:
        return "empty"
    return "string"


def _schema_kind(type_: libyang.Type) -> str:
    """JSON kind of a YANG type from the schema alone (fallback for unions behind leafrefs):
    a union takes a JSON string if any member does."""
    base = str(type_.basename())
    if base == "leafref":
        target = type_.leafref_type()
        return _schema_kind(target) if target is not None else "string"
    if base == "union":
        kinds = {_schema_kind(member) for member in type_.union_types()}
        for kind in ("string", "number", "boolean", "empty"):
            if kind in kinds:
                return kind
        return "string"
    if base in _NUMBER_TYPES:
        return "number"
    if base == "boolean":
        return "boolean"
    if base == "empty":
        return "empty"
    return "string"


def _describe_type(type_: libyang.Type) -> str:
    """'an existing BUFFER_PROFILE entry or a string ...' for error messages."""
    base = str(type_.basename())
    if base == "leafref":
        return _describe_leafref(str(type_.leafref_path()))
    if base == "union":
        return " or ".join(_describe_type(member) for member in type_.union_types())
    return f"a {base} of the form the model allows"


def _describe_leafref(path: str) -> str:
    """'/bpf:sonic-buffer-profile/bpf:BUFFER_PROFILE/bpf:BUFFER_PROFILE_LIST/bpf:name' ->
    'the name of an existing BUFFER_PROFILE entry'."""
    segs = [seg.split(":")[-1] for seg in path.split("/") if seg and seg != ".."]
    for i, seg in enumerate(segs[1:], start=1):
        if seg.endswith("_LIST"):
            return f"the {segs[-1]} of an existing {segs[i - 1]} entry"
    return f"a value present at {path}"


def _pop_errors(ctx: libyang.Context) -> str:
    """Messages of the errors libyang stored in the context (then cleared)."""
    from _libyang import ffi, lib

    messages = []
    err = lib.ly_err_first(ctx.cdata)
    while err:
        if err.msg:
            messages.append(ffi.string(err.msg).decode("utf-8", "replace"))
        err = err.next
    lib.ly_err_clean(ctx.cdata, ffi.NULL)
    return "; ".join(messages)


def _scalar_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | dict):
        raise _Rejected(f"expects a single value, got {type(value).__name__} {value!r}")
    return str(value)


_EMPTY = object()  # the encoding of a value of type empty: a fresh [None] each time
_UNKNOWN = object()  # a text not (yet) in a leaf's `known`


def _encoding(kind: str, text: str) -> Any:
    """The YANG JSON encoding of a text its type accepts, by the JSON kind of the type."""
    if kind == "number":
        try:
            return int(text)
        except ValueError:
            return text
    if kind == "boolean":
        return text == "true"
    if kind == "empty":
        return _EMPTY
    return text


# --------------------------------------------------------------------------- translation
@dataclass
class _Entry:
    """Where a CONFIG_DB entry went in the YANG data (to drop it or one of its fields)."""

    table: str
    key: str
    holder: list[dict[str, Any]] | dict[str, Any]  # the YANG list (or the table container)
    data: dict[str, Any]
    list_name: str | None  # None for a container entry
    map_list: str | None = None  # inner list name for map tables
    map_key: str | None = None
    key_leaves: tuple[str, ...] = ()
    leaves: dict[str, Any] = field(default_factory=dict)  # field name -> YANG SNode


_Made = tuple[
    str, str, list[dict[str, Any]] | dict[str, Any], dict[str, Any], "_ListModel | _ContainerModel"
]
"""An entry translated: table, key, holder, data, and the list or container it went to."""


@dataclass
class _Translation:
    data: dict[str, Any] = field(default_factory=dict)
    problems: list[tuple[tuple[str, str | None, str | None], str]] = field(default_factory=list)
    made: list[tuple[_Made, tuple[str, ...]]] = field(default_factory=list)
    """Each entry translated (with its key parts), in order: `entries` and `by_yang_key` are
    made from them only when libyang finds an error to place (a valid config needs neither)."""

    @functools.cached_property
    def _indexed(
        self,
    ) -> tuple[dict[tuple[str, str], _Entry], dict[tuple[str, str, tuple[str, ...]], _Entry]]:
        entries: dict[tuple[str, str], _Entry] = {}
        by_yang_key: dict[tuple[str, str, tuple[str, ...]], _Entry] = {}
        for (table, key, holder, data, model), parts in self.made:
            if isinstance(model, _ContainerModel):
                entries[(table, key)] = _Entry(
                    table, key, holder, data, None, leaves=model.children
                )
                continue
            entry = _Entry(
                table,
                key,
                holder,
                data,
                model.name,
                key_leaves=tuple(dict.fromkeys(k.name for k in model.keys)),
                leaves=model.nodes,
            )
            if model.map_list is not None and model.map_key is not None:
                entry.map_list, entry.map_key = model.map_list, model.map_key.name
            entries[(table, key)] = entry
            by_yang_key[(table, model.name, parts)] = entry
        return entries, by_yang_key

    @property
    def entries(self) -> dict[tuple[str, str], _Entry]:
        """Where each entry went, by table and CONFIG_DB key."""
        return self._indexed[0]

    @property
    def by_yang_key(self) -> dict[tuple[str, str, tuple[str, ...]], _Entry]:
        """Where each list entry went, by table, YANG list and key values."""
        return self._indexed[1]

    def problem(self, table: str, key: str | None, fld: str | None, message: str) -> None:
        self.problems.append(((table, key, fld), message))

    def field(
        self, data: dict[str, Any], table: str, key: str, name: str, leaf: _Leaf, value: Any
    ) -> None:
        """A field encoded into `data`, or the problem its type finds."""
        try:
            data[name] = leaf.encode(value)
        except _Rejected as exc:
            self.problem(table, key, name, str(exc))


def _translate(schema: YangSchema, config: ConfigDb) -> _Translation:
    out = _Translation()
    if not isinstance(config, dict):
        out.problem("", None, None, f"config must be a JSON object, got {type(config).__name__}")
        return out
    for table_name, table in config.items():
        model = schema.tables.get(table_name)
        if model is None:
            out.problem(
                table_name,
                None,
                None,
                "no YANG model for this table (config reload refuses tables without a model)",
            )
            continue
        if not isinstance(table, dict):
            out.problem(
                table_name,
                None,
                None,
                f"table must be an object of entries, got {type(table).__name__}",
            )
            continue
        top = out.data.setdefault(f"{model.module}:{model.top}", {})
        container = top.setdefault(model.name, {})
        for key, entry in table.items():
            if not isinstance(entry, dict):
                out.problem(
                    table_name,
                    key,
                    None,
                    f"entry must be an object of fields, got {type(entry).__name__}",
                )
                continue
            inner = model.containers.get(key)
            if inner is not None:
                data = _translate_container(out, table_name, key, inner, entry)
                container[key] = data
                out.made.append(((table_name, key, container, data, inner), ()))
                continue
            _translate_list_entry(out, model, container, key, entry)
        if not container:
            del top[model.name]
        if not top:
            del out.data[f"{model.module}:{model.top}"]
    return out


def _translate_container(
    out: _Translation,
    table: str,
    key: str,
    model: _ContainerModel,
    fields: dict[str, Any],
) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for name, value in fields.items():
        leaf = model.leaves.get(name)
        if leaf is not None:
            out.field(data, table, key, name, leaf, value)
            continue
        child = model.children.get(name)
        if child is None:
            if name != "NULL":  # Redis placeholder of an entry without fields
                out.problem(
                    table,
                    key,
                    name,
                    f"unknown field (not in YANG container "
                    f"{model.name}; allowed: {', '.join(sorted(model.children))})",
                )
            continue
        inner = model.containers.get(name)
        if inner is not None and isinstance(value, dict):
            data[name] = _translate_container(out, table, key, inner, value)
            continue
        out.problem(table, key, name, f"YANG node is a {child.keyword()}, not a field")
    return data


def _translate_list_entry(
    out: _Translation,
    model: _TableModel,
    container: dict[str, Any],
    key: str,
    fields: dict[str, Any],
) -> None:
    table = model.name
    parts = [p.strip() for p in key.split("|")]
    candidates = model.by_parts.get(len(parts), [])
    if not candidates and not model.lists:
        out.problem(
            table,
            key,
            None,
            f"unknown key; the model has only the keys {', '.join(sorted(model.containers))}",
        )
        return
    if not candidates:
        shapes = [lst.shape() for lst in model.lists] + sorted(model.containers)
        out.problem(
            table,
            key,
            None,
            f"key has {len(parts)} part(s); the model accepts "
            f"{' or '.join(shapes) if shapes else 'no entries'}",
        )
        return
    chosen = candidates[0]
    if len(candidates) > 1:
        chosen = next(
            (c for c in candidates if all(map(_Leaf.accepts, c.keys, parts))), candidates[0]
        )
    data: dict[str, Any] = {}
    for leaf, part in zip(chosen.keys, parts, strict=True):
        encoded = leaf.known.get(part, _UNKNOWN)
        if encoded is _UNKNOWN:
            try:
                encoded = leaf.scalar(part)
            except _Rejected as exc:
                out.problem(table, key, None, f"key part {leaf.name} = {part!r}: {exc}")
                return
        data[leaf.name] = encoded
    if chosen.map_list is not None:
        map_key, map_value = chosen.map_key, chosen.map_value
        assert map_key is not None and map_value is not None
        inner: list[dict[str, Any]] = []
        for name, value in fields.items():
            try:
                inner.append(
                    {map_key.name: map_key.scalar(name), map_value.name: map_value.encode(value)}
                )
            except _Rejected as exc:
                out.problem(table, key, name, str(exc))
        if inner:
            data[chosen.map_list] = inner
    else:
        leaves = chosen.leaves  # no key nor container among them
        for name, value in fields.items():
            node = leaves.get(name)
            if node is not None:
                encoded = node.known.get(value, _UNKNOWN) if type(value) is str else _UNKNOWN
                if encoded is _UNKNOWN:
                    out.field(data, table, key, name, node, value)
                else:
                    data[name] = encoded
                continue
            key_values = {k.name: p for k, p in zip(chosen.keys, parts, strict=True)}
            if name in key_values:
                if str(value) != key_values[name]:
                    out.problem(
                        table,
                        key,
                        name,
                        f"field repeats key {name} with a different value {value!r}",
                    )
                continue
            if name in chosen.containers and isinstance(value, dict):
                data[name] = _translate_container(out, table, key, chosen.containers[name], value)
                continue
            if name != "NULL":  # Redis placeholder of an entry without fields
                allowed = ", ".join(sorted([*chosen.leaves, *chosen.containers]))
                out.problem(
                    table,
                    key,
                    name,
                    f"unknown field (YANG list {chosen.name} has: {allowed or 'no fields'})",
                )
    holder = container.setdefault(chosen.name, [])
    holder.append(data)
    out.made.append(((table, key, holder, data, chosen), tuple(parts)))


# --------------------------------------------------------------------------- libyang errors
@contextmanager
def _captured_libyang_log() -> Iterator[list[tuple[str, str]]]:
    """Collect libyang's (message, location) pairs. libyang 2.1 only reports the data path of
    an error when logging through a callback, so route its log to a private handler."""
    import libyang

    records: list[tuple[str, str]] = []

    class _Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            args = record.args if isinstance(record.args, tuple) else ()
            message = str(args[0]) if args else record.getMessage()
            location = str(args[1]) if len(args) > 1 else ""
            records.append((message, location))

    logger = logging.getLogger("libyang")
    handler = _Handler(level=logging.ERROR)
    propagate, level = logger.propagate, logger.level
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.ERROR)
    libyang.configure_logging(True, logging.ERROR)
    try:
        yield records
    finally:
        libyang.configure_logging(False, logging.ERROR)  # the binding's default
        logger.removeHandler(handler)
        logger.propagate, logger.level = propagate, level


def _split_path(path: str) -> list[tuple[str, list[str]]]:
    """'/m:top/T/L[a='x'][b='y']/f' -> [('top', []), ('T', []), ('L', ['x', 'y']), ('f', [])]"""
    segments: list[str] = []
    current, depth, quote = "", 0, ""
    for ch in path:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"" and depth:
            quote = ch
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "/" and not depth:
            if current:
                segments.append(current)
            current = ""
            continue
        current += ch
    if current:
        segments.append(current)
    result = []
    for seg in segments:
        name = seg.split("[", 1)[0].split(":")[-1]
        values = [
            m.group("sq") if m.group("sq") is not None else m.group("dq")
            for m in _PREDICATE.finditer(seg)
        ]
        result.append((name, values))
    return result


@dataclass
class _Location:
    table: str | None = None
    key: str | None = None
    fld: str | None = None
    entry: _Entry | None = None
    map_item: str | None = None  # inner-list key (a CONFIG_DB field) of a map table


def _locate(tr: _Translation, path: str) -> _Location:
    segs = _split_path(path)
    if len(segs) < 2:
        return _Location()
    table = segs[1][0]
    loc = _Location(table=table)
    if len(segs) < 3:
        return loc
    name, values = segs[2]
    if values:
        entry = tr.by_yang_key.get((table, name, tuple(values)))
        loc.key = entry.key if entry else "|".join(values)
        loc.entry = entry
    elif (table, name) in tr.entries and tr.entries[(table, name)].list_name is None:
        loc.key, loc.entry = name, tr.entries[(table, name)]
    elif len(segs) >= 4:
        # "Mandatory node ... does not exist" comes with a schema path (no list keys): the
        # entry is the first still-present one of that list that lacks the field.
        missing = segs[3][0]
        for entry in tr.entries.values():
            if (
                entry.table == table
                and entry.list_name == name
                and missing not in entry.data
                and any(item is entry.data for item in entry.holder)
            ):
                loc.key, loc.entry, loc.fld = entry.key, entry, missing
                return loc
        return loc
    else:
        return loc
    if len(segs) >= 4:
        fname, fvalues = segs[3]
        if loc.entry is not None and loc.entry.map_list == fname and fvalues:
            loc.fld = loc.map_item = fvalues[0]
        elif loc.entry is None or fname not in loc.entry.key_leaves:
            loc.fld = fname
    return loc


def _drop(loc: _Location) -> str | None:
    """Remove what a libyang error points at; return 'field'/'entry' or None if nothing."""
    entry = loc.entry
    if entry is None:
        return None
    if loc.map_item is not None and entry.map_list and entry.map_key:
        items = entry.data.get(entry.map_list, [])
        kept = [i for i in items if str(i.get(entry.map_key)) != loc.map_item]
        if len(kept) != len(items):
            entry.data[entry.map_list] = kept
            if not kept:
                del entry.data[entry.map_list]
            return "field"
    if loc.fld is not None and loc.fld in entry.data:
        del entry.data[loc.fld]
        return "field"
    if isinstance(entry.holder, list):
        if any(item is entry.data for item in entry.holder):
            entry.holder[:] = [item for item in entry.holder if item is not entry.data]
            return "entry"
    elif entry.holder.get(entry.key) is entry.data:
        del entry.holder[entry.key]
        return "entry"
    return None


@dataclass(frozen=True)
class Problem:
    """One YANG problem of a CONFIG_DB: where (table, key, field, when known) and what."""

    table: str | None
    key: str | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = []
        if self.table:
            where.append(f"table {self.table}")
        if self.key is not None:
            where.append(f'key "{self.key}"')
        if self.field is not None:
            where.append(f'field "{self.field}"')
        return f"{', '.join(where)}: {self.message}" if where else self.message


def _format(table: str | None, key: str | None, fld: str | None, message: str) -> str:
    return str(Problem(table, key, fld, message))


def _prune_empty(data: dict[str, Any]) -> dict[str, Any]:
    """Drop empty YANG lists/table containers (libyang rejects an empty JSON list)."""
    result: dict[str, Any] = {}
    for module, top in data.items():
        tables = {}
        for table, content in top.items():
            kept = {k: v for k, v in content.items() if v != []}
            if kept:
                tables[table] = kept
        if tables:
            result[module] = tables
    return result


# --------------------------------------------------------------------------- public API
def validate_config_db(
    config: ConfigDb,
    *,
    max_problems: int = 50,
    yang_dir: str | Path = YANG_DIR,
) -> list[str]:
    """Validate a CONFIG_DB JSON dict against the SONiC YANG models; return its problems.

    An empty list means the config is valid. Each problem is one line naming the table, key
    and field where known, e.g.
    ``table PORT, key "Ethernet0", field "mtu": Value "99999" is out of type uint16 ...``.
    At most ``max_problems`` are listed; a last line in parentheses then says so, and another
    one counts the entries left out because they refer to entries already rejected.
    Not thread-parallel (one libyang context; calls are serialised by a lock).
    Raises ImportError if the libyang binding is not installed.
    """
    return [str(p) for p in problems(config, max_problems=max_problems, yang_dir=yang_dir)]


def problems(
    config: ConfigDb,
    *,
    max_problems: int = 50,
    yang_dir: str | Path = YANG_DIR,
    plain: bool = False,
) -> list[Problem]:
    """The problems :func:`validate_config_db` lists, with their table, key and field. With
    `plain`, a valid config is first passed by the plain models (`twin.yang.plain`: loaded
    once, about 0.5 s, to save each large config's leafrefs, and the parse of each model
    whose data passed before in another config); anything else is validated in full."""
    schema = load_schema(yang_dir)
    with _LOCK:
        if plain and _passes_plain(schema, config):
            return []
        tr = _translate(schema, config)
        found = [Problem(*where, msg) for where, msg in tr.problems]
        reported = {where for where, _ in tr.problems}
        dropped: set[tuple[str, str]] = set()  # (table, key part) of entries taken out
        hidden = 0  # references to those entries (consequences, not listed)
        for _ in range(max_problems * 4):
            if len(found) >= max_problems:
                break
            error = _first_error(schema, tr)
            if error is None:
                break
            message, loc = error
            where = (loc.table or "", loc.key, loc.fld)
            if _refers_to(message, dropped):
                hidden += 1  # a consequence: take the referring entry out as well
                loc.fld = loc.map_item = None
            elif where not in reported:
                if dropped:
                    message += " (may be a consequence of an entry rejected above)"
                found.append(Problem(loc.table, loc.key, loc.fld, message))
                reported.add(where)
            what = _drop(loc)
            if what is None:  # nothing to take out and retry: stop (the problem is listed)
                if not found:
                    found.append(Problem(loc.table, loc.key, loc.fld, message))
                break
            if what == "entry" and loc.entry is not None:
                entry = loc.entry
                dropped.update((entry.table, p.strip()) for p in entry.key.split("|"))
        more = len(found) > max_problems or (
            len(found) == max_problems and _first_error(schema, tr) is not None
        )
        found = found[:max_problems]
        if hidden:
            noun = "entry" if hidden == 1 else "entries"
            found.append(
                Problem(
                    None,
                    None,
                    None,
                    f"(and {hidden} {noun} referring to the rejected entries above)",
                )
            )
        if more:
            found.append(
                Problem(
                    None, None, None, f"(stopped after {max_problems} problems; there are more)"
                )
            )
    return found


def _refers_to(message: str, dropped: set[tuple[str, str]]) -> bool:
    """Whether a leafref/union error is about a reference to an entry already taken out."""
    reference = _REFERENCE_VALUE.search(message)
    if reference is None or not dropped:
        return False
    value = reference.group("value")
    target = _LEAFREF_TARGET.search(message)
    if target is not None:
        segs = [seg.split(":")[-1] for seg in target.group("path").split("/")]
        tables = {segs[i - 1] for i, seg in enumerate(segs) if seg.endswith("_LIST") and i}
        return any((table, value) in dropped for table in tables)
    return any(part == value for _table, part in dropped)


def _passes_plain(schema: YangSchema, config: ConfigDb) -> bool:
    """Whether the config translates without a problem, its data is valid for the plain
    models and its plain leafrefs hold (`twin.yang.plain`); False sends it to the full
    validation."""
    from twin.yang.plain import plain

    models = plain(schema.ctx, schema.yang_dir)
    if models is None:
        return False
    data = _translated(schema, config)
    if data is None:
        return False
    with _captured_libyang_log():
        return models.passes(_prune_empty(data))


def _translated(schema: YangSchema, config: ConfigDb) -> dict[str, Any] | None:
    """`_translate`'s data for a config whose tables all translate without a problem (None
    otherwise), each table translated once for the configs that hold it word for word (a
    fabric's leaves share their QUEUE, BUFFER_QUEUE, BUFFER_PG, PORT_QOS_MAP and PFC_WD
    tables): a table translates alone as it does among the others. The data shares its
    tables with other calls': do not change it."""
    if not isinstance(config, dict):
        return None
    data: dict[str, Any] = {}
    for name, table in config.items():
        made = schema.translated.get([name, table], functools.partial(_alone, schema, name, table))
        if made is None:
            return None
        for top, tables in made.items():
            data.setdefault(top, {}).update(tables)
    return data


def _alone(schema: YangSchema, name: str, table: Any) -> dict[str, Any] | None:
    """One table's YANG data, None when it has a problem."""
    tr = _translate(schema, {name: table})
    return None if tr.problems else tr.data


def _first_error(schema: YangSchema, tr: _Translation) -> tuple[str, _Location] | None:
    """Parse and validate the translated data; None if valid, else libyang's first error."""
    import libyang

    data = _prune_empty(tr.data)
    if not data:
        return None
    with _captured_libyang_log() as records:
        try:
            tree = schema.ctx.parse_data_mem(
                jsonio.dumps(data), "json", strict=True, validate_present=True
            )
        except libyang.LibyangError as exc:
            failure = str(exc)
        else:
            if tree is not None:
                tree.free()
            return None
    message, location = records[0] if records else (failure, "")
    match = _LOCATION.search(location) or _LOCATION.search(message)
    message = _LOCATION.sub("", message).rstrip(" :.") + "."
    loc = _locate(tr, match.group("path")) if match else _Location()
    reference = _REFERENCE_VALUE.search(message)
    if message.startswith("Invalid union value") and loc.entry and reference:
        if loc.fld is not None:
            node, what = loc.entry.leaves.get(loc.fld), "The field"
        else:  # a key part: find it by value
            names = [n for n in loc.entry.key_leaves if loc.entry.data.get(n) == reference[1]]
            node = loc.entry.leaves.get(names[0]) if names else None
            what = f"The key part {names[0]}" if names else ""
        if node is not None:
            message += f" {what} accepts {_describe_type(node.type())}."
    return message, loc


def translate_config_db(
    config: ConfigDb, *, yang_dir: str | Path = YANG_DIR
) -> tuple[dict[str, Any], list[str]]:
    """The YANG JSON instance data for ``config`` and the problems found while translating
    (no libyang validation of the whole tree). Useful to see what the validator checks."""
    schema = load_schema(yang_dir)
    with _LOCK:
        tr = _translate(schema, config)
    return _prune_empty(tr.data), [_format(*where, msg) for where, msg in tr.problems]
