"""PNG plots of a run's data plane, when a simulator observed it (`pfc.json`, `queues.json`,
`iterations.json`), for the Markdown report; times are simulated milliseconds:

- `pause.png`: how long each port was paused (as an egress, by its peer's pause frames), per
  priority, the most paused ports first, each named with the node at its other end;
- `queues.png`: the occupancy of the fullest egress queues over time, faults and traffic
  phases marked;
- `iterations.png`: each collective iteration as a bar as wide as it lasted and as high as
  its duration, with the analytical bound, faults and phases marked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from twin.scenario.observations import Observations

if TYPE_CHECKING:
    from matplotlib.axes import Axes

TOP = 8


def sim_ms(obs: Observations, t: float) -> float:
    """A time of the run (live clock in a hybrid run) in simulated milliseconds."""
    plane = obs.run.get("data_plane")
    if plane:
        return (t - float(obs.run["started"])) * float(plane["time_scale"]) * 1e3
    return (t - float(obs.run["started"])) * 1e3


def _peers(rows: list[dict[str, Any]]) -> dict[str, str]:
    """`node:port` -> the node at its other end."""
    return {r["port"]: str(r.get("peer", "")).split(":")[0] for r in rows}


def _label(port: str, peers: dict[str, str]) -> str:
    return f"{port} -> {peers[port]}" if peers.get(port) else port


def _marks(ax: Axes, obs: Observations) -> None:
    """Faults as red dashed lines named by the fault, non-collective phases as grey spans."""
    for i, fault in enumerate(obs.run.get("faults", [])):
        t = sim_ms(obs, float(fault["t"]))
        target = fault.get("link") or fault.get("node", "")
        ax.axvline(t, color="red", ls="--", lw=0.9)
        ax.text(
            t,
            0.98,
            f" fault{i + 1} {fault['fault']} {target}",
            color="red",
            fontsize=7,
            rotation=90,
            va="top",
            transform=ax.get_xaxis_transform(),
        )
    bulk = [
        p
        for p in obs.run.get("phases", [])
        if p["kind"] not in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
    ]
    for i, phase in enumerate(bulk):
        lo, hi = sim_ms(obs, float(phase["start"])), sim_ms(obs, float(phase["end"]))
        ax.axvspan(lo, hi, color="grey", alpha=0.12)
        ax.text(
            lo, 0.02 + 0.06 * i, f" {phase['label']} ({phase['kind']})", fontsize=7,
            color="dimgrey", transform=ax.get_xaxis_transform(),
        )  # fmt: skip


def _pause(ax: Axes, rows: list[dict[str, Any]], peers: dict[str, str]) -> None:
    top = sorted((r for r in rows if r["paused_s"] > 0), key=lambda r: -r["paused_s"])[:TOP]
    names = [f"{_label(r['port'], peers)} (prio {r['priority']})" for r in reversed(top)]
    ax.barh(names, [r["paused_s"] * 1e3 for r in reversed(top)], color="C3")
    ax.set_xlabel("time paused by the peer's PFC frames (ms of simulated time)")
    ax.set_title("PFC: the most paused ports")


def _queues(ax: Axes, obs: Observations, occupancy: dict[str, Any], peers: dict[str, str]) -> None:
    interval = float(occupancy["interval"])
    series = [
        (max(values), port, int(q), values)
        for port, queues in occupancy["queues"].items()
        for q, values in queues.items()
    ]
    for _, port, q, values in sorted(series, key=lambda s: -s[0])[:6]:
        times = [i * interval * 1e3 for i in range(len(values))]
        ax.plot(times, [v / 1e3 for v in values], lw=1, label=f"{_label(port, peers)} queue {q}")
    _marks(ax, obs)
    ax.set_xlabel("simulated time (ms)")
    ax.set_ylabel("egress queue occupancy (KB)")
    ax.set_title("The fullest egress queues")
    ax.legend(fontsize=7, loc="upper right")


def _iterations(ax: Axes, obs: Observations, iterations: dict[str, Any]) -> None:
    for i, (label, it) in enumerate(sorted(iterations.items())):
        phase = obs.phase(label)
        start = sim_ms(obs, float(phase["start"])) if obs.run.get("data_plane") else 0.0
        starts, durations = [], []
        t = start
        for d in it["times_s"]:
            if d is None:
                break
            starts.append(t)
            durations.append(d * 1e3)
            t += d * 1e3
        ax.bar(
            starts,
            durations,
            width=durations,
            align="edge",
            color=f"C{i}",
            alpha=0.7,
            edgecolor="black",
            lw=0.4,
            label=f"{label}: iteration time (bar spans it)",
        )
        bound = (phase.get("analytical") or {}).get("bound_s")
        if bound:
            ax.axhline(bound * 1e3, color=f"C{i}", ls=":", lw=1, label=f"{label}: analytical bound")
    _marks(ax, obs)
    ax.set_xlabel("simulated time (ms)")
    ax.set_ylabel("iteration time (ms)")
    ax.set_title("Collective iterations")
    ax.legend(fontsize=7, loc="upper right")


def plots(obs: Observations) -> list[tuple[str, tuple[int, int], Callable[[Axes], None]]]:
    """The data plane's plots that have data: (file, size, drawing)."""
    rows: list[dict[str, Any]] = obs.extra("pfc") or []
    peers = _peers(rows)
    out: list[tuple[str, tuple[int, int], Callable[[Axes], None]]] = []
    if any(r["paused_s"] > 0 for r in rows):
        out.append(("pause.png", (10, 4), lambda ax: _pause(ax, rows, peers)))
    occupancy = obs.extra("queues")
    if occupancy and occupancy.get("queues"):
        out.append(("queues.png", (10, 4), lambda ax: _queues(ax, obs, occupancy, peers)))
    iterations = obs.extra("iterations")
    if iterations:
        out.append(("iterations.png", (10, 4), lambda ax: _iterations(ax, obs, iterations)))
    return out
