"""Each NIC runs its own DCQCN: a 4:1 incast at 40 Gb/s for 5 ms where one NIC's settings
differ from the others' (its host file's, `labs.sim.lab.dcqcn`): a sender whose ECN is off
ignores the CNPs it gets and keeps the line rate, a receiver whose ECN is off sends none (every
sender at line rate, the switch pausing), a sender whose traffic class is Not-ECT is never
marked, a sender's own DCQCN floor holds it there. Healthy, all four share the link on ECN
marks without a pause. A sender whose host file puts RoCE on priority 4 is not held by the
switch's pauses on priority 3: its frames overflow the headroom.
"""

from __future__ import annotations

import dataclasses

from labs.sim import Result, simulate
from labs.sim.fabrics import dumbbell
from labs.sim.lab import host_profile
from labs.sim.model import Dcqcn, Host

LINE = 40e9
ECN_OFF = Dcqcn(reaction=False, notification=False)


def incast(*changed: Host, **nics: Dcqcn) -> Result:
    """The 4:1 incast (senders s0-s3, receiver r), the named NICs with their own DCQCN, the
    `changed` hosts instead of theirs."""
    exp = dumbbell(4)
    given = {h.name: h for h in changed}
    hosts = [given.get(h.name, dataclasses.replace(h, dcqcn=nics.get(h.name))) for h in exp.hosts]
    return simulate(dataclasses.replace(exp, hosts=hosts, duration=0.005), 1)


def rates(result: Result) -> dict[str, float]:
    return {f.src: f.rate for f in result.flows}


def test_healthy_nics_share_the_link_on_ecn_marks_alone() -> None:
    result = incast()
    assert all(f.cnps > 0 and f.rate < LINE / 2 for f in result.flows)
    assert result.total("pause_sent") == 0


def test_a_sender_with_ecn_off_ignores_cnps_and_the_switch_pauses() -> None:
    result = incast(s0=ECN_OFF)
    s0 = result.flow("f0")
    assert s0.cnps > 0 and s0.rate == LINE
    assert all(r < LINE / 4 for src, r in rates(result).items() if src != "s0")
    assert result.total("pause_sent") > 0


def test_a_receiver_with_ecn_off_sends_no_cnp() -> None:
    result = incast(r=ECN_OFF)
    assert all(f.cnps == 0 and f.ecn_marks > 0 and f.rate == LINE for f in result.flows)
    assert result.total("pause_sent") > 0


def test_a_sender_not_ect_is_never_marked() -> None:
    result = incast(s0=Dcqcn(ect=False))
    assert result.flow("f0").ecn_marks == 0 and result.flow("f0").rate == LINE
    assert all(f.ecn_marks > 0 for f in result.flows if f.src != "s0")


def test_a_senders_own_floor_holds_its_rate() -> None:
    result = incast(s0=Dcqcn(min_rate=20e9))
    assert rates(result)["s0"] >= 20e9
    assert all(r < 10e9 for src, r in rates(result).items() if src != "s0")


def test_a_sender_on_another_priority_overflows_the_headroom_when_paused() -> None:
    on_4 = Host("s0", qos=host_profile({"rdma": {"dscp": 26, "pfc_priority": 4}}))
    result = incast(on_4, r=ECN_OFF)
    assert result.flow("f0").bytes_dropped > 0
    assert all(f.bytes_dropped == 0 for f in result.flows if f.src != "s0")
    assert result.port("a:Ethernet0").priorities[3].drops_lossless > 0
