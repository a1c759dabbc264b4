"""PNG plots of a run's data plane, when a simulator observed it (`pfc.json`, `queues.json`,
`iterations.json`), for the Markdown report; times are simulated milliseconds, and only what
happened inside the simulated span is marked on them (docs/plots.md):

- `pause.png`: how long each port was paused (as an egress, by its peer's pause frames), per
  priority, the most paused ports first, each named with the node at its other end, with
  the share of the run `pfc_behaviour` calls a storm;
- `queues.png`: the occupancy of the fullest egress queues over time, with the WRED
  thresholds (Kmin, Kmax) their configs give them, faults and traffic phases marked;
- `pgs.png`: the occupancy of the fullest lossless ingress priority groups, with the level
  at which they send XOFF when alone in the shared pool (reserved + alpha/(1 + alpha) of the
  pool, SONiC's dynamic threshold);
- `iterations.png`: each collective iteration as a bar as wide as it lasted and as high as
  its duration, with the analytical bound, faults and phases marked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from twin.lab.directory import Lab
from twin.render.config_db import ConfigDb, by_port, number, wred
from twin.scenario.observations import Observations
from twin.scenario.occupancy import peak
from twin.scenario.records import FaultRecord

if TYPE_CHECKING:
    from matplotlib.axes import Axes

TOP = 6
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")


def sim_ms(obs: Observations, t: float) -> float:
    """A time of the run (live clock in a hybrid run) in simulated milliseconds."""
    plane = obs.run.get("data_plane")
    if plane:
        return (t - float(obs.run["started"])) * float(plane["time_scale"]) * 1e3
    return (t - float(obs.run["started"])) * 1e3


def span_ms(obs: Observations) -> float:
    """How long the simulator ran, in simulated milliseconds."""
    sim = obs.extra("sim") or {}
    if "simulated_s" in sim:
        return float(sim["simulated_s"]) * 1e3
    return sim_ms(obs, float(obs.run["ended"]))


def scale(largest: float) -> tuple[float, str]:
    """(divisor, unit) that writes byte counts up to `largest` readably.

    >>> scale(45e6), scale(120e3), scale(900)
    ((1000000.0, 'MB'), (1000.0, 'KB'), (1.0, 'B'))
    """
    for divisor, unit in ((1e6, "MB"), (1e3, "KB")):
        if largest >= divisor:
            return divisor, unit
    return 1.0, "B"


def faults(ax: Axes, obs: Observations, at: list[tuple[float, FaultRecord]]) -> None:
    """Faults at their x (on the axes' current span) as red dashed lines named by the fault;
    those outside the span are listed in a corner, not drawn past it."""
    lo, hi = ax.get_xlim()
    outside = []
    for i, (x, fault) in enumerate(at):
        name = f"fault{i + 1} {fault['fault']} {fault.get('link') or fault.get('node', '')}"
        if not lo <= x <= hi:
            outside.append(name)
            continue
        ax.axvline(x, color="red", ls="--", lw=0.9)
        ax.text(
            x,
            0.98,
            f" {name}",
            color="red",
            fontsize=7,
            rotation=90,
            va="top",
            transform=ax.get_xaxis_transform(),
        )
    if outside:
        ax.text(
            0.99,
            0.5,
            "outside the span: " + "; ".join(outside),
            fontsize=7,
            color="red",
            ha="right",
            va="center",
            transform=ax.transAxes,
        )
    ax.set_xlim(lo, hi)


def _marks(ax: Axes, obs: Observations) -> None:
    """The simulated span, its non-collective phases as grey spans, and its faults."""
    ax.set_xlim(0, span_ms(obs))
    bulk = [p for p in obs.run.get("phases", []) if p["kind"] not in COLLECTIVES]
    for i, phase in enumerate(bulk):
        lo, hi = sim_ms(obs, float(phase["start"])), sim_ms(obs, float(phase["end"]))
        ax.axvspan(lo, hi, color="grey", alpha=0.12)
        ax.text(
            lo,
            0.02 + 0.06 * i,
            f" {phase['label']} ({phase['kind']})",
            fontsize=7,
            color="dimgrey",
            transform=ax.get_xaxis_transform(),
        )
    faults(ax, obs, [(sim_ms(obs, float(f["t"])), f) for f in obs.run.get("faults", [])])


def _peers(rows: list[dict[str, Any]]) -> dict[str, str]:
    """`node:port` -> the node at its other end."""
    return {r["port"]: str(r.get("peer", "")).split(":")[0] for r in rows}


def _label(port: str, peers: dict[str, str]) -> str:
    return f"{port} -> {peers[port]}" if peers.get(port) else port


def _pause(
    ax: Axes, rows: list[dict[str, Any]], peers: dict[str, str], storm: float, span: float
) -> None:
    top = sorted((r for r in rows if r["paused_s"] > 0), key=lambda r: -r["paused_s"])[:8]
    names = [f"{_label(r['port'], peers)} (prio {r['priority']})" for r in reversed(top)]
    paused = [r["paused_s"] * 1e3 for r in reversed(top)]
    ax.barh(names, paused, color=["tab:red" if p > storm * span else "tab:orange" for p in paused])
    ax.axvline(storm * span, color="black", ls=":", lw=1, label=f"storm: {storm:.0%} of the run")
    ax.set_xlabel("time paused by the peer's PFC frames (ms of simulated time)")
    ax.set_title("PFC: the most paused ports (red: over the storm limit)")
    ax.legend(fontsize=7, loc="lower right")


def _fullest(series: Mapping[str, Mapping[str, list[int]]]) -> list[tuple[str, int, list[int]]]:
    """(port, index, values) of the TOP fullest series, fullest first."""
    flat = [(peak(v), port, int(i), v) for port, byi in series.items() for i, v in byi.items()]
    return [(port, i, v) for _, port, i, v in sorted(flat, key=lambda s: -s[0])[:TOP]]


def _lines(
    ax: Axes,
    obs: Observations,
    top: list[tuple[str, int, list[int]]],
    what: str,
    limits: dict[str, float],
    peers: dict[str, str],
    interval: float,
) -> None:
    """The series and their thresholds, in a unit that keeps them readable; a threshold far
    above the data is written at the top instead of squashing the data."""
    peak = max(max(v) for _, _, v in top)
    shown = {k: v for k, v in limits.items() if v <= 3 * peak}
    divisor, unit = scale(max([peak, *shown.values()]))
    for port, i, values in top:
        times = [k * interval * 1e3 for k in range(len(values))]
        ax.plot(
            times, [v / divisor for v in values], lw=1, label=f"{_label(port, peers)} {what} {i}"
        )
    for k, (name, level) in enumerate(sorted(limits.items(), key=lambda kv: kv[1])):
        if name in shown:
            ax.axhline(
                level / divisor,
                color="black",
                ls=("--", ":", "-.")[k % 3],
                lw=1,
                label=f"{name} {level / scale(level)[0]:.3g} {scale(level)[1]}",
            )
        else:
            ax.text(
                0.01,
                0.97 - 0.06 * k,
                f"{name} {level / scale(level)[0]:.3g} {scale(level)[1]} (above the plot)",
                fontsize=7,
                va="top",
                transform=ax.transAxes,
            )
    _marks(ax, obs)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("simulated time (ms)")
    ax.set_ylabel(f"occupancy ({unit})")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def wred_limits(lab: Lab | None, top: list[tuple[str, int, list[int]]]) -> dict[str, float]:
    """Kmin and Kmax of the plotted queues (named per queue when they differ)."""
    curves = {}
    for port, q, _ in top:
        node, name = port.split(":")
        curve = wred(lab.config_db(node), name, q) if lab else None
        if curve:
            curves[f"{port} queue {q}"] = curve
    if len({c[:2] for c in curves.values()}) == 1:
        kmin, kmax, _ = next(iter(curves.values()))
        queues = ",".join(sorted({key.rsplit(" ", 1)[1] for key in curves}))
        return {f"Kmin (queue {queues})": kmin, f"Kmax (queue {queues})": kmax}
    return {f"{k} {n}": c[j] for k, c in curves.items() for j, n in ((0, "Kmin"), (1, "Kmax"))}


def xoff_level(db: ConfigDb, port: str, pg: int) -> float | None:
    """Bytes at which a lossless PG sends XOFF when alone in its shared pool: reserved +
    alpha/(1 + alpha) of the pool (dynamic_th n: alpha 2^n), or reserved + static_th; None
    for a PG without headroom (lossy)."""
    return _xoff(db, by_port(db, "BUFFER_PG").get(port, {}).get(pg, {}))


def xoff_levels(db: ConfigDb) -> dict[str, dict[int, float]]:
    """Per port, the `xoff_level` of each of its lossless PGs."""
    levels: dict[str, dict[int, float]] = {}
    for port, entries in by_port(db, "BUFFER_PG").items():
        for pg, entry in entries.items():
            level = _xoff(db, entry)
            if level is not None:
                levels.setdefault(port, {})[pg] = level
    return levels


def _xoff(db: ConfigDb, entry: Mapping[str, Any]) -> float | None:
    """`xoff_level` of a BUFFER_PG entry."""
    profile = db.get("BUFFER_PROFILE", {}).get(str(entry.get("profile", "")).strip("[]"), {})
    if "xoff" not in profile:
        return None
    reserved = number(profile.get("size")) - number(profile["xoff"])
    if "static_th" in profile:
        return float(reserved + number(profile["static_th"]))
    pool = db.get("BUFFER_POOL", {}).get(str(profile.get("pool", "")).strip("[]"), {})
    alpha = 2.0 ** int(str(profile.get("dynamic_th", "0")))
    return reserved + number(pool.get("size")) * alpha / (1 + alpha)


def lossless_pgs(
    lab: Lab, series: Mapping[str, Mapping[str, list[int]]]
) -> dict[str, dict[str, list[int]]]:
    """The series of PGs with headroom (lossless) in their switch's configs (read once per
    switch)."""
    switches = set(lab.switches())
    levels: dict[str, dict[str, dict[int, float]]] = {}
    out: dict[str, dict[str, list[int]]] = {}
    for port, pgs in series.items():
        node, name = port.split(":")
        if node not in switches:
            continue
        if node not in levels:
            levels[node] = xoff_levels(lab.config_db(node))
        lossless = levels[node].get(name, {})
        kept = {pg: v for pg, v in pgs.items() if int(pg) in lossless}
        if kept:
            out[port] = kept
    return out


def xoff_limits(lab: Lab | None, top: list[tuple[str, int, list[int]]]) -> dict[str, float]:
    """The XOFF levels of the plotted PGs (named per PG when they differ)."""
    levels = {}
    for port, pg, _ in top:
        node, name = port.split(":")
        level = xoff_level(lab.config_db(node), name, pg) if lab else None
        if level is not None:
            levels[f"{port} PG {pg}"] = level
    if len(set(levels.values())) == 1:
        return {"XOFF (alone in the pool; lower when PGs share it)": next(iter(levels.values()))}
    return {f"{k} XOFF": v for k, v in levels.items()}


def _iterations(ax: Axes, obs: Observations, iterations: dict[str, Any]) -> None:
    for i, (label, it) in enumerate(sorted(iterations.items())):
        phase = obs.phase(label)
        start = sim_ms(obs, float(phase["start"]))
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


Plot = tuple[str, tuple[float, float], Callable[["Axes"], None]]


def plots(
    obs: Observations, lab: Lab | None, params: Mapping[str, Mapping[str, Any]]
) -> list[Plot]:
    """The data plane's plots that have data: (file, size, drawing)."""
    rows: list[dict[str, Any]] = obs.extra("pfc") or []
    peers = _peers(rows)
    out: list[Plot] = []
    if any(r["paused_s"] > 0 for r in rows):
        storm = float(params.get("pfc_behaviour", {}).get("storm_share", 0.2))
        span = span_ms(obs)
        out.append(("pause.png", (10, 4), lambda ax: _pause(ax, rows, peers, storm, span)))
    occupancy = obs.extra("queues") or {}
    interval = float(occupancy.get("interval", 0))
    for name, key, what, limits, title in (
        ("queues.png", "queues", "queue", wred_limits, "egress queues and their WRED/ECN levels"),
        ("pgs.png", "pgs", "PG", xoff_limits, "lossless ingress PGs and their XOFF level"),
    ):
        series = occupancy.get(key) or {}
        if key == "pgs" and lab is not None:
            series = lossless_pgs(lab, series)
        top = [s for s in _fullest(series) if max(s[2]) > 0]
        if top:

            def paint(
                ax: Axes, top: Any = top, what: str = what, limits: Any = limits, title: str = title
            ) -> None:
                _lines(ax, obs, top, what, limits(lab, top), peers, interval)
                ax.set_title(f"The fullest {title}")

            out.append((name, (10, 4), paint))
    iterations = obs.extra("iterations")
    if iterations and any(t is not None for it in iterations.values() for t in it["times_s"]):
        out.append(("iterations.png", (10, 4), lambda ax: _iterations(ax, obs, iterations)))
    return out
