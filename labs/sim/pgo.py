"""The C core rebuilt with profile-guided optimisation: `python -m labs.sim.pgo`
(`scripts/setup.sh` runs it after `pip install -e .`).

GCC builds the core instrumented (`-fprofile-generate`), the reference fabric's default and
`uplink-failure` scenarios and the default on 200 servers play on it (the training: where its
branches go, which calls are hot), and GCC builds it again from those counts (`-fprofile-use`,
`-fprofile-partial-training`: what the training did not run is optimised as before, not for
size). The guided core replaces the one pip built only once the reference's default run
directory comes out of it byte for byte as out of a plain core built beside it: the compiler
changes the code's layout, never what it computes (no `-ffast-math`). The sources and flags are
pyproject.toml's (`labs.sim._core`), so this needs the repository, as an editable install has
it. Figures: docs/simulator.md, "The profile-guided build" (`bench/bench_pgo.py`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import tomllib
from collections.abc import Sequence
from importlib.util import find_spec
from pathlib import Path

from labs.sim.native import CORE_ENV
from twin.errors import TwinError

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
TRAINING = ((50, "default"), (50, "uplink-failure"), (200, "default"))
"""What the training plays: the reference intent with that many servers (50: the reference),
a scenario of examples/scenarios. The 200 servers' run fills the event queue's buckets past
what the reference's do (`csrc/eventq.c`'s `SORT_SMALL`): their code is trained too."""
UNTIMED = ("wall_s", "core_cpu_s")
"""What sim.json says of a run's cost, not of its outputs: left out of the comparison."""


class PgoError(TwinError):
    """The profile-guided build could not be made or did not compute what the plain one does."""


def extension(repo: Path = REPO) -> tuple[list[Path], list[str]]:
    """The core's sources and compile flags, as pyproject.toml gives them to setuptools."""
    path = repo / "pyproject.toml"
    try:
        modules = tomllib.loads(path.read_text())["tool"]["setuptools"]["ext-modules"]
    except (OSError, KeyError, tomllib.TOMLDecodeError) as exc:
        raise PgoError(
            f"{path}: no [tool.setuptools] ext-modules ({exc}); needs the repository"
        ) from None
    core = next((m for m in modules if m["name"] == "labs.sim._core"), None)
    if core is None:
        raise PgoError(f"{path}: ext-modules has no labs.sim._core")
    return [repo / s for s in core["sources"]], list(core.get("extra-compile-args", []))


def compile_core(out: Path, flags: Sequence[str], repo: Path = REPO) -> None:
    """Build the core as a shared library at `out` with pyproject's flags and `flags`."""
    sources, base = extension(repo)
    cc = (sysconfig.get_config_var("CC") or "gcc").split()[0]
    include = sysconfig.get_paths()["include"]
    command = [cc, "-shared", "-fPIC", *base, *flags, f"-I{include}", *map(str, sources)]
    done = subprocess.run([*command, "-o", str(out), "-lm"], capture_output=True, text=True)
    if done.returncode:
        lines = done.stderr.strip().splitlines() or ["no message"]
        said = [
            x for x in lines if not x.endswith(":") and "warning:" not in x and "note:" not in x
        ]
        first = (said or lines)[0]  # the cause, not collect2's summary after it
        raise PgoError(f"{cc} {' '.join(flags) or '(plain)'}: exit {done.returncode}: {first}")


def twin(*argv: str, core: Path | None = None) -> None:
    """`twin ARGV` in a child process, with `core` as the simulator's core (a child: an
    instrumented core writes its counts when its process ends)."""
    env = {**os.environ, CORE_ENV: str(core)} if core else None
    done = subprocess.run(
        [sys.executable, "-m", "twin.cli.main", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,  # this tree's twin
    )
    if done.returncode not in (0, 1):  # 1: a verdict that failed, still a run
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise PgoError(
            f"twin {argv[0]}{f' on {core.name}' if core else ''}: exit {done.returncode}: {last}"
        )


def play(core: Path, lab: Path, scenario: str, out: Path) -> None:
    """The lab's `scenario` (examples/scenarios) on the simulator with `core`, into `out`."""
    path = EXAMPLES / "scenarios" / f"{scenario}.yaml"
    twin(
        "run", str(lab), str(path), "--backend", "sim", "--no-static", "--out", str(out), core=core
    )


def differing(a: Path, b: Path) -> list[str]:
    """The files of two run directories that differ (sim.json's `UNTIMED` aside), by path."""
    names = {p.relative_to(a) for p in a.rglob("*") if p.is_file()}
    names |= {p.relative_to(b) for p in b.rglob("*") if p.is_file()}
    found = []
    for name in sorted(names):
        x, y = a / name, b / name
        if not (x.is_file() and y.is_file()):
            found.append(str(name))
        elif name == Path("sim.json"):
            timed = [json.loads(p.read_text()) for p in (x, y)]
            for data in timed:
                for key in UNTIMED:
                    data.pop(key, None)
            if timed[0] != timed[1]:
                found.append(str(name))
        elif x.read_bytes() != y.read_bytes():
            found.append(str(name))
    return found


def installed() -> Path:
    """Where the core pip built is."""
    spec = find_spec("labs.sim._core")
    if spec is None or spec.origin is None:
        raise PgoError("labs.sim._core is not built: run `pip install -e .` first")
    return Path(spec.origin)


def lab(servers: int, work: Path) -> Path:
    """The reference intent with `servers` servers, generated in `work` (once)."""
    import yaml

    path = work / f"lab{servers}"
    if not path.exists():
        intent = yaml.safe_load((EXAMPLES / "reference.yaml").read_text())
        intent["servers"]["count"] = servers
        fabric = work / f"fabric{servers}.yaml"
        fabric.write_text(yaml.safe_dump(intent))
        twin("generate", str(fabric), "-o", str(path))
    return path


def build(
    work: Path, training: Sequence[tuple[int, str]] = TRAINING
) -> tuple[Path, Path, list[str]]:
    """The plain core and the profile-guided one, built in `work` and checked to compute the
    same on the training's first run; what was done, a line a step."""
    profile, plain, guided = work / "profile", work / "plain.so", work / "guided.so"
    work.mkdir(parents=True, exist_ok=True)
    compile_core(plain, [])
    compile_core(guided, [f"-fprofile-generate={profile}", "-fprofile-update=single"])
    for servers, scenario in training:
        play(guided, lab(servers, work), scenario, work / f"train-{servers}-{scenario}")
    counts = sorted(p.name for p in profile.rglob("*.gcda"))
    if not counts:
        raise PgoError(f"the training wrote no profile under {profile}")
    # built again at the same path: the counts are named after it
    compile_core(guided, [f"-fprofile-use={profile}", "-fprofile-partial-training"])
    (servers, scenario), runs = training[0], [work / "plain", work / "guided"]
    for core, out in zip((plain, guided), runs, strict=True):
        play(core, lab(servers, work), scenario, out)
    wrong = differing(*runs)
    if wrong:
        raise PgoError(
            f"the guided core's {servers}-server {scenario} run differs: {', '.join(wrong)}"
        )
    return (
        plain,
        guided,
        [
            f"trained on {', '.join(f'{n} servers {s}' for n, s in training)}: "
            f"{len(counts)} profiles",
            f"checked: the {servers}-server {scenario} run directory the same as the plain core's",
        ],
    )


def install(core: Path, target: Path) -> None:
    """Put `core` at `target`: a new file in its directory, renamed over it."""
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=".pgo-", suffix=".so")
    with os.fdopen(fd, "wb") as copy, core.open("rb") as built:
        shutil.copyfileobj(built, copy)
    os.chmod(name, 0o755)
    os.replace(name, target)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m labs.sim.pgo`: rebuild the installed core, guided by a training run."""
    parser = argparse.ArgumentParser(prog="python -m labs.sim.pgo", description=__doc__)
    parser.parse_args(argv)
    start = time.monotonic()
    try:
        target = installed()
        with tempfile.TemporaryDirectory(prefix="twin-pgo-") as work:
            _, guided, steps = build(Path(work))
            install(guided, target)
        for step in steps:
            print(f"pgo: {step}")
        print(f"pgo: installed {target} ({time.monotonic() - start:.0f} s)")
    except PgoError as exc:
        print(f"pgo: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
