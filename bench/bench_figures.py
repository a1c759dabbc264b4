"""The figures docs/simulator.md and the example files quote, computed from the engine
(labs/sim/figures.py): the headroom sweep, the HotNets ring sweep, the DCQCN incasts, in
marked blocks (bench/blocks.py; computed again by a test, so none is recorded).

    .venv/bin/python bench/bench_figures.py           # print every block, say which files differ
    .venv/bin/python bench/bench_figures.py --write   # rewrite the marked blocks in the files

Exit status 1 if a file's block differs from what the engine gives (without --write).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import blocks  # noqa: E402
from labs.sim import figures  # noqa: E402

FILES = [REPO / "docs" / "simulator.md", *sorted((REPO / "examples" / "sim").glob("*.yaml"))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the marked blocks")
    args = parser.parse_args()
    texts: dict[str, str] = {}
    for name, compute in figures.BLOCKS.items():
        started = time.process_time()
        texts[name] = compute()
        print(f"## {name} ({time.process_time() - started:.1f} s CPU)\n{texts[name]}\n")
    stale = 0
    for path in FILES:
        for name in (n for n in blocks.blocks_in(path) if n in texts):  # not other benches'
            if args.write:
                if blocks.rewrite(path, name, texts[name]):
                    print(f"rewrote {path.relative_to(REPO)}: {name}")
            elif blocks.current(path, name) != texts[name]:
                print(f"differs: {path.relative_to(REPO)}: {name}")
                stale += 1
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
