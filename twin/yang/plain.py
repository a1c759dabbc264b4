"""The SONiC models with their plain leafrefs as strings, to pass a valid config faster.

libyang checks a leafref by evaluating its path as XPath over the data tree, for every value:
on a 1,024-server fabric's switches (about 140 KB of YANG JSON each) that is 58 % of a
config's parse and validation. A *plain* leafref (an absolute path without predicates, an
instance required) asks only that its value be one of its target leaf's values; that is a set
lookup here. So a config is first parsed against a second context whose plain leafrefs are
`type string`, and its plain leafrefs' values looked up among their targets' (`Plain.holds`);
in a union, a value no target holds must be a string that one of the union's string or
enumeration members takes (asked of the models, `Plain._other`). A config passes only when
the parse and every lookup succeed. Anything else, a failure of either or a context that
differs from the models in any other way, goes to `twin.yang.check`'s full validation, which
alone finds and words the problems; so this can make a valid config pass faster, never an
invalid one pass.

Why the two agree on a valid config: the plain context differs from the models only in the
type of the leaves listed (`Plain.references`, checked at load by comparing every leaf of both
contexts, a union's members one by one); a value equal to one of its target's values is, like
it, of the target's type (a target that is itself a plain leafref was checked against its own
target the same way), and a union takes a value one of its members takes; no model uses
`deref()`, the one XPath function that reads a leafref's type (`plain` checks).

The parse and the lookups are made a model at a time (`Plain.passes`): a model whose data,
with what its rules and plain leafrefs read of the others (`twin.yang.reads`), passed in an
earlier config is not judged again; a fabric's leaves share their QoS tables word for word.
"""

from __future__ import annotations

import functools
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from twin import jsonio
from twin.yang import reads

if TYPE_CHECKING:  # pragma: no cover
    import libyang

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_LEAFREF = re.compile(r"type\s+leafref\s*\{(?P<body>[^{}]*)\}")
_PREFIX = re.compile(r"""^\s*prefix\s+["']?([\w.-]+)""", re.MULTILINE)
_IMPORT = re.compile(r"""\bimport\s+([\w.-]+)\s*\{[^}]*?\bprefix\s+["']?([\w.-]+)""")
_PLAIN_PATH = re.compile(
    r"""^\s*path\s+(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)'|(?P<bare>[^\s;"']+))\s*;"""
    r"""(?:\s*require-instance\s+["']?true["']?\s*;)?\s*$"""
)


@dataclass(frozen=True)
class Reference:
    """A leaf of plain leafrefs: where its values are and where its targets' are (one, or a
    union's plain leafref members' in order), as JSON member names from the module's top
    container (`("sonic-queue:sonic-queue", "QUEUE", "QUEUE_LIST", "scheduler")`)."""

    source: tuple[str, ...]
    targets: tuple[tuple[str, ...], ...]
    union: str | None = None
    """A union's schema path, to ask the models of a value none of its targets holds."""


@dataclass(frozen=True)
class Plain:
    """The context with the plain leafrefs as strings, those leafrefs, and what tells which
    strings a union's other members accept: the models' context and a data tree (`probe`)
    that holds none of the unions' targets."""

    ctx: libyang.Context
    references: tuple[Reference, ...]
    models: libyang.Context
    probe: libyang.DNode
    reads: reads.Reads | None
    """What each model's rules read of the others (None: models that augment or deviate
    others, which `twin.yang.reads` does not follow)."""
    accepted: dict[tuple[str, str], bool] = field(default_factory=dict, compare=False)
    passed: set[bytes] = field(default_factory=set, compare=False)
    """The `Reads.key` of each model's data that passed, in any config."""

    def passes(self, data: dict[str, Any]) -> bool:
        """Whether `data` (YANG JSON) parses and validates in this context and its plain
        leafrefs hold (`holds`). What passed before passes again: only the models whose
        data, with what their rules and plain leafrefs read, no config passed with are
        looked up and parsed, each with the whole data of the models its rules read."""
        keys = self._keys(data)
        if keys is None:
            return self.holds(data, set(data)) and self._parses(data)
        new = {top: k for top, k in keys.items() if k not in self.passed}
        if not new:
            return True
        assert self.reads is not None  # keys are made from them
        wanted = set(new).union(*(self.reads.needs.get(top, ()) for top in new))
        if not (
            self.holds(data, set(new))
            and self._parses({t: v for t, v in data.items() if t in wanted})
        ):
            return False
        if len(self.passed) > PASSED:
            self.passed.clear()
        self.passed.update(new.values())
        return True

    def _keys(self, data: dict[str, Any]) -> dict[str, bytes] | None:
        """Each model's `Reads.key` in `data`; None when a model's cannot be made (or there
        are no reads): the data is then judged whole."""
        keys: dict[str, bytes] = {}
        for top in data:
            key = self.reads.key(data, top) if self.reads is not None else None
            if key is None:
                return None
            keys[top] = key
        return keys

    def _parses(self, data: dict[str, Any]) -> bool:
        """Whether `data` parses strictly and validates in this context."""
        import libyang

        try:
            tree = self.ctx.parse_data_mem(
                jsonio.dumps(data), "json", strict=True, validate_present=True
            )
        except libyang.LibyangError:
            return False
        if tree is not None:
            tree.free()
        return True

    def holds(self, data: dict[str, Any], tops: set[str]) -> bool:
        """Whether every plain leafref's value in `data` (YANG JSON) under the `tops` is one
        of its target's, or, in a union, a string its other members accept."""
        found: dict[tuple[str, ...], set[Any]] = {}
        for ref in self.references:
            if ref.source[0] not in tops:
                continue
            values = set(reads.values(data, ref.source))
            for target in ref.targets:
                if not values:
                    break
                if target not in found:
                    found[target] = set(reads.values(data, target))
                values -= found[target]
            if values and not all(self._other(ref.union, v) for v in values):
                return False
        return True

    def _other(self, union: str | None, value: Any) -> bool:
        """Whether a string or enumeration member of a union accepts `value` (libyang's
        `lyd_value_validate` in the models, against `probe`, where none of its leafrefs has
        a target); such a member takes a JSON string as the JSON parse gives it."""
        if union is None or not isinstance(value, str):
            return False
        key = (union, value)
        if key not in self.accepted:
            from _libyang import ffi, lib

            node = next(iter(self.models.find_path(union)))
            raw = value.encode()
            real = ffi.new("struct lysc_type **")
            code = lib.lyd_value_validate(
                self.models.cdata, node.cdata, raw, len(raw), self.probe.cdata, real, ffi.NULL
            )
            strings = (lib.LY_TYPE_STRING, lib.LY_TYPE_ENUM)
            self.accepted[key] = code == lib.LY_SUCCESS and real[0].basetype in strings
        return self.accepted[key]


def plain_text(text: str) -> str:
    """A module's text with its plain leafrefs (a path and nothing else in their block but
    comments and `require-instance true`, absolute, without predicates) replaced."""
    if "leafref" not in text:
        return text
    out: list[str] = []
    last = 0
    for match in _LEAFREF.finditer(text):
        path = _PLAIN_PATH.match(_COMMENT.sub(" ", match.group("body")))
        if path is None:
            continue
        target = path.group("dq") or path.group("sq") or path.group("bare") or ""
        if not target.startswith("/") or "[" in target or ".." in target:
            continue
        out += [text[last : match.start()], "type string;"]
        last = match.end()
    return "".join(out) + text[last:]


PASSED = 1 << 16
"""How many passed models' keys `Plain.passes` keeps (16 bytes each; forgotten all at once)."""

PROBE = ("sonic-device_metadata:sonic-device_metadata", "DEVICE_METADATA", "localhost", "hostname")
"""The one leaf of `Plain.probe` (no union's leafref targets it: `plain` checks)."""


@functools.cache
def plain(models: libyang.Context, yang_dir: Path) -> Plain | None:
    """The plain context for the models in `yang_dir` (loaded in `models`; once per
    process), or None when it would differ from them other than in its plain leafrefs, or a
    model uses `deref()`."""
    import libyang

    texts = {p.stem: p.read_text() for p in sorted(yang_dir.glob("*.yang"))}
    if any("deref(" in t for t in texts.values()):
        return None
    work = Path(tempfile.mkdtemp(prefix="twin-yang-"))  # private (0700), removed once loaded
    try:
        for name, text in texts.items():
            (work / f"{name}.yang").write_text(plain_text(text))
        ctx = libyang.Context(str(work))
        for name in texts:
            ctx.load_module(name)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    references = _references(models, ctx, texts)
    if references is None or any(PROBE in r.targets for r in references):
        return None
    probe = models.create_data_path("/" + "/".join(PROBE), value="probe")
    if probe is None:
        return None
    return Plain(ctx, tuple(references), models, probe, _reads(ctx, texts, references))


def _reads(
    ctx: libyang.Context, texts: dict[str, str], references: list[Reference]
) -> reads.Reads | None:
    """What the models' rules and plain leafrefs read of each other, unless a model augments
    or deviates another."""
    bare = {name: _COMMENT.sub(" ", text) for name, text in texts.items()}
    if any(re.search(r"\b(augment|deviation)\s", text) for text in bare.values()):
        return None
    prefixes: dict[str, set[str]] = {}
    for name, text in bare.items():
        own = _PREFIX.search(text)
        if own is not None:
            prefixes.setdefault(own.group(1), set()).add(name)
        for module, prefix in _IMPORT.findall(text):
            prefixes.setdefault(prefix, set()).add(module)
    tops = {
        str(m.name()): f"{m.name()}:{top.name()}"
        for m in ctx
        if m.implemented() and (top := next(iter(m.children()), None)) is not None
    }
    found = reads.reads(ctx, tops, prefixes)
    return found.looking_up((r.source, t) for r in references for t in r.targets)


def _leaves(ctx: libyang.Context) -> dict[str, libyang.SLeaf | libyang.SLeafList]:
    """Every leaf and leaf-list of the context's modules, by schema path."""
    import libyang

    def walk(node: libyang.SNode) -> Iterator[libyang.SNode]:
        yield node
        if isinstance(node, (libyang.SContainer, libyang.SList)):  # choices and cases: flattened
            for child in node.children():
                yield from walk(child)

    return {
        n.schema_path(): n
        for module in ctx
        for top in module.children()
        for n in walk(top)
        if isinstance(n, (libyang.SLeaf, libyang.SLeafList))
    }


def _references(
    models: libyang.Context, plained: libyang.Context, texts: dict[str, str]
) -> list[Reference] | None:
    """The leaves whose type differs between the two contexts, each a plain leafref in
    `models` and a string in `plained`; None when another leaf differs or one is missing."""
    import libyang

    theirs, ours = _leaves(models), _leaves(plained)
    if theirs.keys() != ours.keys():
        return None
    found: list[Reference] = []
    for path, node in theirs.items():
        was, now = node.type(), ours[path].type()
        if _signature(was) == _signature(now):
            continue
        olds, news = list(was.union_types()), list(now.union_types())
        if len(olds) != len(news) or (olds and _signature(was)[:2] != _signature(now)[:2]):
            return None
        pairs = list(zip(olds, news, strict=True)) or [(was, now)]
        targets = []
        for old, new in pairs:
            if _signature(old) == _signature(new):
                continue
            if old.base() != libyang.Type.LEAFREF or new.base() != libyang.Type.STRING:
                return None
            target = _target(models, node.module(), old, texts)
            if target is None:
                return None
            targets.append(target)
        union = str(node.schema_path()) if olds else None
        found.append(Reference(_json_path(node.data_path()), tuple(targets), union))
    return found


def _signature(t: libyang.Type) -> tuple[Any, ...]:
    """What of a type the comparison reads: its base and name and, for a union, its
    members' bases (a union's members are compared one by one after)."""
    return (t.base(), t.name(), tuple(u.base() for u in t.union_types()))


def _target(
    ctx: libyang.Context, own: libyang.Module, t: libyang.Type, texts: dict[str, str]
) -> tuple[str, ...] | None:
    """The JSON path of a plain leafref's target: its prefixes resolved as the leaf's module
    imports them, else as the one module that declares that prefix; None when that is not
    one leaf of one module of the leafref's own base type, or no instance is required."""
    import libyang
    from _libyang import ffi

    if not ffi.cast("struct lysc_type_leafref *", t.cdata).require_instance:
        return None
    local = {str(own.prefix()): str(own.name())}
    local.update((p, m) for m, p in _IMPORT.findall(texts.get(str(own.name()), "")))
    declared = _declared(ctx)
    steps = [step.split(":") for step in (t.leafref_path() or "").strip("/").split("/")]
    names = set()
    for step in steps:
        prefix = step[0] if len(step) == 2 else str(own.prefix())
        only = declared.get(prefix, set())
        names.add(local.get(prefix) or (next(iter(only)) if len(only) == 1 else ""))
    if len(names) != 1 or "" in names:
        return None
    name = names.pop()
    path = "/" + "/".join(s[-1] if i else f"{name}:{s[-1]}" for i, s in enumerate(steps))
    try:
        found = next(iter(ctx.find_path(path)), None)
    except libyang.LibyangError:
        return None
    if not isinstance(found, (libyang.SLeaf, libyang.SLeafList)):
        return None
    real = t.leafref_type()
    if found.type().base() != (real.base() if real is not None else None):
        return None
    return _json_path(found.data_path())


@functools.cache
def _declared(ctx: libyang.Context) -> dict[str, set[str]]:
    """The modules that declare each prefix."""
    out: dict[str, set[str]] = {}
    for module in ctx:
        out.setdefault(str(module.prefix()), set()).add(str(module.name()))
    return out


def _json_path(data_path: str) -> tuple[str, ...]:
    """A data path's steps without list predicates (`/m:top/T/T_LIST[k='%s']/x` -> (`m:top`,
    `T`, `T_LIST`, `x`))."""
    return tuple(re.sub(r"\[[^\]]*\]", "", data_path).strip("/").split("/"))
