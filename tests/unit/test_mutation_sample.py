"""A fixed sample of the mutation campaign (`bench/bench_mutations.py`) on examples/small.yaml:
each harmful mutation is caught by `twin validate` with a failing finding on the mutated
device (or, where the file no longer describes the lab, refused in one line naming it), each
harmless one passes. Impacts come from the bench's oracle (the intent), not the validators."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mutations import Campaign

SAMPLE = [
    ("leaf1", "PORT|Ethernet0.lanes", "value", "caught"),
    ("leaf1", "PORT|Ethernet0.fec", "removed", "caught"),
    ("spine1", "PORT|Ethernet0<->Ethernet8.index", "swapped", "caught"),
    ("leaf1", "PORT|Ethernet0.mtu", "removed", "passes"),
    ("leaf1", "PORT|Ethernet0.description", "value", "passes"),
    ("leaf1", "LOOPBACK_INTERFACE|*", "removed", "caught"),
    ("leaf1", "PORTCHANNEL|PortChannel100.fast_rate", "value", "caught"),
    ("leaf1", "PORTCHANNEL|PortChannel100.min_links", "removed", "passes"),
    ("leaf1", "PORTCHANNEL|*", "removed", "refused"),
    ("spine1", "BGP_NEIGHBOR|10.1.0.0.local_addr", "value", "caught"),
    ("spine1", "BGP_NEIGHBOR|10.1.0.0.admin_status", "removed", "passes"),
    ("leaf1", "BGP_NEIGHBOR|10.1.0.1.name", "value", "passes"),
    ("leaf1", "VLAN|Vlan1001.admin_status", "value", "caught"),
    ("leaf1", "VLAN|Vlan1001.mtu", "removed", "passes"),
    ("leaf1", "MCLAG_DOMAIN|1.keepalive_interval", "removed", "caught"),
    ("leaf1", "MCLAG_UNIQUE_IP|Vlan1001.unique_ip", "removed", "caught"),
    ("leaf1", "DSCP_TO_TC_MAP|RDMA.10", "value", "caught"),
    ("spine1", "TC_TO_QUEUE_MAP|RDMA.1", "removed", "caught"),
    ("spine1", "TC_TO_QUEUE_MAP|RDMA.6", "value", "caught"),
    ("spine1", "TC_TO_QUEUE_MAP|RDMA.6", "invalid", "refused"),
    ("spine1", "TC_TO_PRIORITY_GROUP_MAP|RDMA.0", "value", "caught"),
    ("leaf1", "SCHEDULER|scheduler.rdma.type", "removed", "caught"),
    ("leaf1", "WRED_PROFILE|RDMA_ECN.green_drop_probability", "value", "caught"),
    ("spine1", "WRED_PROFILE|RDMA_ECN.wred_yellow_enable", "value", "caught"),
    ("spine1", "WRED_PROFILE|RDMA_ECN.wred_red_enable", "removed", "passes"),
    ("leaf1", "BUFFER_POOL|ingress_lossless_pool<->egress_lossless_pool.mode", "swapped", "caught"),
    ("spine1", "BUFFER_PROFILE|ingress_lossy_profile.dynamic_th", "removed", "caught"),
    ("leaf1", "BUFFER_QUEUE|*", "removed", "caught"),
    ("leaf1", "PORT_QOS_MAP|Ethernet0.pfc_to_queue_map", "removed", "caught"),
    ("spine1", "PFC_WD|Ethernet0.restoration_time", "value", "caught"),
    ("leaf1", "bfd", "removed", "caught"),
    ("spine1", "transmit-interval 300", "value", "caught"),
    ("leaf1", "network 10.0.0.3/32", "removed", "caught"),
    ("spine1", "maximum-paths 64", "value", "caught"),
    ("leaf1", "hostname leaf1", "removed", "passes"),
    ("leaf1", "neighbor 10.1.0.1 description spine1", "value", "passes"),
    ("server1", "hostname", "removed", "passes"),
    ("server1", "interfaces.0.gateway", "value", "caught"),
    ("server1", "dscp_marking.0.ports.0", "removed", "caught"),
    ("server1", "dscp_marking.0.class", "removed", "passes"),
    ("server1", "dscp_marking.0.dscp", "removed", "caught"),
    ("server1", "mtu", "removed", "caught"),
    ("server1", "rdma.cnp_dscp", "value", "caught"),
    ("server1", "rdma.dcqcn.initial_alpha", "value", "caught"),
    ("server1", "rdma.devices.0.netdev", "value", "caught"),
    ("server1", "routes.0.nexthops.1.dev", "removed", "caught"),
    ("server1", "interfaces.0.peer_port", "removed", "caught"),
    ("server1", "interfaces.0.name", "removed", "refused"),
    ("server1", "address", "removed", "refused"),
    ("server1", "rdma.ecn", "removed", "caught"),
    ("server1", "rdma.pfc_priority", "value", "caught"),
    ("server1", "interfaces.1.peer_port", "value", "caught"),
]
"""(device, where, kind, what `twin validate` must do): caught, refused or passes."""


@pytest.mark.parametrize(("device", "where", "kind", "does"), SAMPLE)
def test_a_sampled_mutation_is_judged_as_its_impact_says(
    campaign: Campaign, tmp_path: Path, device: str, where: str, kind: str, does: str
) -> None:
    impact, outcome = campaign.judge(device, where, kind, tmp_path, sim=False)
    assert impact == ("harmless" if does == "passes" else "harmful")
    assert outcome == {"passes": "missed"}.get(does, does)
