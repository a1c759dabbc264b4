"""PNG plots of a run for the Markdown report (matplotlib, no display needed), drawn from the
verdict's own figures so that a picture never tells another story than its row
(docs/plots.md shows each):

- `uplinks.png`: one panel per leaf judged by `ecmp_spread`: the packets counted on each
  uplink over the window the validator judged (the ECMP probe's, else the collectives'),
  the mean, and the band the verdict allows (mean x (1 +- tolerance); with collective flows
  only the max/mean limit), bars coloured by the leaf's verdict;
- `throughput.png`: packets per second received by all servers over time, traffic phases
  shaded, each fault marked with what it did and to which link or node;
- `loss.png`: each judged `failover` scope's loss window, coloured by its verdict, with the
  limit it was judged against;
- what a simulator observed: `pause.png`, `queues.png`, `iterations.png` (`sim_plots`).

A plot without data is not written.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

from twin import safeio
from twin.lab.directory import Lab
from twin.outputs import sim_plots
from twin.scenario.observations import Observations
from validators.result import Result, Status

COLOURS = {Status.PASS: "tab:green", Status.FAIL: "tab:red", Status.NOT_OBSERVABLE: "tab:grey"}
"""A verdict's colour on every plot."""

Params = Mapping[str, Mapping[str, Any]]
"""Each validator's thresholds as the verdict used them (defaults included)."""


@dataclass(frozen=True)
class Spread:
    """One `ecmp_spread` panel: a leaf's uplink counts as its result holds them."""

    scope: str
    status: Status
    counts: dict[str, int]
    low: float | None
    """The lowest share of the mean allowed (None: no lower bound)."""
    high: float


def spreads(obs: Observations, results: list[Result], params: Params) -> list[Spread]:
    """The `ecmp_spread` rows that counted packets per uplink, with the band they were
    judged against."""
    given = params.get("ecmp_spread", {})
    uplinks: dict[str, list[str]] = obs.run.get("uplinks", {})
    out = []
    for r in results:
        leaf = r.scope.split()[-1]
        ports = uplinks.get(leaf, [])
        if r.validator != "ecmp_spread" or not ports or any(p not in r.figures for p in ports):
            continue
        counts = {p: int(r.figures[p]) for p in ports}
        if r.figures.get("source") == "ecmp_probe":
            tolerance = float(given.get("tolerance", 0.25))
            out.append(Spread(r.scope, r.status, counts, 1 - tolerance, 1 + tolerance))
        else:
            out.append(Spread(r.scope, r.status, counts, None, float(given["max_over_mean"])))
    return out


def failovers(results: list[Result]) -> list[Result]:
    """The `failover` rows that measured a loss window."""
    return [r for r in results if r.validator == "failover" and "loss_window_ms" in r.figures]


def server_rx_rate(obs: Observations) -> list[tuple[float, float]]:
    """(seconds since start, packets/s received by all servers) between samples."""
    column = obs.counters["fields"].index("rx_packets")
    servers = set(obs.run.get("servers", []))
    totals = []
    for sample in obs.counters["samples"]:
        total = sum(v[column] for k, v in sample["c"].items() if k.split(":")[0] in servers)
        totals.append((sample["t"], total))
    start = obs.run["started"]
    return [
        (t1 - start, (v1 - v0) / (t1 - t0))
        for (t0, v0), (t1, v1) in itertools.pairwise(totals)
        if t1 > t0
    ]


def _spread_panel(ax: Axes, spread: Spread) -> None:
    ports, counts = list(spread.counts), list(spread.counts.values())
    mean = sum(counts) / len(counts)
    ax.bar(ports, counts, color=COLOURS.get(spread.status, "tab:blue"), alpha=0.75)
    if spread.low is not None:
        ax.axhspan(mean * spread.low, mean * spread.high, color="tab:green", alpha=0.15)
        for edge in (spread.low, spread.high):
            ax.axhline(mean * edge, color="tab:green", ls=":", lw=1)
    else:
        ax.axhline(mean * spread.high, color="tab:red", ls=":", lw=1)
    ax.axhline(mean, color="black", ls="--", lw=0.8)
    ax.set_ylim(0, max(max(counts), mean * spread.high) * 1.1)
    ratio = max(counts) / mean if mean else 0.0
    ax.set_title(f"{spread.scope}: {spread.status.value} (max/mean {ratio:.2f})", fontsize=9)
    ax.tick_params(axis="x", labelrotation=45, labelsize=7)
    ax.tick_params(axis="y", labelsize=7)


def _uplinks(fig: Figure, spread: list[Spread]) -> None:
    cols = min(4, len(spread))
    rows = -(-len(spread) // cols)
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax, one in zip(axes.flat, spread, strict=False):
        _spread_panel(ax, one)
    for ax in list(axes.flat)[len(spread) :]:
        ax.set_axis_off()
    for ax in axes[:, 0]:
        ax.set_ylabel("packets on the uplink", fontsize=8)
    first = spread[0]
    band = (
        f"band: mean x {first.low:.2f}..{first.high:.2f}"
        if first.low is not None
        else f"dotted: mean x {first.high:g} (the max/mean limit)"
    )
    fig.suptitle(
        f"ECMP spread per leaf over the window ecmp_spread judged (dashed: mean; {band})",
        fontsize=10,
    )


def _throughput(ax: Axes, obs: Observations, rate: list[tuple[float, float]]) -> None:
    ax.plot([t for t, _ in rate], [r / 1e3 for _, r in rate], lw=1.2)
    start = float(obs.run["started"])
    for i, phase in enumerate(obs.run.get("phases", [])):
        lo, hi = float(phase["start"]) - start, float(phase["end"]) - start
        ax.axvspan(lo, hi, color=f"C{i % 10}", alpha=0.08)
        ax.text(
            lo,
            0.02,
            f" {phase['label']}",
            fontsize=7,
            color="dimgrey",
            transform=ax.get_xaxis_transform(),
        )
    sim_plots.faults(ax, obs, [(float(f["t"]) - start, f) for f in obs.run.get("faults", [])])
    ax.set_xlim(0, obs.duration)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("thousand packets/s received by servers")
    ax.set_title("Throughput over time (phases shaded, faults marked)")


def _loss(ax: Axes, rows: list[Result]) -> None:
    names = [r.scope for r in rows]
    windows = [float(r.figures["loss_window_ms"]) for r in rows]
    limits = [float(r.figures.get("limit_ms", 0)) for r in rows]
    colours = [COLOURS.get(r.status, "tab:blue") for r in rows]
    ax.barh(names, windows, color=colours)
    # A dot in the verdict's colour at the window: visible when the bar is too short to be.
    ax.scatter(windows, names, color=colours, s=40, zorder=3, label="window")
    ax.scatter(limits, names, marker="|", s=400, color="black", zorder=3, label="limit")
    for y, (r, window, limit) in enumerate(zip(rows, windows, limits, strict=True)):
        text = f"  {window:g} ms, limit {limit:g} ms: {r.status.value}"
        ax.text(max(window, limit), y, text, va="center", fontsize=8)
    ax.set_xlim(0, max(windows + limits) * 1.6 or 1)
    ax.invert_yaxis()
    ax.set_xlabel("loss window (ms; bar and dot in the verdict's colour, black tick: the limit)")
    ax.set_title("failover: loss window per fault against its limit")


def pyplot() -> Any:
    """matplotlib's pyplot without a display (imported when a plot is drawn: it is slow)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def draw(
    obs: Observations, results: list[Result], params: Params, lab: Lab | None = None
) -> list[tuple[str, Figure]]:
    """The plots that have data, by file name (close them when done)."""
    spread, loss, rate = spreads(obs, results, params), failovers(results), server_rx_rate(obs)
    plots: list[tuple[str, tuple[float, float], Callable[[Axes], None]]] = []
    if len(rate) > 2 and obs.duration > 0:
        plots.append(("throughput.png", (10, 4), lambda ax: _throughput(ax, obs, rate)))
    if loss:
        plots.append(("loss.png", (9, 1.8 + 0.4 * len(loss)), lambda ax: _loss(ax, loss)))
    plots += sim_plots.plots(obs, lab, params)
    figures = []
    plt = pyplot()
    if spread:
        rows = -(-len(spread) // min(4, len(spread)))
        fig = plt.figure(figsize=(min(4, len(spread)) * 3 + 1, rows * 2.6 + 0.6))
        _uplinks(fig, spread)
        figures.append(("uplinks.png", _laid_out(fig)))
    for name, size, paint in plots:
        fig, ax = plt.subplots(figsize=size)
        paint(ax)
        figures.append((name, _laid_out(fig)))
    return figures


def _laid_out(fig: Figure) -> Figure:
    """The figure laid out once (`tight_layout`), with no layout engine left to run again:
    `savefig` would otherwise draw the whole figure a second time first (for an engine that
    lays out as it draws; tight_layout's place-holder does nothing then), a third of its
    cost. The same pixels."""
    fig.tight_layout()
    fig.set_layout_engine(None)
    return fig


def write(
    obs: Observations, out: Path, results: list[Result], params: Params, lab: Lab | None = None
) -> list[Path]:
    """Write the plots that have data into `out`; returns the files written."""
    safeio.mkdir(out)
    written = []
    for name, fig in draw(obs, results, params, lab):
        with safeio.create(out / name) as file:
            fig.savefig(file, dpi=90, format="png")
        pyplot().close(fig)
        written.append(out / name)
    return written
