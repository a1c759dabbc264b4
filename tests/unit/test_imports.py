"""The import graph of the product code (twin, labs, traffic, validators), read with `ast`.

Files: no module imports itself through others (a cycle), counting every import: those that run
when a module is imported and those in functions or under `if TYPE_CHECKING:` too.

Layers (docs/architecture.md): base, core, run, workflows, entry points; a module imports only
its own layer and those below, but for the interfaces, in functions too (imports inside
functions are how heavy libraries stay out of the CLI's start-up, not a way round the layers).

Packages: with the documented interface edges left out, no top-level package depends on
itself through another, and nothing outside a backend's folder imports its modules (`twin
cleanup` too reaches a backend through `Backend.cleanup`). The interface edges are the modules
everything else is written against: the backend interface, registry and lifecycle (with the
lab's event log and state file) that `twin`'s scenario player, CLI and pytest plugin call,
and the validator registry and result type that `twin`'s verdict calls. The backends (`labs`)
never import a validator, not even those interfaces: what both read of a lab's configs is in
`twin.configs`.

The CLI's verbs are listed in `twin.cli.main.VERBS` (so that `twin --help` imports none of
them): the list and the modules agree.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import networkx as nx

from twin.cli import main as cli
from twin.cli import verbs

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("twin", "labs", "traffic", "validators")
INTERFACES = {
    "labs.backend",
    "labs.registry",
    "labs.events",
    "labs.state",
    "labs.lifecycle",  # who deployed a twin, one command at a time: around every backend
    "validators.registry",
    "validators.result",
}


def modules() -> dict[str, Path]:
    """Every product module by dotted name."""
    found = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def imported(path: Path, name: str, known: set[str], everywhere: bool = False) -> set[str]:
    """The product modules a module imports when it is imported (`everywhere`: anywhere in it)."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    if everywhere:
        body: list[ast.AST] = list(ast.walk(tree))
    else:
        body = [n for n in tree.body if not (isinstance(n, ast.If) and _type_checking(n))]
    out = set()
    for node in body:
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                out.add(full if full in known else base)
    return {m for m in out if m in known and m != name}


def graph(everywhere: bool = False) -> nx.DiGraph:
    """Module -> the modules it imports (`everywhere`: in functions too)."""
    found = modules()
    g = nx.DiGraph()
    g.add_nodes_from(found)
    for name, path in found.items():
        g.add_edges_from((name, m) for m in imported(path, name, set(found), everywhere))
    return g


def test_no_module_imports_itself_through_others() -> None:
    g = graph(everywhere=True)
    assert len(g) > 100
    assert list(nx.simple_cycles(g)) == []
    # issue 37's cycles, each now one way: the registry wraps backends in the lifecycle, the
    # lab directory calls its renderers, the simulator's command-line glue calls the simulator
    for above, below in [
        ("labs.registry", "labs.lifecycle"),
        ("twin.lab.directory", "twin.render.clab"),
        ("twin.cli.verbs.sim", "labs.sim.engine"),
    ]:
        assert (above, below) in g.edges


LAYERS = [
    {"twin", "twin.errors", "twin.units", "twin.version", "twin.safeio", "twin.jsonio"}
    | {"traffic"},
    {"twin.intent", "twin.design", "twin.render", "twin.model", "twin.lab", "twin.configs"}
    | {"twin.yang"},
    {"twin.scenario", "twin.verdict", "twin.outputs", "twin.telemetry", "labs", "validators"},
    {"twin.drill", "twin.change"},
    {"twin.cli", "twin.pytest_plugin"},
]
"""Base, core, run, workflows, entry points (docs/architecture.md), by top-level package and
`twin`'s packages and modules; a package's `__main__` is a program, an entry point."""


def layer(module: str) -> int:
    """The layer of a module: its unit's (`twin.lab.check`: `twin.lab`; `labs.sim.x`: `labs`)."""
    if module.endswith(".__main__"):
        return len(LAYERS) - 1
    parts = module.split(".")
    unit = ".".join(parts[:2]) if parts[0] == "twin" else parts[0]
    found = [i for i, units in enumerate(LAYERS) if unit in units]
    assert found, f"{module}: in no layer (add its package to LAYERS and the doc)"
    return found[0]


def test_modules_import_only_their_layer_and_below_but_for_the_interfaces() -> None:
    g = graph(everywhere=True)
    up = {(a, b) for a, b in g.edges if layer(b) > layer(a) and b not in INTERFACES}
    assert up == set()
    # what the layers say: the core reads no run, the workflows no command line
    assert layer("twin.lab.directory") < layer("twin.scenario.player") < layer("twin.drill.run")
    assert layer("twin.change.review") < layer("twin.cli.verbs.diff")
    assert layer("labs.sim.__main__") == layer("twin.cli.main")


def test_packages_depend_on_each_other_only_one_way_but_for_the_interfaces() -> None:
    packages = nx.DiGraph()
    for a, b in graph().edges:
        pa, pb = a.split(".")[0], b.split(".")[0]
        if pa != pb and b not in INTERFACES:
            packages.add_edge(pa, pb)
    assert list(nx.simple_cycles(packages)) == []
    # What the interfaces are for: the pipeline calls backends and validators through them.
    assert ("twin", "labs") not in packages.edges
    assert ("twin", "validators") not in packages.edges


def every_import(path: Path) -> set[str]:
    """The absolute modules a module names anywhere, in functions too."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module)
    return out


def test_backends_never_import_validators() -> None:
    named = {m: every_import(p) for m, p in modules().items() if m.split(".")[0] == "labs"}
    assert any(n.startswith("twin.configs.") for names in named.values() for n in names)
    wrong = {m: n for m, names in named.items() for n in names if n.split(".")[0] == "validators"}
    assert wrong == {}


def test_nothing_outside_a_backend_imports_its_internals() -> None:
    g = graph()
    backends = {f"labs.{d.name}" for d in (REPO / "labs").iterdir() if (d / "backend.py").exists()}
    assert {"labs.netns", "labs.fake", "labs.clab"} <= backends
    for a, b in g.edges:
        for backend in backends:
            inside = a == backend or a.startswith(backend + ".")
            assert not b.startswith(backend + ".") or inside, f"{a} imports {b}"


def test_the_verb_table_lists_every_verb_module_with_its_help() -> None:
    names = {m.name for m in pkgutil.iter_modules(verbs.__path__)}
    assert {cli.module_of(v).rpartition(".")[2] for v in cli.VERBS} == names
    for verb, text in cli.VERBS.items():
        assert text == importlib.import_module(cli.module_of(verb)).HELP, verb
