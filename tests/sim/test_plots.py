"""The report's plots agree with the verdict: every number a plot draws is read back from its
matplotlib artists and compared with the figures of the rows in report.json; plots without
data are not written, faults after the simulated span are not drawn past it, and `twin
report` writes nothing on stderr. No root: the fake and sim backends play the runs."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

from tests.sim.test_ecmp_probe import FAKE, generate, play, scale_uplink
from tests.simlab import paused_incast
from tests.synthetic import SyntheticRun, flow, probed
from twin.lab.directory import Lab
from twin.outputs import plots, sim_plots
from twin.render.config_db import wred
from twin.scenario.observations import Observations
from twin.verdict import verdict
from validators import registry
from validators.result import Result, Status

TWIN = Path(sys.executable).with_name("twin")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """examples/small.yaml with 4 spines on the fake backend."""
    lab = generate(tmp_path_factory.mktemp("plots") / "lab")
    FAKE.deploy(lab, lambda _: None)
    yield lab
    FAKE.destroy(lab)


def reported(run: Path) -> list[Result]:
    return [Result.from_json(r) for r in json.loads((run / "report.json").read_text())["results"]]


def drawn(obs: Observations, lab: Lab, params: dict[str, Any]) -> dict[str, Any]:
    """Each plot of a reported run drawn again from its report.json, by file name (closed for
    pyplot: their artists stay readable)."""
    figures = dict(plots.draw(obs, reported(obs.path), params, lab))
    for figure in figures.values():
        plots.pyplot().close(figure)
    return figures


def colour(patch: Any) -> str:
    return to_hex(patch.get_facecolor())


def uplinks_agree(obs: Observations, lab: Lab, params: dict[str, Any]) -> dict[str, Result]:
    """Each uplinks.png panel's bars, colour, title and band are its ecmp_spread row's; the
    rows drawn, by scope."""
    rows = {r.scope: r for r in reported(obs.path) if r.validator == "ecmp_spread"}
    tolerance = float(params.get("ecmp_spread", {}).get("tolerance", 0.25))
    figure = drawn(obs, lab, params)["uplinks.png"]
    shown = {}
    for ax in [ax for ax in figure.axes if ax.patches]:
        scope, verdict_ratio = ax.get_title().split(": ")
        status, ratio = verdict_ratio.removesuffix(")").split(" (max/mean ")
        row = shown[scope] = rows[scope]
        ports = obs.run["uplinks"][scope.split()[-1]]
        bars = [p for p in ax.patches if p.get_width() < 1]  # the band spans the axes
        assert [t.get_text() for t in ax.get_xticklabels()] == ports
        assert [round(b.get_height()) for b in bars] == [row.figures[p] for p in ports]
        assert status == row.status.value
        assert {colour(b) for b in bars} == {to_hex(plots.COLOURS[row.status])}
        mean = sum(int(row.figures[p]) for p in ports) / len(ports)
        (band,) = [p for p in ax.patches if p.get_width() >= 1]
        low, high = band.get_y(), band.get_y() + band.get_height()
        assert (round(low / mean, 3), round(high / mean, 3)) == (1 - tolerance, 1 + tolerance)
        assert round(max(b.get_height() for b in bars) / mean, 3) == row.figures["max_over_mean"]
        assert ratio == f"{row.figures['max_over_mean']:.2f}"
    return shown


def loss_agrees(obs: Observations, lab: Lab) -> list[Result]:
    """loss.png's bars, colours and limits are the failover rows' that measured a window."""
    rows = [r for r in reported(obs.path) if "loss_window_ms" in r.figures]
    ax = drawn(obs, lab, {})["loss.png"].axes[0]
    bars = ax.patches
    assert [t.get_text() for t in ax.get_yticklabels()] == [r.scope for r in rows]
    assert [b.get_width() for b in bars] == [r.figures["loss_window_ms"] for r in rows]
    assert [colour(b) for b in bars] == [to_hex(plots.COLOURS[r.status]) for r in rows]
    marks = {c.get_label(): c for c in ax.collections}
    assert [x for x, _ in marks["limit"].get_offsets()] == [r.figures["limit_ms"] for r in rows]
    assert [x for x, _ in marks["window"].get_offsets()] == [
        r.figures["loss_window_ms"] for r in rows
    ]
    assert [to_hex(c) for c in marks["window"].get_facecolors()] == [
        to_hex(plots.COLOURS[r.status]) for r in rows
    ]
    return rows


def test_uplinks_are_the_ecmp_spread_counts_with_its_band(lab: Lab, tmp_path: Path) -> None:
    obs = play(lab, tmp_path)
    up1 = obs.run["uplinks"]["leaf1"][0]
    scale_uplink(obs, "leaf1", up1, 2.0)  # leaf1 fails its max/mean bound
    code, _ = verdict.report_run(obs.path)
    assert code == 1 and (obs.path / "uplinks.png").is_file()
    shown = uplinks_agree(obs, lab, {"ecmp_spread": {"tolerance": 0.25}})
    assert set(shown) == set(lab.nodes("leaf")) and len(shown) == 4
    assert shown["leaf1"].status is Status.FAIL and shown["leaf2"].status is Status.PASS


def test_no_uplinks_plot_without_a_leaf_judged_from_counts(lab: Lab, tmp_path: Path) -> None:
    obs = play(
        lab,
        tmp_path,
        {"name": "probe", "at": 0, "duration": 2, "kind": "ecmp_probe", "tuples": 100},
    )
    verdict.report_run(obs.path)
    assert {r.status for r in reported(obs.path) if r.scope.startswith("leaf")} == {
        Status.NOT_OBSERVABLE
    }
    assert not (obs.path / "uplinks.png").exists()
    assert "uplinks.png" not in (obs.path / "report.md").read_text()


def test_loss_bars_are_the_failover_windows_coloured_by_verdict_with_their_limits(
    tmp_path: Path,
) -> None:
    from tests.synthetic import generate_lab

    lab = generate_lab(tmp_path / "lab", "vplot")
    run = SyntheticRun(lab, name="lossy")
    run.fault(1.0, "link-down", link="leaf1:spine1", ends=["leaf1:Ethernet24", "spine1:Ethernet0"])
    run.fault(3.0, "link-up", link="leaf1:spine1")
    run.flows = [flow("server2", "server3", qp) for qp in range(4)]
    run.failover_probes = [probed(0, "leaf1:spine1", "leaf1:Ethernet24", (1.0, 3000, 4.0))]
    run.validate = {"failover": {"max_loss_ms": 1000}}
    obs = run.write()
    verdict.report_run(obs.path)
    rows = loss_agrees(obs, lab)
    assert rows and any(r.status is Status.FAIL for r in rows)


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Lab, Observations]:
    """A lossless incast on the small lab in simulated time, with a fault after its end; the
    ingress pool shrunk to 1 MB so that PGs reach XOFF."""
    fault = {"at": 0.5, "fault": "link-down", "link": "leaf1:spine1"}
    checks: dict[str, dict[str, Any]] = {"pfc_behaviour": {}, "ecn_behaviour": {}}
    run = paused_incast(tmp_path_factory.mktemp("simplots") / "lab", [fault], checks)
    lab = Lab.open(run.parent.parent)
    return lab, Observations.open(run)


def test_queue_plots_draw_the_thresholds_of_the_configs(sim_run: tuple[Lab, Observations]) -> None:
    lab, obs = sim_run
    figures = drawn(obs, lab, {})
    ax = figures["queues.png"].axes[0]
    unit = ax.get_ylabel().split("(")[1].rstrip(")")
    divisor = {"B": 1, "KB": 1e3, "MB": 1e6}[unit]
    port = ax.get_lines()[0].get_label().split(" ")[0]
    node, name = port.split(":")
    queue = int(ax.get_lines()[0].get_label().split()[-1])
    kmin, kmax, _ = wred(lab.config_db(node), name, queue) or (0, 0, 0)
    levels = {
        line.get_label().split()[0]: line.get_ydata()[0] * divisor
        for line in ax.get_lines()
        if line.get_label().startswith("K")
    }
    notes = " ".join(t.get_text() for t in ax.texts)
    assert round(levels.get("Kmin", kmin)) == kmin and kmin > 0
    assert round(levels["Kmax"]) == kmax if "Kmax" in levels else "Kmax" in notes
    top = max(max(line.get_ydata()) for line in ax.get_lines())  # series and thresholds
    assert 1 <= top < 1000 or unit == "B"  # a readable unit
    pgs = figures["pgs.png"].axes[0]
    level = sim_plots.xoff_level(lab.config_db(node), name, 3)
    assert level and "XOFF" in " ".join(
        [t.get_text() for t in pgs.texts] + [line.get_label() for line in pgs.get_lines()]
    )


def test_faults_after_the_simulated_span_are_named_not_drawn(
    sim_run: tuple[Lab, Observations],
) -> None:
    lab, obs = sim_run
    span = sim_plots.span_ms(obs)
    for name, fig in drawn(obs, lab, {}).items():
        ax = fig.axes[0]
        assert ax.get_xlim()[1] <= span * 1.0001 or name == "pause.png"
        vertical = [line.get_xdata()[0] for line in ax.get_lines() if line.get_color() == "red"]
        assert all(x <= span for x in vertical)
        if name != "pause.png":
            assert "outside the span: fault1 link-down leaf1:spine1" in [
                t.get_text() for t in ax.texts
            ]


def test_pause_plot_draws_the_storm_limit_of_pfc_behaviour(
    sim_run: tuple[Lab, Observations],
) -> None:
    lab, obs = sim_run
    rows = [r for r in obs.extra("pfc") if r["paused_s"] > 0]
    assert rows, "the incast paused nothing: no pause plot to check"
    ax = drawn(obs, lab, {"pfc_behaviour": {"storm_share": 0.2}})["pause.png"].axes[0]
    top = max(r["paused_s"] for r in rows) * 1e3
    assert max(b.get_width() for b in ax.patches) == pytest.approx(top)
    (limit,) = [line for line in ax.get_lines() if "storm" in line.get_label()]
    assert limit.get_xdata()[0] == pytest.approx(0.2 * sim_plots.span_ms(obs))


def test_a_plot_is_drawn_once_as_it_is_saved_with_its_layout(
    sim_run: tuple[Lab, Observations], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Laid out once by tight_layout, no engine left for savefig to run a draw before it."""
    lab, obs = sim_run
    figures = plots.draw(obs, reported(obs.path), {}, lab)
    assert {"queues.png", "pgs.png"} <= {name for name, _ in figures}
    draws: list[Figure] = []
    real = Figure.draw

    def counted(figure: Figure, renderer: Any) -> None:
        draws.append(figure)
        real(figure, renderer)

    monkeypatch.setattr(Figure, "draw", counted)
    default = Figure().subplotpars.left
    for _, figure in figures:
        figure.savefig(io.BytesIO(), dpi=90, format="png")
        plots.pyplot().close(figure)
        assert figure.subplotpars.left != default  # the tight layout kept
    assert draws == [figure for _, figure in figures]


def test_twin_report_writes_plots_without_a_word_on_stderr(
    sim_run: tuple[Lab, Observations],
) -> None:
    _, obs = sim_run
    done = subprocess.run([str(TWIN), "report", str(obs.path)], capture_output=True, text=True)
    assert done.returncode in (0, 1) and done.stderr == ""
    assert {"queues.png", "pgs.png"} <= {p.name for p in obs.path.glob("*.png")}


@pytest.mark.skipif("TWIN_RUN" not in os.environ, reason="TWIN_RUN=RUN_DIR names a run to check")
def test_the_plots_of_a_given_run_agree_with_its_verdict() -> None:
    """`TWIN_RUN=twin-reference/runs/TIME pytest tests/sim/test_plots.py -k given_run`: the
    reference main job's (or any reported run's) plots against its report.json."""
    run = Path(os.environ["TWIN_RUN"])
    obs = Observations.open(run)
    lab = verdict.lab_of(run, obs)
    wanted = yaml.safe_load((run / "scenario.yaml").read_text()).get("validate") or {}
    params = {name: registry.get(name).params(given or {}) for name, given in wanted.items()}
    names = {p.name for p in run.glob("*.png")}
    judged = [r for r in reported(run) if r.validator == "ecmp_spread" and "packets" in r.figures]
    assert ("uplinks.png" in names) == any(r.status is not Status.NOT_OBSERVABLE for r in judged)
    if "uplinks.png" in names:
        assert uplinks_agree(obs, lab, params)
    if "loss.png" in names:
        assert loss_agrees(obs, lab)
