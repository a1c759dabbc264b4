"""The wall-clock timeline's counter samples, with an observer slow to answer (a loaded
machine, a container engine that takes seconds to name a container's process): a baseline
read before the run starts, and each sample stamped when its read ended."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

from labs import timeline
from labs.backend import Backend, Session, Timeline, quiet
from twin.lab.directory import Lab
from twin.model.fib import Fib

READ_S = 0.25


class SlowObserver:
    """Every read takes READ_S; each port's counter is the time it was read, in ms."""

    def fib(self) -> Fib:
        return Fib({})

    def counters(self) -> dict[str, list[int]]:
        time.sleep(READ_S)
        return {"leaf1:Ethernet0": [int(time.time() * 1000)]}

    def bgp(self) -> list[Session]:
        return []

    @contextlib.contextmanager
    def watch(self) -> Iterator[list[dict[str, Any]]]:
        yield []


class Idle:
    """A backend with nothing to play but its observer."""

    def observer(self, lab: Lab) -> SlowObserver:
        return SlowObserver()


class Dir:
    """The one thing of a lab the timeline writes to: its directory (events.jsonl)."""

    def __init__(self, path: Path) -> None:
        self.path = path


def test_samples_hold_the_values_of_their_time(tmp_path: Path) -> None:
    run = Timeline(
        scenario="idle", duration=0.8, sample_interval=0.1, phases=[], faults=[], captures=[],
        probes=False,
    )  # fmt: skip
    played = timeline.play(cast(Backend, Idle()), cast(Lab, Dir(tmp_path)), run, quiet)
    samples = played.counters["samples"]
    # the baseline and the sample taken when the run ends, whatever the load; samples in
    # between depend on how the machine schedules the sampler, so none is counted on
    assert len(samples) >= 2
    assert samples[0]["t"] <= played.started  # the baseline, before any traffic could start
    (last_ms,) = samples[-1]["c"]["leaf1:Ethernet0"]
    assert last_ms >= (played.started + run.duration) * 1000 - 1  # read once the run ended
    for sample in samples:
        (read_ms,) = sample["c"]["leaf1:Ethernet0"]
        assert read_ms <= sample["t"] * 1000 + 1, sample  # read at or before its stamp
    stamps = [s["t"] for s in samples]
    assert stamps == sorted(stamps)
