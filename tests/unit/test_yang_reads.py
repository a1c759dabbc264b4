"""twin.yang.reads: what a SONiC model's rules read of the others, and `Plain.passes`, which
parses each model's data once for the configs that hold it with the same values read."""

from __future__ import annotations

import copy
from typing import Any

import pytest

pytest.importorskip("libyang", reason="SONiC YANG validation needs the libyang binding")

from tests.unit.test_yang_check import LEAF
from twin.yang import check, reads
from twin.yang.plain import Plain, plain

DM = "sonic-device_metadata:sonic-device_metadata"
PORT = "sonic-port:sonic-port"
QUEUE = "sonic-queue:sonic-queue"


def _models() -> Plain:
    models = plain(check.load_schema(check.YANG_DIR).ctx, check.YANG_DIR)
    assert models is not None and models.reads is not None
    return models


def _rules(top: str) -> dict[tuple[str, ...], frozenset[reads.Read] | None]:
    found = _models().reads
    assert found is not None
    return {rule.within: rule.reads for rule in found.rules[top]}


def _paths(found: frozenset[reads.Read] | None) -> set[tuple[str, ...]]:
    assert found is not None
    return {r.path for r in found}


def test_a_queue_reads_the_switch_type_and_a_voq_queue_every_port() -> None:
    """QUEUE_LIST's `when` reads DEVICE_METADATA's switch_type. VOQ_QUEUE_LIST's `must`
    reads PORT_LIST through a predicate, and PORT_LIST holds a node with a `when` (lanes,
    on DEVICE_METADATA): the whole of sonic-port, and what its rules read (all of
    DEVICE_METADATA). The plain leafrefs' targets are read wherever QUEUE holds data."""
    rules = _rules(QUEUE)
    switch_type = (DM, "DEVICE_METADATA", "localhost", "switch_type")
    assert _paths(rules[(QUEUE, "QUEUE", "QUEUE_LIST")]) == {switch_type}
    assert {(PORT,), (DM,), switch_type} <= _paths(rules[(QUEUE, "QUEUE", "VOQ_QUEUE_LIST")])
    assert (PORT, "PORT", "PORT_LIST", "name") in _paths(rules[()])
    assert _models().reads.needs[QUEUE] == {PORT, DM}  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "read"),
    [
        (
            "not(/sdm:sonic-device_metadata/sdm:DEVICE_METADATA/sdm:localhost/sdm:hwsku)",
            {(DM, "DEVICE_METADATA", "localhost", "hwsku")},
        ),
        ("count(../../queue:QUEUE_LIST[queue:qindex=current()]) <= 1", set()),
        ("/port:sonic-port/port:PORT/port:PORT_LIST[port:name=current()]/port:speed", {(PORT,)}),
        ("../../../sdm:sonic-device_metadata/sdm:DEVICE_METADATA", None),
        ("/x:no-such-model/x:T", None),
        ("derived-from-or-self(., 'sdm:thing')", None),
        ("/port:sonic-port/port:PORT/port:PORT_LIST[port:name=current()", None),
    ],
)
def test_what_a_rule_reads_or_none_when_it_cannot_be_bounded(
    text: str, read: set[tuple[str, ...]] | None
) -> None:
    """An absolute path of prefixed names reads its model's data there (whole below a
    predicate; the whole model through a node with a `when`); own names read nothing else;
    a foreign name anywhere else, an unknown model or an unclosed predicate: unbounded."""
    models = _models()
    tops = {top.split(":")[1]: top for top in models.reads.needs}  # type: ignore[union-attr]
    got = reads._read(models.ctx, text, "queue", QUEUE, tops)
    assert (None if got is None else {r.path for r in got}) == read


def _parsed(models: Plain, monkeypatch: pytest.MonkeyPatch) -> list[set[str]]:
    """The models of each parse `Plain.passes` makes from now on."""
    seen: list[set[str]] = []
    parses = Plain._parses

    def spy(self: Plain, data: dict[str, Any]) -> bool:
        seen.append(set(data))
        return parses(self, data)

    monkeypatch.setattr(Plain, "_parses", spy)
    models.passed.clear()
    return seen


def test_a_model_passed_once_is_not_parsed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A second switch (another name, address and AS) with the first's QoS tables: its
    QUEUE is not parsed again, its DEVICE_METADATA is (it differs), and nothing of it
    passes that the full validation refuses."""
    parsed = _parsed(_models(), monkeypatch)
    other = copy.deepcopy(LEAF)
    other["DEVICE_METADATA"]["localhost"].update(hostname="leaf2", bgp_asn="65102")
    assert check.problems(LEAF, plain=True) == []
    assert check.problems(other, plain=True) == check.problems(other, plain=False) == []
    assert QUEUE in parsed[0] and DM in parsed[0]
    assert DM in parsed[1] and QUEUE not in parsed[1]
    assert check.problems(other, plain=True) == []
    assert len(parsed) == 2  # every model of it passed before


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(
            lambda c: c["DEVICE_METADATA"]["localhost"].update(switch_type="voq"),
            id="the switch type a queue's when reads",
        ),
        pytest.param(lambda c: c.pop("SCHEDULER"), id="the schedulers a queue names"),
        pytest.param(lambda c: c["PORT"].pop("Ethernet0"), id="the port a queue names, and others"),
    ],
)
def test_a_model_whose_reads_changed_is_judged_again(
    edit: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same QUEUE table after another table it reads changed: refused as the full
    validation refuses it, though that QUEUE passed with the first switch."""
    _parsed(_models(), monkeypatch)
    changed = copy.deepcopy(LEAF)
    edit(changed)
    assert check.problems(LEAF, plain=True) == []
    assert check.problems(changed, plain=True) == check.problems(changed, plain=False) != []


def test_a_new_model_is_parsed_with_the_models_it_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """A voq switch's DEVICE_METADATA passes alone; LEAF's other tables with it, new, are
    parsed with that DEVICE_METADATA (which passed before: their `when`s read its switch
    type), and refused as the full validation refuses them."""
    parsed = _parsed(_models(), monkeypatch)
    voq = copy.deepcopy(LEAF)
    voq["DEVICE_METADATA"]["localhost"].update(switch_type="voq")
    assert check.problems({"DEVICE_METADATA": voq["DEVICE_METADATA"]}, plain=True) == []
    assert check.problems(voq, plain=True) == check.problems(voq, plain=False) != []
    assert {QUEUE, DM} <= parsed[-1]


def test_free_leaves_are_those_no_rule_reads() -> None:
    """A port's description, alias, speed and MTU are free (no rule names them); its name
    (the key) and lanes (a `when` of its own) are not, nor a queue's scheduler (a plain
    leafref, a string in the plain models)."""
    free = _models().reads.free  # type: ignore[union-attr]

    def leaves(top: str, *path: str) -> set[str]:
        tree: reads.Tree | None = free.get(top)
        for name in path:
            tree = (tree or {}).get(name)
        return set(tree or ())

    port = leaves(PORT, "PORT", "PORT_LIST")
    assert {"description", "alias", "speed", "mtu"} <= port
    assert not {"name", "lanes"} & port
    assert "scheduler" not in leaves(QUEUE, "QUEUE", "QUEUE_LIST")


def test_a_plain_leafref_and_its_target_are_never_free() -> None:
    """`looking_up` takes a lookup's source and target leaves out of the free ones (every
    SONiC target is a list's key, never free anyway: this holds it for one that is not)."""
    found = reads.Reads({}, {}, {"m:m": {"T": {"a": None, "b": None}}, "n:n": {"X": {"s": None}}})
    looked = found.looking_up([(("n:n", "X", "s"), ("m:m", "T", "a"))])
    assert looked.free == {"m:m": {"T": {"b": None}}}
    assert looked.rules["n:n"] == (reads.Rule((), frozenset({reads.Read(("m:m", "T", "a"))})),)


def _described(config: dict[str, Any], **fields: str) -> dict[str, Any]:
    """A copy of `config` with these fields on every port."""
    changed = copy.deepcopy(config)
    for port in changed["PORT"].values():
        port.update(fields)
    return changed


def test_ports_alike_but_for_free_leaves_are_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A second switch whose ports differ only in their descriptions and MTU: its PORT table
    is not parsed again, and it passes as the full validation passes it."""
    parsed = _parsed(_models(), monkeypatch)
    first = _described(LEAF, description="to server1")
    other = _described(LEAF, description="to server7", mtu="4200")
    assert check.problems(first, plain=True) == []
    assert check.problems(other, plain=True) == check.problems(other, plain=False) == []
    assert PORT in parsed[0]
    assert not any(PORT in models for models in parsed[1:])


@pytest.mark.parametrize(
    "fields",
    [{"description": "d" * 256}, {"speed": "fast"}, {"mtu": "99999"}],
    ids=["a description too long", "a speed not a number", "an MTU out of range"],
)
def test_a_free_leaf_its_type_refuses_is_found(
    fields: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A free leaf's value its type refuses, after the same ports passed with another: found
    as the full validation finds it (the translation checks every value's type)."""
    _parsed(_models(), monkeypatch)
    assert check.problems(LEAF, plain=True) == []
    changed = _described(LEAF, **fields)
    assert check.problems(changed, plain=True) == check.problems(changed, plain=False) != []


@pytest.mark.parametrize(
    ("text", "on_leaf", "on_list"),
    [
        ("count(*) > 0", True, True),
        ("boolean(node())", True, True),
        ("string-length(..) > 0", True, True),
        (". >= 1", False, True),
        ("contains(../ip-prefix, '.') and current() = 'IPv4'", False, False),
        ("boolean(IP_TYPE[. = 'ANY' or . = 'IP'])", False, False),
        ("(keepalive_interval * 3) <= session_timeout", False, False),
    ],
)
def test_a_rule_that_reads_a_node_without_naming_it(
    text: str, on_leaf: bool, on_list: bool
) -> None:
    """`*`, `node()`, a `..` alone (its parent's whole text) and, on a list, a `.` alone
    read nodes no name says: no leaf is then free. A `.` in a predicate is the node named
    before it; `*` between numbers multiplies."""
    ctx = _models().ctx
    leaf, entry = (
        next(iter(ctx.find_path(f"/sonic-port:sonic-port/PORT/PORT_LIST{tail}"))).cdata
        for tail in ("/mtu", "")
    )
    assert (reads._unnamed(text, leaf), reads._unnamed(text, entry)) == (on_leaf, on_list)
