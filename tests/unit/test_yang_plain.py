"""twin.yang.plain: a valid config passed by the models with their plain leafrefs as strings;
whatever it passes, the full validation passes too, and what it does not is the full
validation's to word."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("libyang", reason="SONiC YANG validation needs the libyang binding")

from tests.unit.test_yang_check import LEAF, REQUIREMENTS, _del, _sample, _set
from twin.yang import check
from twin.yang.plain import plain, plain_text
from twin.yang.reads import values

Config = dict[str, dict[str, dict[str, Any]]]

LEAFREFS: dict[str, Callable[[Config], object]] = {
    "a queue's scheduler that does not exist": _set("QUEUE", "Ethernet0|3", scheduler="nope"),
    "a queue's port that does not exist (a union: a port or CPU)": _set(
        "QUEUE", "Ethernet96|3", scheduler="sched.lossy"
    ),
    "a queue of the CPU port (the union's string member)": _set(
        "QUEUE", "CPU|3", scheduler="sched.lossy"
    ),
    "a queue of a port written in another case": _set("QUEUE", "cpu|3", scheduler="sched.lossy"),
    "qos maps of a port that does not exist": _set(
        "PORT_QOS_MAP", "Ethernet96", dscp_to_tc_map="RDMA"
    ),
    "the global qos map entry": _set("PORT_QOS_MAP", "global", dscp_to_tc_map="RDMA"),
    "a buffer profile's pool that does not exist": _set(
        "BUFFER_PROFILE", "egress_lossless_profile", pool="nope"
    ),
    "a portchannel member of a portchannel that does not exist": _set(
        "PORTCHANNEL_MEMBER", "PortChannel77|Ethernet32"
    ),
    "a port's map taken away from under it": _del("DSCP_TO_TC_MAP"),
    "the scheduler every queue names taken away": _del("SCHEDULER"),
}
"""Edits of `LEAF` on what the plain path judges (its leafrefs, in unions and not)."""


def _cases() -> dict[str, Config]:
    cases: dict[str, Config] = {"leaf": copy.deepcopy(LEAF)}
    sample = _sample()
    cases.update((f"sample {k}", v) for k, v in sample.items())
    for name, change in {**LEAFREFS, **{k: v[0] for k, v in REQUIREMENTS.items()}}.items():
        config = copy.deepcopy(LEAF)
        change(config)
        cases[name] = config
    return cases


CASES = _cases()


QOS_IFNAME = "/sonic-port-qos-map:sonic-port-qos-map/PORT_QOS_MAP/PORT_QOS_MAP_LIST/ifname"


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_plain_path_finds_what_the_full_validation_finds(name: str) -> None:
    """Every config, valid or not, gets the same problems with the plain models first."""
    config = CASES[name]
    assert check.problems(config, plain=True) == check.problems(config, plain=False)


@pytest.mark.parametrize("name", sorted(CASES))
def test_tables_translated_once_give_the_translation(name: str) -> None:
    """A config's tables translated apart (and kept for the next configs) are its
    translation, or None when it has a problem."""
    schema = check.load_schema(check.YANG_DIR)
    whole = check._translate(schema, CASES[name])
    apart = check._translated(schema, CASES[name])
    assert apart == (None if whole.problems else whole.data)


def test_a_valid_config_passes_without_the_full_validation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The plain path is taken: the full validation is never asked of a valid config."""

    def full(*_: object) -> None:
        raise AssertionError("the full validation ran")

    monkeypatch.setattr(check, "_first_error", full)
    assert check.problems(LEAF, plain=True) == []
    with pytest.raises(AssertionError, match="the full validation ran"):
        check.problems(LEAF)


def test_the_unions_other_members_are_asked_of_the_values_no_target_holds() -> None:
    """`global` is not a port but the union's string member takes it; `Ethernet96` is
    neither; libyang is asked once per union and value."""
    models = plain(check.load_schema(check.YANG_DIR).ctx, check.YANG_DIR)
    assert models is not None
    schema = check.load_schema(check.YANG_DIR)
    config = copy.deepcopy(LEAF)
    assert "global" in config["PORT_QOS_MAP"]
    data = check._prune_empty(check._translate(schema, config).data)
    assert models.holds(data, set(data))
    assert models.accepted[(QOS_IFNAME, "global")]
    config["PORT_QOS_MAP"]["Ethernet96"] = {"dscp_to_tc_map": "RDMA"}
    data = check._prune_empty(check._translate(schema, config).data)
    assert not models.holds(data, set(data))


def test_the_plain_models_differ_only_in_their_plain_leafrefs() -> None:
    """Loaded (the check against the models passed) with the leafrefs `LEAF` uses."""
    models = plain(check.load_schema(check.YANG_DIR).ctx, check.YANG_DIR)
    assert models is not None
    sources = {ref.source[-3:] for ref in models.references}
    assert ("QUEUE", "QUEUE_LIST", "scheduler") in sources
    assert ("QUEUE", "QUEUE_LIST", "ifname") in sources  # a union's leafref member
    assert ("BUFFER_PG", "BUFFER_PG_LIST", "profile") in sources


@pytest.mark.parametrize(
    ("text", "plain_one"),
    [
        ('type leafref { path "/p:a/p:B/p:B_LIST/p:name"; }', True),
        ("type leafref {\n path /p:a/p:B/p:B_LIST/p:name; // the B table\n}", True),
        ('type leafref { path "/p:a/p:B/p:B_LIST/p:name"; require-instance true; }', True),
        ('type leafref { path "/p:a/p:B/p:B_LIST/p:name"; require-instance false; }', False),
        ('type leafref { path "../../B_LIST/name"; }', False),
        ('type leafref { path "/p:a/p:B/p:B_LIST[p:k=current()/../k]/p:name"; }', False),
        ('type leafref { path "/p:a/p:B" + "/p:B_LIST/p:name"; }', False),
    ],
)
def test_only_plain_leafrefs_are_made_strings(text: str, plain_one: bool) -> None:
    module = f"leaf x {{ {text} }}"
    assert (plain_text(module) == "leaf x { type string; }") is plain_one
    if not plain_one:
        assert plain_text(module) == module


_JSON = st.recursive(
    st.one_of(st.none(), st.integers(), st.text("ab", max_size=2)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from("abc"), inner, max_size=3)
    ),
    max_leaves=12,
)


def _walked(node: Any, path: tuple[str, ...]) -> list[Any]:
    """The values at `path` by definition: a list's items each walked, a member descended."""
    if isinstance(node, list):
        return [v for item in node for v in _walked(item, path)]
    if not path:
        return [node]
    if isinstance(node, dict) and path[0] in node:
        return _walked(node[path[0]], path[1:])
    return []


@given(_JSON, st.lists(st.sampled_from("abc"), max_size=3).map(tuple))
def test_the_values_at_a_path_are_every_leaf_there_in_order(
    data: Any, path: tuple[str, ...]
) -> None:
    assert values(data, path) == _walked(data, path)
