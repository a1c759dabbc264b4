"""The mutation campaign (`bench/bench_mutations.py`) as the sample tests use it: the bench
loaded as a module (it is a script, not a package) and a generated lab's mutations."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from validators.examples import generate

REPO = Path(__file__).resolve().parent.parent


def load_bench() -> ModuleType:
    """bench/bench_mutations.py, imported."""
    spec = importlib.util.spec_from_file_location(
        "bench_mutations", REPO / "bench" / "bench_mutations.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def campaign(bench: ModuleType, lab: Path) -> tuple[Path, dict[tuple[str, str, str], Any]]:
    """examples/small.yaml generated into `lab`, and its mutations by (device, where, kind)."""
    generate(lab, REPO / "examples" / "small.yaml")
    return lab, {(m.device, m.where, m.kind): m for m in bench.surface(lab)}
