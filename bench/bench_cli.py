"""Wall time of the `twin` command against the same work done in-process.

    .venv/bin/python bench/bench_cli.py                  # --help and generate
    sudo .venv/bin/python bench/bench_cli.py --deploy    # and deploy + destroy of the reference

Each figure is the best of `--repeat` runs (3 by default):

- `twin --help` as a command (goal < 0.3 s on an idle 2-core machine);
- `twin generate examples/reference.yaml -o DIR` as a command (goal < 0.6 s), beside
  `labdir.generate` in this process;
- `twin deploy` of the reference fabric on the netns backend as a command, beside the same
  call in this process on a freshly opened lab directory (goal: within 1 s of it); `twin
  destroy` likewise. The lab gets a name of the bench's own (`bench-<hex>`).

Exit status 1 if a goal is missed.
"""

from __future__ import annotations

import argparse
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
REFERENCE = REPO / "examples" / "reference.yaml"
TWIN = [sys.executable, "-m", "twin.cli.main"]


def best(repeat: int, work: Callable[[], object]) -> float:
    """The shortest wall time of `repeat` runs of `work`."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def command(*args: str) -> Callable[[], object]:
    """Run `twin ARGS` in a new process; fail loudly when it fails."""

    def run() -> object:
        return subprocess.run([*TWIN, *args], check=True, capture_output=True, text=True)

    return run


def reference(tmp: Path) -> Path:
    """The reference intent under a lab name of the bench's own."""
    fabric = yaml.safe_load(REFERENCE.read_text())
    fabric["name"] = f"bench-{secrets.token_hex(3)}"
    source = tmp / "reference.yaml"
    source.write_text(yaml.safe_dump(fabric))
    return source


def deploys(repeat: int, lab_dir: Path) -> list[tuple[str, float, float | None, float]]:
    """Deploy and destroy as commands and in-process, each timed on its own."""
    from labs import registry
    from twin.lab.directory import Lab

    netns = registry.get("netns")
    times: dict[str, list[float]] = {}

    def timed(key: str, work: Callable[[], object]) -> None:
        start = time.perf_counter()
        work()
        times.setdefault(key, []).append(time.perf_counter() - start)

    for _ in range(repeat):
        timed("deploy_in", lambda: netns.deploy(Lab.open(lab_dir), lambda _: None))
        timed("destroy_in", lambda: netns.destroy(Lab.open(lab_dir)))
        timed("deploy_cmd", command("deploy", str(lab_dir)))
        timed("destroy_cmd", command("destroy", str(lab_dir)))
    best_of = {k: min(v) for k, v in times.items()}
    return [
        ("twin deploy", best_of["deploy_cmd"], best_of["deploy_in"], best_of["deploy_in"] + 1.0),
        (
            "twin destroy",
            best_of["destroy_cmd"],
            best_of["destroy_in"],
            best_of["destroy_in"] + 1.0,
        ),
    ]


def main() -> int:
    """Print the figures beside their goals."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--deploy", action="store_true", help="also deploy (root and FRR)")
    args = parser.parse_args()
    from twin.intent import fabric as intent
    from twin.lab import directory as labdir

    missed = False
    with tempfile.TemporaryDirectory() as tmp:
        source = reference(Path(tmp))
        lab_dir = Path(tmp) / "lab"
        help_s = best(args.repeat, command("--help"))
        gen_cmd = best(args.repeat, command("generate", str(source), "-o", str(lab_dir), "--force"))
        gen_in = best(
            args.repeat,
            lambda: labdir.generate(intent.load(source), lab_dir, str(source), force=True),
        )
        rows: list[tuple[str, float, float | None, float]] = [
            ("twin --help", help_s, None, 0.3),
            ("twin generate", gen_cmd, gen_in, 0.6),
        ]
        if args.deploy:
            rows += deploys(args.repeat, lab_dir)
    print(f"{'':24} {'command':>9} {'in-process':>11} {'goal':>7}")
    for name, cmd, inproc, goal in rows:
        ok = cmd < goal
        missed |= not ok
        where = f"{inproc:10.3f}s" if inproc is not None else f"{'-':>11}"
        print(f"{name:24} {cmd:8.3f}s {where} {goal:6.2f}s {'ok' if ok else 'MISSED'}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
