"""The incidents of examples/incidents before and after their fix, on the simulator: prints
each one's figures (the table in docs/simulator.md) and copies each run's plots into
docs/img/incidents/<incident>-<before|after>-<plot>.png.

    .venv/bin/python bench/bench_incidents.py [OUT_DIR] [--write]

`--write` puts the figures, a row per run, into the block `incidents` of docs/simulator.md and
records them (bench/blocks.py).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import blocks  # noqa: E402
from twin.change.incident import build  # noqa: E402

IMAGES = REPO / "docs" / "img" / "incidents"


def figures(run: Path) -> dict[str, Any]:
    """What a run shows: verdicts, PFC, drops, iterations, events."""
    report = json.loads((run / "report.json").read_text())["results"]
    pfc = json.loads((run / "pfc.json").read_text())
    events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines() if x]
    out: dict[str, Any] = {
        "failed": sorted(
            {f"{r['validator']}/{r['scope']}" for r in report if r["status"] == "fail"}
        ),
        "pause_frames": sum(r["pause_sent"] for r in pfc),
        "paused_ms_max": round(max((r["paused_s"] for r in pfc), default=0.0) * 1e3, 3),
        "ports_paused": sum(1 for r in pfc if r["paused_s"] > 0),
        "paused_ms_total": round(sum(r["paused_s"] for r in pfc) * 1e3, 3),
        "lossless_drops": sum(r["drops"]["lossless"] for r in pfc),
        "events": sorted({e["event"] for e in events if e["event"] not in ("run-start", "fault")}),
    }
    bulk = [f for f in json.loads((run / "flows.json").read_text()) if f["class"] != "roce"]
    if bulk:  # the backup's transport at work: what it got through, resent, waited for
        sent = sum(f["sent"] for f in bulk)
        out["bulk_transport"] = sorted({f.get("transport", "open") for f in bulk})
        out["bulk_goodput_gbps"] = round(sum(f["goodput_bps"] for f in bulk) / 1e9, 1)
        out["bulk_lost_pct"] = round(100 * sum(f["lost"] for f in bulk) / sent, 2) if sent else 0
        out["bulk_retransmitted"] = sum(f.get("retransmitted", 0) for f in bulk)
        out["bulk_timeouts"] = sum(f.get("timeouts", 0) for f in bulk)
    iterations = run / "iterations.json"
    if iterations.exists():
        for label, it in json.loads(iterations.read_text()).items():
            times = [t for t in it["times_s"] if t is not None]
            out[f"{label}_mean_ms"] = round(statistics.fmean(times) * 1e3, 3)
            out[f"{label}_std_ms"] = round(statistics.pstdev(times) * 1e3, 3)
            out[f"{label}_max_ms"] = round(max(times) * 1e3, 3)
    return out


HEADER = [
    "| incident | run | fails | pause frames | ports paused: ms in all, the most "
    "| lossless drops | iterations: mean, std dev, max | events | bulk: goodput, lost, resent "
    "(timeouts) |",
    "|---|---|---|---|---|---|---|---|---|",
]


def row(incident: str, which: str, f: dict[str, Any]) -> str:
    """One run's figures as a row of the block `incidents`."""
    fails = ", ".join(f"`{name}`" for name in f["failed"]) or "nothing"
    means = [k.removesuffix("_mean_ms") for k in f if k.endswith("_mean_ms")]
    iterations = "; ".join(
        f"{f[k + '_mean_ms']:.3f}, {f[k + '_std_ms']:.3f}, {f[k + '_max_ms']:.3f} ms" for k in means
    )
    bulk = (
        f"{f['bulk_goodput_gbps']} Gb/s, {f['bulk_lost_pct']} %, {f['bulk_retransmitted']} "
        f"({f['bulk_timeouts']})"
        if "bulk_goodput_gbps" in f
        else ""
    )
    return (
        f"| {incident} | {which} | {fails} | {f['pause_frames']} | {f['ports_paused']}: "
        f"{f['paused_ms_total']:.1f}, {f['paused_ms_max']:.1f} | {f['lossless_drops']} "
        f"| {iterations} | {', '.join(f['events'])} | {bulk} |"
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, help="where the labs go (default: /tmp)")
    parser.add_argument("--write", action="store_true", help="the figures into the docs' block")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="incidents-"))
    IMAGES.mkdir(parents=True, exist_ok=True)
    rows = list(HEADER)
    for incident in sorted(p for p in (REPO / "examples" / "incidents").iterdir() if p.is_dir()):
        labs = build(incident, out / incident.name)
        for which, lab in zip(("before", "after"), labs, strict=True):
            started = time.monotonic()
            subprocess.run(
                [sys.executable, "-m", "twin.cli.main", "run", "--backend", "sim", "--no-static",
                 str(lab), str(incident / "scenario.yaml")],
                capture_output=True, text=True, env={"PYTHONPATH": str(REPO)}, check=False,
            )  # fmt: skip
            wall = time.monotonic() - started
            run = sorted((lab / "runs").iterdir())[-1]
            found = figures(run)
            print(f"{incident.name} {which} ({wall:.1f} s): {json.dumps(found)}")
            rows.append(row(incident.name, which, found))
            for png in run.glob("*.png"):
                if png.name in ("pause.png", "queues.png", "iterations.png"):
                    shutil.copyfile(png, IMAGES / f"{incident.name}-{which}-{png.name}")
    if args.write:
        for path in blocks.write("incidents", "\n".join(rows)):
            print(f"rewrote {path.relative_to(REPO)}: incidents")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
