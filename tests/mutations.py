"""The mutation campaign (`bench/bench_mutations.py`) as the sample tests use it: the bench
loaded as a module (it is a script, not a package) and a generated lab's mutations, each
judged on a copy of the lab."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
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


@dataclass
class Campaign:
    """examples/small.yaml generated once and its mutations by (device, where, kind)."""

    bench: ModuleType
    lab: Path
    mutations: dict[tuple[str, str, str], Any]

    @classmethod
    def small(cls, root: Path) -> Campaign:
        bench = load_bench()
        lab = root / "pristine"
        generate(lab, REPO / "examples" / "small.yaml")
        return cls(bench, lab, {(m.device, m.where, m.kind): m for m in bench.surface(lab)})

    def judge(self, device: str, where: str, kind: str, work: Path, sim: bool) -> tuple[str, str]:
        """The mutation's impact (the bench's oracle) and what the verdict did with it."""
        mutation = self.mutations[(device, where, kind)]
        return mutation.impact, self.bench.judge(self.lab, mutation, work / "work", sim=sim)
