"""What each SONiC model's rules read of the other models' data, so that a valid config can be
validated a model at a time and a model's data once for all the configs that hold it with the
same values read (`Reads.key`).

A fabric's switches hold the same QUEUE, BUFFER_QUEUE, BUFFER_PG, PORT_QOS_MAP and PFC_WD
tables, word for word, on every leaf of one shape (4 distinct QUEUE tables among 174 switches
at 1,024 servers, 70 % of a config's YANG JSON): `twin.yang.plain.Plain.passes` parses each
such model's data once.

A rule is a `must`, a `when` or a leafref's path (the plain leafrefs are strings in the plain
context, looked up apart: `twin.yang.plain`). In YANG's XPath a name without a prefix is of
the rule's own module, so a rule reads another model only through a prefixed name; an
absolute path of prefixed names (`/sdm:sonic-device_metadata/sdm:DEVICE_METADATA/...`) names
its model by its first step (each model's top container is its own) and what it reads: the
data at that path and below it (below the step of a predicate, whose names are of that
model's list entry). Whether a model holds data at all counts too (its non-presence
containers and defaults exist when it does). A read through a node with a `when` (whose
presence may depend on more of its model's data) reads the whole model, and what that
model's rules read, whole. A rule with a foreign prefix anywhere else cannot be bounded
(`Rule.reads` None): a config where it applies is validated whole.

A model's data is parsed with the data of every model its rules may read (`Reads.needs`):
the values they read are then the config's, defaults and `when`s included.

A rule of a node in a list applies only when that list has entries (`Rule.within`): the VOQ
lists' rules, which read DEVICE_METADATA's hostname, apply to no leaf's QUEUE table.

A *free* leaf's value counts in a key only as being there (`Reads.free`): a leaf no rule of
any model names (none free when a rule reads a node without naming it: `*`, `node()`, a
`..` alone, a container's or list's `.`), without a `must` or `when` of its own, not a list's
key, in no list with a `unique`, of a type that is no leafref, instance-identifier or union,
nor a plain leafref or a target of one. Its value is checked against its type when the config
is translated (a value the type refuses sends the config to the full validation), and nothing
else reads it, so any value the type takes gives the parse the same outcome: the leaves' PORT
tables, which differ only in their ports' descriptions (half of a leaf's per-switch data at
1,024 servers), are then one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from twin import jsonio

if TYPE_CHECKING:  # pragma: no cover
    import libyang

_NAME = r"[A-Za-z_][\w.-]*"
_PREFIXED = re.compile(rf"({_NAME}):{_NAME}")
_CHAIN = re.compile(rf"(?<![\w.)\]/])(?:/{_NAME}:{_NAME})+")
_WORD = re.compile(_NAME)
_ANY = re.compile(r"(?:^|[/(\[@:,])\s*\*|\bnode\s*\(")
_LITERAL = re.compile(r"'[^']*'|\"[^\"]*\"")
_PARENT = re.compile(r"(?<![\w.])\.\.(?![\w./])")
_SELF = re.compile(r"(?<![\w.])\.\.?(?![\w./])")


@dataclass(frozen=True, order=True)
class Read:
    """What a rule reads of another model: the data at `path` (JSON member names, the first
    its top container's), whole."""

    path: tuple[str, ...]


@dataclass(frozen=True)
class Rule:
    """The reads of a model's rules on the nodes under one list (`within`, its JSON path;
    () for nodes in no list); None when they cannot be bounded."""

    within: tuple[str, ...]
    reads: frozenset[Read] | None


@dataclass(frozen=True)
class Reads:
    """Per model's top member (`sonic-queue:sonic-queue`), its rules that read other models
    (`rules`) and the models they may read, and those theirs, and so on (`needs`)."""

    rules: dict[str, tuple[Rule, ...]]
    needs: dict[str, frozenset[str]]
    free: dict[str, Tree]
    """Per model's top member, its free leaves as a tree of JSON member names (`Tree`)."""

    def key(self, data: dict[str, Any], top: str) -> bytes | None:
        """A digest of a model's data in `data` (YANG JSON) and of the other data its rules
        read there: equal digests, equal results of its rules. None when a rule that applies
        cannot be bounded."""
        read: set[Read] = set()
        for rule in self.rules.get(top, ()):
            if rule.within and not values(data, rule.within):
                continue
            if rule.reads is None:
                return None
            read |= rule.reads
        seen = [[r.path, r.path[0] in data, values(data, r.path)] for r in sorted(read)]
        return jsonio.digest([top, blanked(data[top], self.free.get(top)), seen])

    def looking_up(self, lookups: Iterable[tuple[tuple[str, ...], tuple[str, ...]]]) -> Reads:
        """These reads, and for each (source, target) of `lookups` the source's model reading
        the values at the target as they are in the JSON (a plain leafref and its target's
        leaf, `twin.yang.plain`), neither of them free; the models a parse needs stay as they
        were."""
        more: dict[str, set[Read]] = {}
        kept: set[tuple[str, ...]] = set()
        for source, target in lookups:
            kept |= {source, target}
            if target[0] != source[0]:
                more.setdefault(source[0], set()).add(Read(target))
        rules = dict(self.rules)
        for top, found in more.items():
            rules[top] = (*rules.get(top, ()), Rule((), frozenset(found)))
        free = {top: _pruned(tree, (top,), kept) for top, tree in self.free.items()}
        return Reads(rules, self.needs, {top: tree for top, tree in free.items() if tree})


Tree = dict[str, "Tree | None"]
"""JSON member names below a node, each a free leaf (None) or a tree of its own."""

FREE = "\x00free"
"""What a free leaf's value becomes in a key."""


def blanked(node: Any, tree: Tree | None) -> Any:
    """`node` with the value of each free leaf of `tree` (through lists) as `FREE`; the
    parts without one are `node`'s own objects, not copies.

    >>> blanked({"P": [{"name": "e0", "d": "to a"}, {"name": "e1"}]}, {"P": {"d": None}})
    {'P': [{'name': 'e0', 'd': '\\x00free'}, {'name': 'e1'}]}
    """
    if tree is None:
        return node
    if isinstance(node, list):
        return [blanked(n, tree) for n in node]
    if not isinstance(node, dict) or tree.keys().isdisjoint(node):
        return node
    out = dict(node)
    for name, below in tree.items():
        if name in out:
            out[name] = FREE if below is None else blanked(out[name], below)
    return out


def _pruned(tree: Tree, path: tuple[str, ...], kept: set[tuple[str, ...]]) -> Tree:
    """`tree` (at `path`) without the leaves at the `kept` paths."""
    out: Tree = {}
    for name, below in tree.items():
        here = (*path, name)
        if below is None:
            if here not in kept:
                out[name] = None
        elif sub := _pruned(below, here, kept):
            out[name] = sub
    return out


def values(node: Any, path: tuple[str, ...]) -> list[Any]:
    """What is at `path` under `node` (through lists, and a leaf-list's members), in document
    order: a list per level of the walk, not a generator per node (a large fabric's configs
    hold tens of thousands of nodes each; CHANGELOG has the figures)."""
    level = _flat([node])
    for name in path:
        level = _flat([n[name] for n in level if isinstance(n, dict) and name in n])
    return level


def _flat(nodes: list[Any]) -> list[Any]:
    """`nodes` with every list among them replaced by its members (and theirs), in order."""
    for n in nodes:
        if isinstance(n, list):
            break
    else:
        return nodes
    out: list[Any] = []
    for n in nodes:
        if isinstance(n, list):
            out += _flat(n)
        else:
            out.append(n)
    return out


def reads(ctx: libyang.Context, tops: dict[str, str], prefixes: dict[str, set[str]]) -> Reads:
    """What the rules of the context's models (`tops`: model name to JSON top member) read
    of each other; `prefixes`: the models each prefix may name in any model's text (its own
    prefix, and what imports it under that prefix), for a rule's own names."""
    by_name = {top.split(":", 1)[1]: top for top in tops.values()}
    rules: dict[str, tuple[Rule, ...]] = {}
    named: set[str] = set()  # every name in any rule's text
    candidates: dict[str, list[tuple[str, ...]]] = {}  # per top, the leaves free but for names
    for module in ctx:
        name = str(module.name())
        if not module.implemented() or name not in tops:
            continue
        top, own = tops[name], str(module.prefix())
        own = own if prefixes.get(own) == {name} else ""
        found: dict[tuple[str, ...], set[Read] | None] = {}
        first = next(iter(module.children()), None)
        for c, within, path in _nodes(first.cdata, (), ()) if first is not None else ():
            if _unread(c):
                candidates.setdefault(top, []).append(path)
            for text in _rules(ctx, c):
                named.update(["*"] if _unnamed(text, c) else _WORD.findall(text))
                got = _read(ctx, text, own, top, by_name)
                was = found.setdefault(within, set())
                found[within] = None if was is None or got is None else was | got
        rules[top] = tuple(
            Rule(w, None if r is None else frozenset(r)) for w, r in found.items() if r != set()
        )
    needs = {top: _needs(rules, top) for top in tops.values()}
    widened = {top: tuple(_widened(r, rules, needs) for r in rs) for top, rs in rules.items()}
    free: dict[str, Tree] = {}
    for top, paths in candidates.items() if "*" not in named else ():
        for path in paths:
            if path[-1] not in named:
                branch = free.setdefault(top, {})
                for name in path[1:-1]:
                    branch = cast(Tree, branch.setdefault(name, {}))
                branch[path[-1]] = None
    return Reads(widened, needs, free)


def _widened(
    rule: Rule, rules: dict[str, tuple[Rule, ...]], needs: dict[str, frozenset[str]]
) -> Rule:
    """A rule that reads a whole model reads what that model's rules read too, whole (they
    may decide which of its nodes are there); None if one of those cannot be bounded."""
    if rule.reads is None:
        return rule
    whole = {r.path[0] for r in rule.reads if len(r.path) == 1}
    more = {m for w in whole for m in needs[w]}
    if any(r.reads is None for m in whole | more for r in rules.get(m, ())):
        return Rule(rule.within, None)
    return Rule(rule.within, rule.reads | {Read((m,)) for m in more})


def _nodes(
    first: Any, path: tuple[str, ...], within: tuple[str, ...]
) -> Iterator[tuple[Any, tuple[str, ...], tuple[str, ...]]]:
    """Each schema node (`lysc_node`) from `first` on among its siblings and below, with the
    JSON path of the outermost list holding it (itself if it is one; () if none) and its own
    JSON path; `path`: the JSON path of their parent (choices and cases are not in it; ()
    for top nodes)."""
    from _libyang import ffi, lib

    c = first
    while c != ffi.NULL:
        here, name = path, ffi.string(c.name).decode()
        if not path:  # a top node: its JSON member is qualified by its module
            here = (f"{ffi.string(c.module.name).decode()}:{name}",)
        elif c.nodetype not in (lib.LYS_CHOICE, lib.LYS_CASE):
            here = (*path, name)
        inside = within or (here if c.nodetype == lib.LYS_LIST else ())
        yield c, inside, here
        yield from _nodes(lib.lysc_node_child(c), here, inside)
        c = c.next


def _unnamed(text: str, c: Any) -> bool:
    """Whether a rule of schema node `c` reads a node without naming it: `*`, `node()`, or
    outside predicates and literals a `..` alone (its parent's whole text) or, on a node that
    is no leaf, a `.` alone."""
    from _libyang import lib

    if _ANY.search(text):
        return True
    bare, depth = [], 0
    for ch in _LITERAL.sub("''", text):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        bare.append(ch if depth == 0 and ch != "]" else " ")
    leaf = c.nodetype in (lib.LYS_LEAF, lib.LYS_LEAFLIST)
    return (_PARENT if leaf else _SELF).search("".join(bare)) is not None


def _unread(c: Any) -> bool:
    """Whether a schema node is a leaf that may be free but for the names of the rules: no
    key, no `must` or `when` of its own, in no list with a `unique`, of a type that is no
    leafref, instance-identifier or union."""
    from _libyang import ffi, lib

    if c.nodetype != lib.LYS_LEAF or c.flags & lib.LYS_KEY:
        return False
    if _array(lib.lysc_node_musts(c)) or _array(lib.lysc_node_when(c)):
        return False
    kind = ffi.cast("struct lysc_node_leaf *", c).type.basetype
    if kind in (lib.LY_TYPE_LEAFREF, lib.LY_TYPE_INST, lib.LY_TYPE_UNION):
        return False
    above = c.parent
    while above != ffi.NULL:
        if above.nodetype == lib.LYS_LIST and ffi.cast("struct lysc_node_list *", above).uniques:
            return False
        above = above.parent
    return True


def _rules(ctx: libyang.Context, c: Any) -> list[str]:
    """The XPath of a schema node's `must`s, `when`s (its own and those it inherits) and
    leafrefs (a union's members too)."""
    import libyang
    from _libyang import ffi, lib

    found = [ffi.string(lib.lyxp_get_expr(m.cond)).decode() for m in _array(lib.lysc_node_musts(c))]
    found += [ffi.string(lib.lyxp_get_expr(w.cond)).decode() for w in _array(lib.lysc_node_when(c))]
    node = libyang.SNode.new(ctx, c) if c.nodetype in (lib.LYS_LEAF, lib.LYS_LEAFLIST) else None
    if isinstance(node, (libyang.SLeaf, libyang.SLeafList)):
        t = node.type()
        for member in list(t.union_types()) or [t]:
            if member.base() == libyang.Type.LEAFREF:
                found.append(member.leafref_path() or "")
    return found


def _array(cdata: Any) -> list[Any]:
    """The items of one of libyang's sized arrays (its count in the word before it)."""
    from _libyang import ffi

    return [] if cdata == ffi.NULL else [cdata[i] for i in range(ffi.cast("uint64_t *", cdata)[-1])]


def _read(
    ctx: libyang.Context, text: str, own: str, top: str, by_name: dict[str, str]
) -> set[Read] | None:
    """What a rule of model `top` reads of other models; None when that cannot be bounded: a
    name with a prefix not `own` outside an absolute path of prefixed names (and what follows
    it: its predicates, further steps), or a path's first step no model's top. A read
    through a node with a `when` (whose presence may depend on more of its model) reads the
    whole model."""
    found: set[Read] = set()
    covered: list[tuple[int, int]] = []
    for chain in _CHAIN.finditer(text):
        steps = tuple(step.split(":")[1] for step in chain.group(0)[1:].split("/"))
        model = by_name.get(steps[0])
        if model is None:
            return None
        end = _beyond(text, chain.end())
        if end < 0:
            return None
        covered.append((chain.start(), end))
        if model != top:
            path = (model, *steps[1:])
            found.add(Read(path if _bounded(ctx, path) else (model,)))
    for name in _PREFIXED.finditer(text):
        if name.group(1) != own and not any(a <= name.start() < b for a, b in covered):
            return None
    return found


_STEP = re.compile(rf"/{_NAME}:{_NAME}")


def _beyond(text: str, at: int) -> int:
    """Where the predicates and further prefixed steps after a path's prefixed steps end
    (what they read is below the path, read whole); -1 for an unclosed predicate."""
    while at < len(text):
        if text[at] == "[":
            depth = 0
            for i in range(at, len(text)):
                depth += {"[": 1, "]": -1}.get(text[i], 0)
                if depth == 0:
                    break
            else:
                return -1
            at = i + 1
        elif step := _STEP.match(text, at):
            at = step.end()
        else:
            break
    return at


def _bounded(ctx: libyang.Context, path: tuple[str, ...]) -> bool:
    """Whether the data a path reads (there and below) is as the JSON holds it: no node on
    it, above it or below it has a `when`."""
    import libyang
    from _libyang import ffi, lib

    model, top = path[0].split(":", 1)
    try:
        node = next(iter(ctx.find_path("/" + "/".join((f"{model}:{top}", *path[1:])))), None)
    except libyang.LibyangError:
        return False
    if node is None:
        return False
    above = node.cdata
    while above != ffi.NULL:
        if lib.lysc_node_when(above) != ffi.NULL:
            return False
        above = above.parent
    below = _nodes(lib.lysc_node_child(node.cdata), path, ())
    return all(lib.lysc_node_when(n) == ffi.NULL for n, _, _ in below)


def _needs(rules: dict[str, tuple[Rule, ...]], top: str) -> frozenset[str]:
    """The models `top`'s rules read, and those theirs read, and so on."""
    seen, todo = {top}, [top]
    while todo:
        for rule in rules.get(todo.pop(), ()):
            for r in rule.reads or ():
                if r.path[0] not in seen:
                    seen.add(r.path[0])
                    todo.append(r.path[0])
    return frozenset(seen - {top})
