"""PNG plots of a run for the Markdown report (matplotlib, no display needed).

- `uplinks.png`: packets each leaf sent on each uplink during the run, one group of bars per
  leaf, a colour per uplink (the legend names the uplinks);
- `throughput.png`: packets per second received by all servers over time, each fault marked
  with what it did and to which link or node;
- `loss.png`: each fault's loss window (the longest sequence gap of any flow after it), or
  "no loss" when no fault cost a packet;
- what a simulator observed: `pause.png`, `queues.png`, `iterations.png` (`sim_plots`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

from twin import safeio
from twin.scenario.observations import Observations
from twin.verdict import sim_plots


def uplink_packets(obs: Observations) -> dict[str, dict[str, int]]:
    """Per leaf, tx packets on each uplink (a port facing a spine) over the run."""
    samples = obs.counters["samples"]
    if len(samples) < 2:
        return {}
    first, last = samples[0]["c"], samples[-1]["c"]
    column = obs.counters["fields"].index("tx_packets")
    uplinks = obs.run.get("uplinks", {})
    result: dict[str, dict[str, int]] = {}
    for leaf, ports in uplinks.items():
        result[leaf] = {
            port: last[f"{leaf}:{port}"][column] - first[f"{leaf}:{port}"][column]
            for port in ports
            if f"{leaf}:{port}" in first and f"{leaf}:{port}" in last
        }
    return result


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


def _uplink_names(uplinks: dict[str, dict[str, int]]) -> list[str]:
    """Legend entries: the uplinks' port names when every leaf has the same ones, else their
    rank ('uplink 1', ...), in port order."""
    orders = {tuple(sorted(ports)) for ports in uplinks.values()}
    if len(orders) == 1:
        return list(next(iter(orders)))
    return [f"uplink {i + 1}" for i in range(max(len(ports) for ports in uplinks.values()))]


def _uplinks(ax: Axes, uplinks: dict[str, dict[str, int]]) -> None:
    x = 0
    ticks, labels = [], []
    names = _uplink_names(uplinks)
    for leaf, ports in uplinks.items():
        for i, (_, packets) in enumerate(sorted(ports.items())):
            label = names[i] if leaf == next(iter(uplinks)) else None
            ax.bar(x + i, packets, color=f"C{i % 10}", label=label)
        ticks.append(x + (len(ports) - 1) / 2)
        labels.append(leaf)
        x += len(ports) + 1
    ax.set_xticks(ticks, labels, rotation=45)
    ax.set_xlabel("leaf (one bar per uplink)")
    ax.set_ylabel("packets sent on each uplink")
    ax.set_title("ECMP: traffic per uplink per leaf")
    ax.legend(title="uplink", fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def _throughput(ax: Axes, obs: Observations, rate: list[tuple[float, float]]) -> None:
    ax.plot([t for t, _ in rate], [r for _, r in rate], lw=1.2)
    for fault in obs.run.get("faults", []):
        t = fault["t"] - obs.run["started"]
        ax.axvline(t, color="red", ls="--", lw=0.8)
        target = fault.get("link") or fault.get("node") or ""
        ax.text(
            t,
            ax.get_ylim()[1] * 0.95,
            f" {fault['fault']} {target}",
            color="red",
            fontsize=8,
            rotation=90,
            va="top",
        )
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("packets/s received by servers")
    ax.set_title("Throughput over time, faults marked")


def _loss(ax: Axes, loss_ms: dict[str, float]) -> None:
    ax.set_title("Loss window per fault")
    if not any(loss_ms.values()):
        ax.set_axis_off()
        ax.text(0.5, 0.6, "no loss", ha="center", va="center", fontsize=16)
        faults = "\n".join(f"{fault}: 0 ms" for fault in loss_ms)
        ax.text(0.5, 0.3, faults, ha="center", va="center", fontsize=9)
        return
    ax.barh(list(loss_ms), list(loss_ms.values()), color="C3")
    ax.set_xlabel("loss window (ms)")


def pyplot() -> Any:
    """matplotlib's pyplot without a display (imported when a plot is drawn: it is slow)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def draw(obs: Observations, loss_ms: dict[str, float] | None = None) -> list[tuple[str, Figure]]:
    """The plots that have data, by file name (close them when done)."""
    uplinks, rate = uplink_packets(obs), server_rx_rate(obs)
    plots: list[tuple[str, tuple[int, int], Callable[[Axes], None]]] = []
    if uplinks:
        plots.append(("uplinks.png", (10, 4), lambda ax: _uplinks(ax, uplinks)))
    if rate:
        plots.append(("throughput.png", (10, 4), lambda ax: _throughput(ax, obs, rate)))
    if loss_ms:
        plots.append(("loss.png", (8, 3), lambda ax: _loss(ax, loss_ms)))
    plots += sim_plots.plots(obs)
    figures = []
    for name, size, paint in plots:
        fig, ax = pyplot().subplots(figsize=size)
        paint(ax)
        fig.tight_layout()
        figures.append((name, fig))
    return figures


def write(obs: Observations, out: Path, loss_ms: dict[str, float] | None = None) -> list[Path]:
    """Write the plots that have data into `out`; returns the files written."""
    safeio.mkdir(out)
    written = []
    for name, fig in draw(obs, loss_ms):
        with safeio.create(out / name) as file:
            fig.savefig(file, dpi=90, format="png")
        pyplot().close(fig)
        written.append(out / name)
    return written
