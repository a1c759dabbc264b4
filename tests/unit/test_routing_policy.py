"""Routing policy in the routing model: FRR's prefix-lists, route-maps, AS-path and community
lists and `maximum-paths` read from frr.conf, applied as FRR applies them, and a policy that
black-holes or narrows a prefix found naming the switch, the neighbour and the prefix.

The labs are generated ones edited the way a person edits frr.conf: a policy definition at
the top level, its binding in the `address-family ipv4 unicast` block.
"""

from __future__ import annotations

import shutil
from ipaddress import IPv4Network
from itertools import combinations
from pathlib import Path

import pytest

from twin.cli import main as cli
from twin.errors import InputError
from twin.lab.directory import Lab
from twin.model.fib import applied
from twin.model.frr import parse_frr
from twin.model.policy import Attrs
from twin.model.routing import Routing
from twin.model.wiring import Wiring, links
from validators import registry
from validators.examples import add_frr_policy as bind
from validators.examples import generate
from validators.result import Finding, Status

REPO = Path(__file__).resolve().parents[2]
ROUTER = "frr defaults datacenter\nrouter bgp 65101\n address-family ipv4 unicast\n"
P = IPv4Network


def conf(top: str, af: str = "") -> str:
    """An frr.conf with `top` lines and `af` lines in the IPv4 unicast family."""
    return f"{top}\n{ROUTER}{af}\n exit-address-family\nexit\n"


def subnet(lab: Lab, leaf: str) -> str:
    """A leaf's server subnet as its frr.conf announces it (`network` under ipv4 unicast)."""
    networks = [
        line.split()[1]
        for line in lab.frr_conf(leaf).splitlines()
        if line.strip().startswith("network ")
    ]
    return next(n for n in networks if not n.endswith("/32"))


def fib_findings(lab: Lab) -> list[Finding]:
    fib, _ = registry.run_static(lab, registry.select("static", ["fib_reachability"]), {})
    return list(fib.findings) if fib.status is Status.FAIL else []


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Lab]:
    root = tmp_path_factory.mktemp("policy")
    return {
        name: generate(root / name, REPO / "examples" / f"{name}.yaml")
        for name in ("reference", "small")
    }


@pytest.fixture
def reference(pristine: dict[str, Lab], tmp_path: Path) -> Lab:
    shutil.copytree(pristine["reference"].path, tmp_path / "reference")
    return Lab.open(tmp_path / "reference")


@pytest.fixture
def small(pristine: dict[str, Lab], tmp_path: Path) -> Lab:
    shutil.copytree(pristine["small"].path, tmp_path / "small")
    return Lab.open(tmp_path / "small")


# FRR's semantics, statement by statement


def test_prefix_list_entries_by_sequence_with_ge_le_and_an_implicit_deny() -> None:
    policy = parse_frr(
        conf(
            "ip prefix-list L seq 20 permit 10.2.0.0/16 le 24\n"
            "ip prefix-list L seq 10 deny 10.2.1.0/24\n"
            "ip prefix-list L permit 10.9.0.0/16 ge 28\n"
            "ip prefix-list E description nothing in it yet"
        ),
        "f",
    ).policy
    permits = policy.prefix_permits
    assert [e.seq for e in policy.prefix_lists["L"]] == [10, 20, 25]  # auto: next multiple of 5
    assert permits("L", P("10.2.1.0/24")) is False  # seq 10 first
    assert permits("L", P("10.2.2.0/24")) is True
    assert permits("L", P("10.2.2.0/25")) is False  # longer than le
    assert permits("L", P("10.9.0.0/27")) is False  # shorter than ge
    assert permits("L", P("10.9.0.16/28")) is True
    assert permits("L", P("10.3.0.0/16")) is False  # no entry: implicit deny
    assert permits("E", P("10.3.0.0/16")) is True  # a list with no entry permits
    assert permits("UNDEFINED", P("10.3.0.0/16")) is None


def test_route_map_entries_sets_and_an_implicit_deny() -> None:
    policy = parse_frr(
        conf(
            "ip prefix-list RACK seq 5 permit 10.2.0.32/27\n"
            "bgp as-path access-list VIA-65103 seq 5 permit _65103$\n"
            "bgp community-list standard TAGGED seq 5 permit 65000:7\n"
            "route-map RM deny 10\n match ip address prefix-list RACK\nexit\n"
            "route-map RM permit 20\n match as-path VIA-65103\n set local-preference 300\n"
            " set as-path prepend 65000 65000\n set community 65000:7 additive\nexit\n"
            "route-map RM permit 30\n match community TAGGED\nexit\n"
            "route-map RM permit 40\n match ip address prefix-list UNDEFINED\nexit"
        ),
        "f",
    ).policy
    apply = policy.route_map
    assert apply("RM", P("10.2.0.32/27"), Attrs((65000, 65103))) is None
    assert apply("RM", P("10.2.0.64/27"), Attrs((65000, 65103))) == Attrs(
        (65000, 65000, 65000, 65103), frozenset({"65000:7"}), 0, 300
    )
    tagged = Attrs((65000, 65104), frozenset({"65000:7"}))
    assert apply("RM", P("10.2.0.64/27"), tagged) == tagged
    # no entry matches (a match on an undefined list does not match): implicit deny
    assert apply("RM", P("10.2.0.64/27"), Attrs((65000, 65104))) is None
    assert apply("UNDEFINED", P("10.2.0.64/27"), Attrs((65000,))) is None


def test_maximum_paths_counts_in_the_ipv4_unicast_family_only() -> None:
    ipv6 = parse_frr(
        "frr defaults datacenter\nrouter bgp 1\n address-family ipv6 unicast\n"
        "  maximum-paths 1\n  neighbor FABRIC route-map NONE in\n exit-address-family\n",
        "f",
    ).bgp
    assert ipv6 is not None and (ipv6.maximum_paths, ipv6.bound) == (64, {})
    top = parse_frr("frr defaults datacenter\nrouter bgp 1\n maximum-paths 2\n", "f").bgp
    assert top is not None and top.maximum_paths == 2  # FRR's IPv4 unicast outside any family
    ibgp = parse_frr(conf("", "  maximum-paths ibgp 1"), "f").bgp
    assert ibgp is not None and ibgp.maximum_paths == 64


@pytest.mark.parametrize(
    ("top", "af", "line", "what"),
    [
        ("", "  redistribute connected", 5, "redistribute"),
        ("", "  neighbor FABRIC distribute-list D in", 5, "neighbor ... distribute-list"),
        ("", "  neighbor FABRIC allowas-in 1", 5, "neighbor ... allowas-in"),
        ("route-map RM permit 10\n set metric 10\nexit", "", 2, "route-map set metric 10"),
        ("route-map RM permit 10\n match ip address ACL\nexit", "", 2, "route-map match ip"),
        ("route-map Z deny 10\nexit\nip protocol bgp route-map Z", "", 3, "a route-map filter"),
    ],
)
def test_a_statement_that_could_change_routing_and_is_not_modelled_is_refused(
    top: str, af: str, line: int, what: str
) -> None:
    with pytest.raises(InputError) as refused:
        parse_frr(conf(top, af), "leaf1/frr.conf")
    assert refused.value.file == "leaf1/frr.conf"
    assert refused.value.key == f"line {line}"
    assert refused.value.problem.endswith("is not in the routing model and could change routing")
    assert what in refused.value.problem


def test_harmless_statements_are_ignored() -> None:
    frr = parse_frr(
        conf(
            "route-map RM_SET_SRC permit 10\n set src 10.1.0.1\nexit\n"
            "route-map FROM_PEER permit 100\n set ipv6 next-hop prefer-global\nexit\n"
            "ip protocol bgp route-map RM_SET_SRC\nipv6 prefix-list V6 seq 5 permit ::/0",
            "  neighbor FABRIC soft-reconfiguration inbound\n"
            " exit-address-family\n address-family l2vpn evpn\n  advertise-all-vni",
        ),
        "f",
    )
    assert frr.bgp is not None and frr.bgp.bound == {}


# the lab's routing, the findings and the verdict


def test_route_map_in_on_a_leaf_dropping_a_rack_fails_validate_naming_it(
    reference: Lab, capsys: pytest.CaptureFixture[str]
) -> None:
    rack = subnet(reference, "leaf3")
    bind(
        reference,
        "leaf1",
        "  neighbor FABRIC route-map FROM-SPINES in",
        f"ip prefix-list RACK seq 5 permit {rack}\n"
        "route-map FROM-SPINES deny 10\n match ip address prefix-list RACK\nexit\n"
        "route-map FROM-SPINES permit 20\nexit\n",
    )
    assert cli.main(["validate", str(reference.path), "--only", "fib_reachability"]) == 1
    found = {str(f) for f in fib_findings(reference)}
    spines = reference.nodes("spine")
    assert {f"leaf1 route-map FROM-SPINES in: {rack} from {s}: denied" for s in spines} <= found
    assert f"leaf1 FIB: {rack} has 0/{len(spines)} paths" in found
    assert "leaf1" in capsys.readouterr().out
    # only that rack: leaf1 still reaches every other subnet over every spine
    assert [f for f in found if f.endswith(" paths")] == [f"leaf1 FIB: {rack} has 0/4 paths"]


def test_outbound_prefix_list_on_a_leaf_narrows_the_spines_naming_it(reference: Lab) -> None:
    own = subnet(reference, "leaf1")
    bind(
        reference,
        "leaf1",
        "  neighbor FABRIC prefix-list NO-OWN out",
        f"ip prefix-list NO-OWN seq 5 deny {own}\nip prefix-list NO-OWN seq 10 permit any\n",
    )
    assert cli.main(["validate", str(reference.path), "--only", "fib_reachability"]) == 1
    found = {str(f) for f in fib_findings(reference)}
    for spine in reference.nodes("spine"):
        assert f"leaf1 prefix-list NO-OWN out: {own} to {spine}: denied" in found
        assert f"{spine} FIB: {own} has 1/2 paths" in found  # leaf2 still announces it


@pytest.mark.parametrize("switch", ["leaf1", "spine1"])
def test_maximum_paths_1_fails_validate_naming_the_switch(reference: Lab, switch: str) -> None:
    path = reference.path / "configs" / switch / "frr.conf"
    path.write_text(path.read_text().replace("maximum-paths 64", "maximum-paths 1"))
    assert cli.main(["validate", str(reference.path), "--only", "fib_reachability"]) == 1
    found = fib_findings(reference)
    assert {f.device for f in found} == {switch}
    assert any(f.where == "maximum-paths 1" for f in found)


def test_local_preference_in_from_one_spine_narrows_the_leaf(small: Lab) -> None:
    bind(
        small,
        "leaf3",
        "  neighbor FABRIC route-map PREFER in",
        "route-map PREFER permit 10\n set local-preference 200\nexit\n",
    )
    # every spine's routes get the same preference: nothing changes
    assert fib_findings(small) == []
    spine1 = next(
        line.split()[1]
        for line in small.frr_conf("leaf3").splitlines()
        if line.strip().endswith("description spine1")
    )
    path = small.path / "configs" / "leaf3" / "frr.conf"
    path.write_text(
        path.read_text().replace(
            "  neighbor FABRIC route-map PREFER in", f"  neighbor {spine1} route-map PREFER in"
        )
    )
    far = subnet(small, "leaf1")
    found = {str(f) for f in fib_findings(small)}
    assert f"leaf3 FIB: {far} has 1/2 paths" in found
    assert (
        f"leaf3 route-map PREFER in: {far} from spine1: changed, preferred over 1 other paths"
        in found
    )


def test_as_path_prepend_out_moves_the_spines_to_the_mlag_peer(small: Lab) -> None:
    asn = next(
        line.split()[2]
        for line in small.frr_conf("leaf3").splitlines()
        if line.startswith("router bgp")
    )
    bind(
        small,
        "leaf3",
        "  neighbor FABRIC route-map LONGER out",
        f"route-map LONGER permit 10\n set as-path prepend {asn} {asn}\nexit\n",
    )
    own = subnet(small, "leaf3")
    routing = Routing(Wiring(small))
    leaf4 = {h.node for h in routing.fib["spine1"][P(own)]}
    assert leaf4 == {"leaf4"}
    found = {str(f) for f in fib_findings(small)}
    assert f"spine1 FIB: {own} has 1/2 paths" in found
    assert f"leaf3 route-map LONGER out: {own} to spine1: changed, not used" in found


def test_an_undefined_route_map_or_prefix_list_on_a_neighbour_denies_everything(
    small: Lab,
) -> None:
    bind(small, "leaf1", "  neighbor FABRIC route-map MISSING in", "")
    routing = Routing(Wiring(small))
    remote = P(subnet(small, "leaf3"))
    assert remote not in routing.fib["leaf1"]
    path = small.path / "configs" / "leaf1" / "frr.conf"
    path.write_text(path.read_text().replace("route-map MISSING in", "prefix-list MISSING in"))
    assert remote not in Routing(Wiring(small)).fib["leaf1"]


def test_healthy_fabrics_are_routed_as_without_policy(pristine: dict[str, Lab]) -> None:
    for lab in pristine.values():
        assert fib_findings(lab) == []
        routing = Routing(Wiring(lab))
        assert routing.pv.rules == {}


def test_the_simulator_routes_by_the_policy(small: Lab, tmp_path: Path) -> None:
    """`twin run --backend sim`: with a route-map dropping the far rack on leaf1, leaf1 has
    no route to it and the traffic toward it is lost; healthy, it has both spines."""
    far = subnet(small, "leaf3")
    healthy = tmp_path / "healthy"
    cli.main(["run", str(small.path), "--backend", "sim", "--no-static", "--out", str(healthy)])
    assert f"{far}" in (healthy / "fib" / "start.json").read_text()
    bind(
        small,
        "leaf1",
        "  neighbor FABRIC route-map FROM-SPINES in",
        f"ip prefix-list RACK seq 5 permit {far}\n"
        "route-map FROM-SPINES deny 10\n match ip address prefix-list RACK\nexit\n"
        "route-map FROM-SPINES permit 20\nexit\n",
    )
    broken = tmp_path / "broken"
    assert (
        cli.main(["run", str(small.path), "--backend", "sim", "--no-static", "--out", str(broken)])
        == 1
    )
    report = (broken / "report.json").read_text()
    assert f"leaf1 FIB: {far} has 0 ECMP next hops" in report
    assert "nothing arrived" in report


def test_under_policy_failures_converge_to_what_a_fresh_solve_gives(small: Lab) -> None:
    """`Routing.after` (incremental, each router reselecting among the offers it holds) gives,
    for every single-link failure and every pair, the FIB the same configs solve to from
    scratch with those links down, under a mix of policies that changes routing."""
    healthy = Routing(Wiring(small)).fib
    lines = small.frr_conf("leaf3").splitlines()
    asn = next(line.split()[2] for line in lines if line.startswith("router bgp"))
    bind(
        small,
        "leaf3",
        "  neighbor FABRIC route-map LONGER out",
        f"route-map LONGER permit 10\n set as-path prepend {asn}\nexit\n",
    )
    bind(
        small,
        "spine2",
        "  neighbor FABRIC route-map TAG out",
        "route-map TAG permit 10\n set community 65000:9\nexit\n",
    )
    bind(
        small,
        "leaf1",
        "  neighbor FABRIC route-map DROP-TAGGED in",
        "bgp community-list standard T seq 5 permit 65000:9\n"
        "route-map DROP-TAGGED deny 10\n match community T\nexit\n"
        "route-map DROP-TAGGED permit 20\nexit\n",
    )
    routing = Routing(Wiring(small))
    assert routing.fib != healthy
    every = links(small)
    for failed in [[x] for x in every] + [list(p) for p in combinations(every, 2)]:
        wiring = Wiring(small)
        for a, a_port, b, b_port in failed:
            wiring.admin_down |= {(a, a_port), (b, b_port)}
        scratch = Routing(wiring).fib
        after = applied(routing.fib, routing.after(failed))
        assert {s: after[s] for s in small.switches()} == {
            s: scratch[s] for s in small.switches()
        }, failed
