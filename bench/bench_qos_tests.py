"""sonic-mgmt's tests on the twin (`twin qos-test`): expected against seen for every test, on
the reference lab and the 100G lab, healthy and broken.

    .venv/bin/python bench/bench_qos_tests.py            # both labs, healthy and broken
    .venv/bin/python bench/bench_qos_tests.py --healthy  # healthy only

Each lab is generated into a temporary directory; each (lab, variant) runs in a child process
so its CPU time and peak memory (max RSS) are its own. A test passes on the healthy lab and
fails on its broken variant; exit status 1 when one does not (not-observable tests are
listed, never counted as passing). `--write` puts a row per (lab, variant) into the block
`qos-tests` of docs/qos-tests.md and records them (bench/blocks.py).
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import blocks  # noqa: E402

LABS = {"reference (400G)": "reference.yaml", "small-100g (100G)": "small-100g.yaml"}


def child(lab: str, broken: bool) -> int:
    """Run the suite on one lab, print expected vs seen, exit 0 when every verdict is the
    one wanted (pass healthy, fail broken)."""
    from labs.sim.qostest import suite
    from labs.sim.qostest.case import FAIL, NOT_OBSERVABLE, PASS
    from twin.lab.directory import Lab

    results = suite.run(Lab.open(Path(lab)), suite.TESTS, broken=broken)
    print(suite.expected_vs_seen(results))
    wanted = FAIL if broken else PASS
    wrong = [r.test for r in results if r.status not in (wanted, NOT_OBSERVABLE)]
    print(
        f"-- {sum(r.status == wanted for r in results)} {wanted} as wanted, "
        f"{sum(r.status == NOT_OBSERVABLE for r in results)} not observable, "
        f"wrong: {', '.join(wrong) or 'none'}"
    )
    return 1 if wrong else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--healthy", action="store_true", help="skip the broken variants")
    p.add_argument("--write", action="store_true", help="the rows into the docs' block")
    p.add_argument("--child", nargs=2, metavar=("LAB", "VARIANT"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child(args.child[0], args.child[1] == "broken")
    code = 0
    rows = ["| lab | variant | verdicts | wall | CPU | max RSS |", "|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory(prefix="bench-qos-") as tmp:
        for title, source in LABS.items():
            lab = Path(tmp) / source.removesuffix(".yaml")
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "twin.cli.main",
                    "generate",
                    str(REPO / "examples" / source),
                    "-o",
                    str(lab),
                ],
                check=True,
                capture_output=True,
            )
            for variant in ("healthy",) if args.healthy else ("healthy", "broken"):
                print(f"\n=== {title}, {variant}")
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                t0 = time.perf_counter()
                done = subprocess.run(
                    [sys.executable, __file__, "--child", str(lab), variant],
                    check=False,
                    capture_output=True,
                    text=True,
                )
                print(done.stdout, end="")
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
                wall, rss = time.perf_counter() - t0, after.ru_maxrss / 1024
                print(f"-- wall {wall:.1f} s, CPU {cpu:.1f} s, max RSS {rss:.0f} MB")
                verdicts = done.stdout.rstrip().splitlines()[-1].removeprefix("-- ")
                rows.append(
                    f"| {title} | {variant} | {verdicts.replace(' as wanted', '')} "
                    f"| {wall:.1f} s | {cpu:.1f} s | {rss:.0f} MB |"
                )
                code |= done.returncode
    if args.write and not args.healthy:
        rows.append(f"\n({blocks.load()} at the end: what else ran)")
        for path in blocks.write("qos-tests", "\n".join(rows)):
            print(f"rewrote {path.relative_to(REPO)}: qos-tests")
    return code


if __name__ == "__main__":
    sys.exit(main())
