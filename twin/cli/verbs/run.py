"""`twin run [DIR [SCENARIO]]`: deploy if needed, play a scenario, validate and report.

With no arguments: the reference fabric in ./twin-reference (generated there when missing,
regenerated only when its design is no longer the reference's, its earlier runs kept each
time), and the default scenario. A scenario played on a live backend that observes no data
plane (netns, clab) is then played on the packet simulator, fed by the FIBs the live twin
recorded (the data plane: PFC, ECN, buffers, collective iterations), one verdict over both
(`twin.scenario.hybrid`); `--no-sim` leaves the simulator out, `--sim` adds it on the fake
too. The verdict includes every static validator on the lab's configs (`--no-static` skips
them), so a static finding fails the run. A twin this command deployed is destroyed at the
end (unless --keep); a twin that was already running is left running.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from typing import TYPE_CHECKING

from labs import lifecycle, registry
from twin import safeio
from twin.cli.options import add_backend, add_reports, backend
from twin.cli.output import add_json, add_table, results_table
from twin.cli.serve import add_metrics, metrics
from twin.cli.verbs.deploy import progress
from twin.intent import fabric as intent
from twin.lab import directory as labdir
from twin.lab import outdir
from twin.lab.directory import Lab
from twin.outputs import report
from twin.scenario import hybrid
from twin.scenario import model as scenarios
from twin.scenario import player as runs
from twin.verdict import verdict

if TYPE_CHECKING:
    from validators.result import Result

HELP = "deploy if needed, play a scenario, validate, report (no arguments: the reference)"
DEFAULTS = Path(__file__).resolve().parents[2] / "defaults"
REFERENCE = DEFAULTS / "reference.yaml"
DEFAULT_SCENARIO = DEFAULTS / "default-scenario.yaml"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument(
        "lab",
        type=Path,
        nargs="?",
        help="lab directory (default: ./twin-reference, generated from the reference fabric)",
    )
    p.add_argument(
        "scenario",
        type=Path,
        nargs="?",
        default=DEFAULT_SCENARIO,
        help="scenario.yaml (default: the default scenario)",
    )
    p.add_argument("--keep", action="store_true", help="leave the twin running afterwards")
    p.add_argument(
        "--no-static",
        action="store_true",
        help="leave the static validators (twin validate) out of the verdict",
    )
    plane = p.add_mutually_exclusive_group()
    plane.add_argument(
        "--sim",
        action="store_true",
        help="then play the data plane on the simulator with the twin's FIBs, on any backend "
        "(the default on netns and clab, which observe no data plane)",
    )
    plane.add_argument(
        "--no-sim",
        action="store_true",
        help="play on the backend alone: no data plane on the simulator after a live twin",
    )
    p.add_argument(
        "--timeout",
        type=float,
        help="seconds to wait for convergence (default 60, 2 more per switch beyond 12)",
    )
    add_reports(
        p, "the run directory (default LAB/runs/TIMESTAMP-SCENARIO)", "also write the JUnit here"
    )
    add_table(p)
    add_backend(p)
    add_metrics(p)
    add_json(p)


DATA_PLANE = frozenset({"queues", "pfc", "ecn", "iterations"})
"""What a backend observes of the data plane (the simulator all of it)."""


def with_data_plane(args: argparse.Namespace, chosen: lifecycle.Managed) -> bool:
    """Whether the run plays the data plane on the simulator after the backend: with `--sim`,
    and by default on a live backend whose FIBs it observes but none of its data plane
    (netns, clab: as the main job does); never with `--no-sim` nor on the simulator itself."""
    if args.no_sim or chosen.name == "sim":
        return False
    live = not chosen.computed and "fib" in chosen.capabilities
    return bool(args.sim) or (live and not chosen.capabilities & DATA_PLANE)


def _bar(total: float, stop: threading.Event) -> None:
    """A progress bar of the scenario's timeline on the terminal."""
    start = time.monotonic()
    while not stop.wait(0.5):
        done = min(1.0, (time.monotonic() - start) / total)
        sys.stderr.write(f"\r  [{'#' * int(30 * done):<30}] {done * total:3.0f}/{total:.0f} s")
        sys.stderr.flush()
    sys.stderr.write("\r\033[K")


def run(args: argparse.Namespace) -> int:
    """Play, validate, report; exit 0 only when every validator passed."""
    with _no_collections() as resume:  # from the start: the lab's configs are many of its objects
        return _opened(args, resume)


def _opened(args: argparse.Namespace, resume: Callable[[], None]) -> int:
    """The lab opened, its scenario loaded, then played and judged (`_run`); the collector
    back on (`resume`) for a live twin, whose run lasts minutes and allocates cycles as it
    waits (pyroute2's and the threads' objects: +34 MB of peak RSS over the main job)."""
    lab_dir: Path = args.lab or Path("twin-reference")
    if args.lab is None:
        _reference(lab_dir)
    lab = Lab.open(lab_dir)  # opened and checked (`scenarios.load`) once, handed down
    chosen = backend(args, lab)
    if not chosen.computed:
        resume()
    # the simulator and the fake send no frames: no frame rate bounds what they play
    scenario = scenarios.load(args.scenario, lab, frames=not chosen.computed)
    if args.out:
        outdir.check(args.out)
    if args.junit:
        outdir.check_file(args.junit, "--junit")
    with chosen.locked(lab.name, lab.path, "run"):
        return _run(args, lab, scenario, chosen)


@contextlib.contextmanager
def _no_collections() -> Iterator[Callable[[], None]]:
    """Python's collector off for the run, back as it was after: a run allocates millions of
    objects that live to its end (the lab's configs, its flows, FIBs, validators' tables),
    which each collection walked again (6 % of a 200-server simulator run's CPU with Python's
    thresholds; 0.5 s at 1,024 servers with a young generation of 50,000). What it leaves in
    reference cycles is small: 209,000 objects at 1,024 servers, +10 MB of peak RSS
    (docs/simulator.md). Yields what puts it back early."""
    was = gc.isenabled()
    gc.disable()

    def resume() -> None:
        if was:
            gc.enable()

    try:
        yield resume
    finally:
        if was:
            gc.enable()


def _reference(lab_dir: Path) -> None:
    """The reference fabric in `lab_dir`: generated when missing, regenerated (its runs, logs
    and events kept) only when the design it holds is no longer the reference's."""
    fabric = intent.load(REFERENCE)
    if labdir.holds(lab_dir, fabric, str(REFERENCE)):
        progress(f"the reference fabric in {lab_dir}")
        return
    made = lab_dir.exists()
    labdir.generate(fabric, lab_dir, str(REFERENCE), force=True, keep=True)
    progress(f"{'regenerated' if made else 'generated'} the reference fabric into {lab_dir}")


def _run(
    args: argparse.Namespace, lab: Lab, scenario: scenarios.Scenario, chosen: lifecycle.Managed
) -> int:
    """Deploy unless running, play, destroy what was deployed here; the verdict (`--metrics`
    served from before the deploy: a port it cannot take is refused before anything starts)."""
    with metrics(args.metrics, lab, chosen, progress, args.metrics_flavour):
        run_dir, judged = _played(args, lab, scenario, chosen)
    return _verdict(args, lab, scenario, chosen, run_dir, judged)


def _played(
    args: argparse.Namespace, lab: Lab, scenario: scenarios.Scenario, chosen: lifecycle.Managed
) -> tuple[Path, dict[str, list[Result]] | None]:
    """Deploy unless running, play, destroy what was deployed here; the run directory and
    the static validators judged beside the play."""
    deployed = not chosen.running(lab)
    if deployed:
        with contextlib.nullcontext() if args.keep else lifecycle.transient():
            up = chosen.deploy(lab, progress, timeout=args.timeout)
        if up.unconverged:
            progress(f"{up.lacking()}; playing on it")
        else:
            progress(
                f"{lab.name}: {up.nodes} nodes, {up.sessions} BGP sessions, "
                f"converged in {up.seconds} s ({up.backend})"
            )
    stop = threading.Event()
    bar = threading.Thread(target=_bar, args=(scenario.duration, stop), daemon=True)
    # a twin whose play is a computation leaves a core free: judge the static validators there
    static = _beside(lab, scenario, not args.no_static) if chosen.computed else None
    try:
        progress(f"playing {scenario.name} ({scenario.duration:.0f} s)")
        if sys.stderr.isatty():
            bar.start()
        run_dir = runs.play(lab, scenario, chosen, progress=progress, out=args.out)
    finally:
        stop.set()
        if bar.is_alive():
            bar.join()
        if deployed and not args.keep:
            chosen.destroy(lab)
            progress(f"{lab.name}: destroyed")
    return run_dir, static.result() if static else None


def _beside(
    lab: Lab, scenario: scenarios.Scenario, static: bool
) -> futures.Future[dict[str, list[Result]]]:
    """The static validators judged in a thread of their own (`verdict.judge_static`), a
    daemon: a command stopped by a signal exits without waiting for them."""
    judged: futures.Future[dict[str, list[Result]]] = futures.Future()

    def judge() -> None:
        try:
            implied = verdict.implied(scenario.sim.model_dump())
            judged.set_result(verdict.judge_static(lab, scenario.validate_, static, implied))
        except BaseException as exc:  # handed to the command, which reads the result
            judged.set_exception(exc)

    threading.Thread(target=judge, name="static", daemon=True).start()
    return judged


def _verdict(
    args: argparse.Namespace,
    lab: Lab,
    scenario: scenarios.Scenario,
    chosen: lifecycle.Managed,
    run_dir: Path,
    judged: dict[str, list[Result]] | None,
) -> int:
    """The data plane on the simulator where asked, then the verdict and its reports."""
    if with_data_plane(args, chosen):
        hybrid.add_data_plane(run_dir, lab, scenario, registry.get("sim"), progress)
    code, results = verdict.report_run(run_dir, not args.no_static, judged, lab)
    if args.junit:
        safeio.write(args.junit, (run_dir / "junit.xml").read_bytes())
    if args.json:
        print((run_dir / "report.json").read_text(), end="")
        return code
    print(results_table(args, results))
    print(
        f"\n{report.counts(results)}; reports in {run_dir}/report.md, report.json, junit.xml",
        file=sys.stdout,
    )
    return code
