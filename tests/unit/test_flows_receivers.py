"""labs.flows.stop_receivers: every receiver is told to stop before any is waited for."""

from __future__ import annotations

from typing import Any, cast

import pytest

from labs import flows
from traffic.flowstats import MarkCounts, ReceiverResult
from traffic.receiver import Receiver


class Told:
    """A receiver that logs when it is told to stop and when its result is collected."""

    def __init__(self, name: str, log: list[tuple[str, str]], fails: bool = False) -> None:
        self.name, self.log, self.fails = name, log, fails

    def tell_stop(self) -> None:
        self.log.append(("tell", self.name))

    def result(self) -> Any:
        self.log.append(("result", self.name))
        if self.fails:
            raise RuntimeError(f"{self.name} died")
        none = MarkCounts(0, {}, {})
        return ReceiverResult({}, none, 0, 0, none)


def test_all_are_told_before_any_is_collected() -> None:
    log: list[tuple[str, str]] = []
    receivers = {n: cast(Receiver, Told(n, log)) for n in ("server1", "server2", "server3")}
    received = flows.stop_receivers(receivers)
    assert [kind for kind, _ in log] == ["tell"] * 3 + ["result"] * 3
    assert sorted(received) == ["server1", "server2", "server3"] and receivers == {}


def test_the_ones_not_collected_stay_for_the_caller_to_close() -> None:
    log: list[tuple[str, str]] = []
    receivers = {
        "server1": cast(Receiver, Told("server1", log)),
        "server2": cast(Receiver, Told("server2", log, fails=True)),
        "server3": cast(Receiver, Told("server3", log)),
    }
    with pytest.raises(RuntimeError, match="server2 died"):
        flows.stop_receivers(receivers)
    assert list(receivers) == ["server3"]
