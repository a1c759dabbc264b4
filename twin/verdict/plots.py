"""PNG plots of a run for the Markdown report (matplotlib, no display needed).

- `uplinks.png`: packets each leaf sent on each uplink during the run, one group per leaf;
- `throughput.png`: packets per second received by all servers over time, faults marked;
- `loss.png`: each fault's loss window (the longest sequence gap of any flow after it).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes

from twin.scenario.observations import Observations


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


def _uplinks(ax: Axes, uplinks: dict[str, dict[str, int]]) -> None:
    x = 0
    ticks, labels = [], []
    for leaf, ports in uplinks.items():
        for i, (_, packets) in enumerate(sorted(ports.items())):
            ax.bar(x + i, packets, color=f"C{i % 10}")
        ticks.append(x + (len(ports) - 1) / 2)
        labels.append(leaf)
        x += len(ports) + 1
    ax.set_xticks(ticks, labels, rotation=45)
    ax.set_ylabel("packets sent on each uplink")
    ax.set_title("ECMP: traffic per uplink per leaf")


def _throughput(ax: Axes, obs: Observations, rate: list[tuple[float, float]]) -> None:
    ax.plot([t for t, _ in rate], [r for _, r in rate], lw=1.2)
    for fault in obs.run.get("faults", []):
        t = fault["t"] - obs.run["started"]
        ax.axvline(t, color="red", ls="--", lw=0.8)
        ax.text(t, ax.get_ylim()[1] * 0.95, f" {fault['fault']}", color="red", fontsize=8)
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("packets/s received by servers")
    ax.set_title("Throughput over time, faults marked")


def _loss(ax: Axes, loss_ms: dict[str, float]) -> None:
    ax.barh(list(loss_ms), list(loss_ms.values()), color="C3")
    ax.set_xlabel("loss window (ms)")
    ax.set_title("Loss window per fault")


def write(obs: Observations, out: Path, loss_ms: dict[str, float] | None = None) -> list[Path]:
    """Write the plots that have data into `out`; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    uplinks, rate = uplink_packets(obs), server_rx_rate(obs)
    plots: list[tuple[str, tuple[int, int], Callable[[Axes], None]]] = []
    if uplinks:
        plots.append(("uplinks.png", (10, 4), lambda ax: _uplinks(ax, uplinks)))
    if rate:
        plots.append(("throughput.png", (10, 4), lambda ax: _throughput(ax, obs, rate)))
    if loss_ms:
        plots.append(("loss.png", (8, 3), lambda ax: _loss(ax, loss_ms)))
    written = []
    for name, size, draw in plots:
        fig, ax = plt.subplots(figsize=size)
        draw(ax)
        fig.tight_layout()
        fig.savefig(out / name, dpi=90)
        plt.close(fig)
        written.append(out / name)
    return written
