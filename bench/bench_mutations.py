"""The mutation campaign (issue 32): the configuration surface mutated systematically, judged.

    .venv/bin/python bench/bench_mutations.py                       # examples/small.yaml, static
    .venv/bin/python bench/bench_mutations.py --sim                 # and the default scenario
    .venv/bin/python bench/bench_mutations.py --fabric examples/reference.yaml --limit 200
    .venv/bin/python bench/bench_mutations.py --show missed         # list every harmful miss
    .venv/bin/python bench/bench_mutations.py --shape single-homed  # its servers on one NIC
    .venv/bin/python bench/bench_mutations.py --shape 3-tier        # twice the leaves, super-spines

The lab is generated from the fabric, then copied once per mutation. Mutations, on one switch
of each role (the first leaf, spine and super-spine) and the first server:
- config_db.json: every field of every table the project writes (for the DSCP, TC and PFC
  maps: every entry the intent sets apart from the default, and one default), given a wrong
  value (another number, the other boolean or state, another member of the field's values, a
  dangling name; in a map another TC, queue or PG of the port's 0-7, which SONiC accepts),
  removed, or swapped with the same field of another key of the table (another port, profile
  or neighbour) where the two differ; a map to queues or PGs given one the port has not (8:
  `invalid`, bad input); every table removed; DEVICE_METADATA's fields swapped with the same
  switch role's next device;
- frr.conf: every statement removed, and every statement with a number given another;
- the host file: every scalar key given a wrong value, or removed.

Each mutation is classified from the intent, not from the validators (`classify`): the
pristine lab is what the intent renders, so a mutation is harmful unless it only touches what
the intent leaves free (`HARMLESS`: descriptions, aliases, neighbour names, hostnames) or what
the intent does not speak to (`DEVIATIONS`: the switch's metadata, BGP timers beside BFD,
FRR's defaults, the emulated bond; the DSCP map's entries for classes the intent does not
name, the TC maps' entries for TCs no class uses), which are listed apart and counted in
neither figure. A field removed where SONiC's daemon then uses the value the intent renders
(`twin.configs.defaults`, each with its upstream source: a port's MTU 9100) is harmless.
A mutation that leaves a file as it was is dropped. Then `twin validate` (with `--sim`, `twin
run LAB --backend sim` with the default scenario, whose verdict includes the static
validators) runs on the copy, in this process. A harmful mutation is caught when the exit code
is 1 and a failing result has a finding on the mutated device; caught unnamed when it fails
without naming it; refused on exit 2 whose one line names the mutated file (bad input: a host
file that no longer says which server it is, its address or a NIC's name; a config_db SONiC's
YANG refuses, a PortChannel member of no PORTCHANNEL, a map to a queue or PG the port has
not), lost on an exit 2 naming another,
crashed on exit 3; missed on exit 0.
A harmless one is a false red on any exit but 0.

Prints: the mutations by file and kind, the mutation score (harmful caught naming the device,
of all harmful; and counting the refusals that name the device's file), the score per table
(config_db.json), statement (frr.conf) or key (host.json), the misses and false reds by
(file, where), and the time taken. Goal (issue 32): a score of at least 95 % and no false
red. Exit status 1 when a false red or a crash. `--write` puts the totals into the block
`mutations` of docs/validators.md as the row of this command (each command its own row) and
records them (bench/blocks.py).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import blocks  # noqa: E402

HARMLESS = {
    ("config_db.json", "PORT", "description"),
    ("config_db.json", "PORT", "alias"),
    ("config_db.json", "BGP_NEIGHBOR", "name"),
    ("frr.conf", "description", ""),
    ("frr.conf", "frr", "version"),
    ("frr.conf", "hostname", ""),
    ("host.json", "hostname", ""),
    ("host.json", "dscp_marking", "class"),
}
"""(file, table or statement, field) the intent leaves free: a change there harms nothing (a
marking rule's `class` labels it: the deploy's iptables rules, labs/netns/plan.py and
labs/clab/namespace.py, mark by port and DSCP alone)."""
DEVIATIONS = {
    ("config_db.json", "DEVICE_METADATA", "*"),
    ("config_db.json", "BGP_NEIGHBOR", "holdtime"),
    ("config_db.json", "BGP_NEIGHBOR", "keepalive"),
    ("frr.conf", "timers", "*"),
    ("frr.conf", "coalesce-time", "*"),
    ("frr.conf", "bgp", "router-id"),
    ("frr.conf", "bgp", "bestpath"),
    ("frr.conf", "no", "bgp"),
    ("frr.conf", "frr", "defaults"),
    ("frr.conf", "service", "*"),
    ("frr.conf", "neighbor", "FABRIC"),
    ("host.json", "bond", "*"),
    ("host.json", "interfaces", "speed"),
}
"""What differs from the intent's rendering without the intent saying whether it harms: the
switch's metadata (SONiC's own fields, the MAC), BGP timers and FRR's defaults beside BFD,
which the failover budget rests on, the bond the twin emulates. Listed apart, in no count."""
MAPS = {
    "DSCP_TO_TC_MAP",
    "TC_TO_PRIORITY_GROUP_MAP",
    "TC_TO_QUEUE_MAP",
    "MAP_PFC_PRIORITY_TO_QUEUE",
    "PFC_PRIORITY_TO_PRIORITY_GROUP_MAP",
}
UNUSED_TCS = {"TC_TO_QUEUE_MAP", "TC_TO_PRIORITY_GROUP_MAP"}
"""Maps whose entries for a TC no intent class uses are deviations, as the DSCP map's default
entries: the DSCP -> TC map (the only classifier bound to the ports, PORT_QOS_MAP; sonic-swss
orchagent/qosorch.cpp QosOrch::handlePortQosMapTable binds no DOT1P map here) puts no packet
in that TC, so where it goes moves no traffic."""
FLIPS = {"true": "false", "false": "true", "up": "down", "down": "up", "enable": "disable"}
ALTERNATIVES = {
    "DWRR": "STRICT",
    "STRICT": "DWRR",
    "ecn_green": "ecn_none",
    "ingress": "egress",
    "egress": "ingress",
    "dynamic": "static",
    "drop": "forward",
}
NUMBER = re.compile(r"\b\d+\b")


def _single_homed(data: dict[str, Any]) -> None:
    servers = data["servers"]
    servers.update(nics=1, dual_homed=False, count=2 * servers.get("count", 4))
    data["leaves"].pop("peer_link_ports", None)


def _three_tier(data: dict[str, Any]) -> None:
    data.setdefault("superspines", {"count": 2, "ports": 16})
    data["leaves"]["count"] = 2 * data["leaves"].get("count", 4)
    data["servers"]["count"] = 2 * data["servers"].get("count", 4)


SHAPES: dict[str, Callable[[dict[str, Any]], None]] = {
    "as-is": lambda data: None,
    "single-homed": _single_homed,
    "3-tier": _three_tier,
}
"""`--shape`: the fabric as given, its servers single-homed (one NIC, no MLAG; twice as many,
so that each leaf keeps as many as the default scenario's incast picks), or its leaves and
servers doubled under two super-spines (examples/small.yaml: 4 spines in 2 pods, 8 leaves)."""
Json = dict[str, Any]


@dataclass(frozen=True)
class Mutation:
    """One edit of one device's file."""

    device: str
    file: str
    where: str
    kind: str
    impact: str
    """`harmful`, `harmless` or `deviation` (`classify`)."""
    apply: Callable[[Path], None]


def classify(file: str, table: str, field: str) -> str:
    """What the intent says of a change at (file, table or statement, field): `harmless` where
    it leaves the value free, `deviation` where it does not say, else `harmful`; the DSCP map's
    default entries (classes the intent does not name) are deviations.

    >>> classify("config_db.json", "PORT", "alias"), classify("config_db.json", "PORT", "mtu")
    ('harmless', 'harmful')
    >>> classify("frr.conf", "hostname", "leaf1")
    'harmless'
    """
    if (file, table, field) in HARMLESS or (file, table, "") in HARMLESS:
        return "harmless"
    if (file, table, field) in DEVIATIONS or (file, table, "*") in DEVIATIONS:
        return "deviation"
    return "harmful"


def _other(value: Any) -> Any:
    """A wrong value of the same kind."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value * 2 if value else 1
    text = str(value)
    if text in FLIPS:
        return FLIPS[text]
    if text in ALTERNATIVES:
        return ALTERNATIVES[text]
    if text.isdigit():
        return str(int(text) * 2 if int(text) else 1)
    if m := NUMBER.search(text):
        return text[: m.start()] + str(int(m[0]) * 8 + 1) + text[m.end() :]
    return text + "_x"


def _db_edit(device: str, change: Callable[[Json], None]) -> Callable[[Path], None]:
    def apply(lab: Path) -> None:
        path = lab / "configs" / device / "config_db.json"
        db = json.loads(path.read_text())
        change(db)
        path.write_text(json.dumps(db, indent=2))

    return apply


def _keys_with(table: Json, field: str) -> list[str]:
    return [k for k, v in table.items() if isinstance(v, dict) and field in v]


def _map_fields(table: Json) -> list[str]:
    """The entries of a map the intent sets apart from the default, and one default."""
    entries = next(iter(table.values()))
    odd = [f for f, v in entries.items() if v != "0"]
    plain = [f for f, v in entries.items() if v == "0"][:1]
    return odd + plain


def config_db(lab: Path, device: str, peer: str | None) -> Iterator[Mutation]:
    """Every field of every table of a switch's config_db.json, mutated three ways."""
    from twin.configs.defaults import absent
    from twin.lab.check import PORT_INDICES, PORT_QUEUES
    from twin.lab.directory import Lab

    db: Json = json.loads((lab / "configs" / device / "config_db.json").read_text())
    used = {str(c.tc) for c in Lab.open(lab).fabric.qos.classes.values()} | {"0"}

    def mutation(
        table: str, key: str, field: str, kind: str, change: Callable[[Json], None]
    ) -> Mutation:
        impact = classify("config_db.json", table, field)
        first = key.split("<->")[0]
        value = db[table].get(first, {}).get(field)
        if table == "DSCP_TO_TC_MAP" and value == "0":
            impact = "deviation"
        if table in UNUSED_TCS and field and field not in used:
            impact = "deviation"
        if kind == "removed" and value is not None and absent(table, field) == value:
            impact = "harmless"
        where = f"{table}|{key}" + (f".{field}" if field else "")
        return Mutation(device, "config_db.json", where, kind, impact, _db_edit(device, change))

    for table, entries in db.items():
        yield mutation(table, "*", "", "removed", lambda d, t=table: d.pop(t))
        fields = (
            _map_fields(entries)
            if table in MAPS
            else sorted({f for v in entries.values() if isinstance(v, dict) for f in v})
        )
        for field in fields:
            keys = _keys_with(entries, field)
            key = keys[0]
            value = entries[key][field]

            def wrong(
                d: Json, t: str = table, k: str = key, f: str = field, v: Any = value
            ) -> None:
                d[t][k][f] = str(int(_other(v)) % PORT_QUEUES) if t in MAPS else _other(v)

            def invalid(d: Json, t: str = table, k: str = key, f: str = field) -> None:
                d[t][k][f] = str(PORT_QUEUES)

            def removed(d: Json, t: str = table, k: str = key, f: str = field) -> None:
                d[t][k].pop(f)

            yield mutation(table, key, field, "value", wrong)
            yield mutation(table, key, field, "removed", removed)
            if table in PORT_INDICES:
                yield mutation(table, key, field, "invalid", invalid)
            other = next((k for k in keys[1:] if entries[k][field] != value), None)
            if other is not None:

                def swapped(d: Json, t: str = table, a: str = key, b: str = other,
                            f: str = field) -> None:  # fmt: skip
                    d[t][a][f], d[t][b][f] = d[t][b][f], d[t][a][f]

                yield mutation(table, f"{key}<->{other}", field, "swapped", swapped)
    if peer is None:
        return
    theirs: Json = json.loads((lab / "configs" / peer / "config_db.json").read_text())
    for field, value in db.get("DEVICE_METADATA", {}).get("localhost", {}).items():
        other = theirs.get("DEVICE_METADATA", {}).get("localhost", {}).get(field)
        if other is not None and other != value:
            yield mutation(
                "DEVICE_METADATA",
                f"localhost<->{peer}",
                field,
                "swapped",
                lambda d, f=field, o=other: d["DEVICE_METADATA"]["localhost"].update({f: o}),
            )


def _statement(line: str) -> tuple[str, str]:
    """(statement, field) of an frr.conf line, as HARMLESS and DEVIATIONS name them."""
    words = line.split()
    if "description" in words:
        return "description", ""
    return words[0], words[1] if len(words) > 1 else ""


def frr_conf(lab: Path, device: str) -> Iterator[Mutation]:
    """Every statement of a switch's frr.conf removed, and every number in one changed."""
    lines = (lab / "configs" / device / "frr.conf").read_text().splitlines()
    for n, line in enumerate(lines):
        text = line.strip()
        if not text or text.startswith("!") or text in ("exit", "exit-address-family", "end"):
            continue
        impact = classify("frr.conf", *_statement(text))

        def edit(new: str | None, n: int = n) -> Callable[[Path], None]:
            def apply(lab: Path) -> None:
                path = lab / "configs" / device / "frr.conf"
                got = path.read_text().splitlines()
                got[n : n + 1] = [] if new is None else [new]
                path.write_text("\n".join(got) + "\n")

            return apply

        yield Mutation(device, "frr.conf", text, "removed", impact, edit(None))
        if NUMBER.search(text):
            yield Mutation(device, "frr.conf", text, "value", impact, edit(_other(line)))


def _scalars(data: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _scalars(value, (*path, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from _scalars(value, (*path, i))
    else:
        yield path, data


def host_json(lab: Path, device: str) -> Iterator[Mutation]:
    """Every scalar key of a server's host file given a wrong value, or removed."""
    path = lab / "configs" / device / "host.json"
    data: Json = json.loads(path.read_text())
    for where, value in _scalars(data):
        name = ".".join(str(p) for p in where)
        impact = classify("host.json", str(where[0]), "" if len(where) == 1 else str(where[-1]))

        def edit(remove: bool, where: tuple[Any, ...] = where, value: Any = value):
            def apply(lab: Path) -> None:
                target = lab / "configs" / device / "host.json"
                got = json.loads(target.read_text())
                node = got
                for step in where[:-1]:
                    node = node[step]
                if remove:
                    node.pop(where[-1])
                else:
                    node[where[-1]] = _other(value)
                target.write_text(json.dumps(got, indent=2))

            return apply

        yield Mutation(device, "host.json", name, "value", impact, edit(False))
        yield Mutation(device, "host.json", name, "removed", impact, edit(True))


def surface(lab: Path) -> list[Mutation]:
    """Every mutation of the campaign, on one device of each role."""
    from twin.lab.directory import Lab

    opened = Lab.open(lab)
    found: list[Mutation] = []
    for role in ("leaf", "spine", "superspine"):
        nodes = opened.nodes(role)
        if nodes:
            peer = nodes[1] if len(nodes) > 1 else None
            found += config_db(lab, nodes[0], peer)
            found += frr_conf(lab, nodes[0])
    found += host_json(lab, opened.nodes("server")[0])
    return found


def judge(lab: Path, mutation: Mutation, work: Path, sim: bool) -> str:
    """Play one mutation on a copy of the lab: caught, unnamed, refused (exit 2 naming the
    mutated file), lost (exit 2 naming another), crashed, missed, or unchanged (the edit left
    the file as it was)."""
    from twin.cli.main import main as twin

    copy_dir = work / "lab"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(lab, copy_dir)
    target = copy_dir / "configs" / mutation.device / mutation.file
    before = target.read_bytes()
    try:
        mutation.apply(copy_dir)
    except (KeyError, IndexError, TypeError):
        return "unchanged"
    if target.read_bytes() == before:
        return "unchanged"
    out = work / "out"
    argv = ["run", str(copy_dir), "--backend", "sim"] if sim else ["validate", str(copy_dir)]
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        try:
            code = twin([*argv, "--out", str(out)])
        except SystemExit as exc:
            code = int(exc.code or 0)
    if code == 2:
        said = sink.getvalue()
        return "refused" if f"/configs/{mutation.device}/{mutation.file}" in said else "lost"
    if code in (0, 3):
        return {0: "missed", 3: "crashed"}[code]
    report = json.loads((out / "report.json").read_text())
    named = any(
        r["status"] == "fail" and any(f["device"] == mutation.device for f in r["findings"])
        for r in report["results"]
    )
    return "caught" if named else "unnamed"


MUTATION_HEADER = [
    "| command | verdict | harmful | caught naming the device | refused (exit 2) | missed "
    "| false reds (harmless) | wall |",
    "|---|---|---|---|---|---|---|---|",
]
"""The block `mutations`: one row per command (`--write`)."""


def _part(m: Mutation) -> str:
    """The table (config_db.json), statement (frr.conf) or top key (host.json) mutated."""
    if m.file == "frr.conf":
        return _statement(m.where)[0]
    return re.split(r"[|.]", m.where)[0]


def main() -> int:
    """Run the campaign and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fabric", type=Path, default=REPO / "examples" / "small.yaml")
    parser.add_argument("--shape", choices=list(SHAPES), default="as-is", help="SHAPES")
    parser.add_argument("--sim", action="store_true", help="twin run --backend sim, not validate")
    parser.add_argument("--limit", type=int, default=0, help="at most this many mutations")
    parser.add_argument("--show", choices=("missed", "all"), default="missed")
    parser.add_argument("--write", action="store_true", help="the totals into the docs' block")
    args = parser.parse_args()
    import yaml

    from twin.intent import fabric as intent
    from twin.lab import directory as labdir

    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="twin-mutations-") as tmp:
        lab = Path(tmp) / "pristine"
        data = yaml.safe_load(args.fabric.read_text())
        SHAPES[args.shape](data)
        source = Path(tmp) / args.fabric.name
        source.write_text(yaml.safe_dump(data))
        labdir.generate(intent.load(source), lab, str(source))
        mutations = surface(lab)
        if args.limit:
            mutations = mutations[:: max(1, len(mutations) // args.limit)][: args.limit]
        outcomes: list[tuple[Mutation, str]] = []
        for i, mutation in enumerate(mutations):
            outcome = judge(lab, mutation, Path(tmp) / "work", args.sim)
            outcomes.append((mutation, outcome))
            print(f"\r{i + 1}/{len(mutations)}", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
    took = time.monotonic() - start
    judged = [(m, o) for m, o in outcomes if o != "unchanged"]
    harmful = [(m, o) for m, o in judged if m.impact == "harmful"]
    harmless = [(m, o) for m, o in judged if m.impact == "harmless"]
    deviations = Counter(o for m, o in judged if m.impact == "deviation")
    by_kind = Counter((m.file, m.kind) for m, _ in judged)
    verb = "twin run --backend sim" if args.sim else "twin validate"
    print(f"fabric: {args.fabric.name} ({args.shape})  verdict: {verb}")
    print(f"mutations: {len(judged)} judged ({len(outcomes) - len(judged)} left a file unchanged)")
    for (file, kind), n in sorted(by_kind.items()):
        print(f"  {file:15} {kind:8} {n}")
    tally = Counter(o for _, o in harmful)
    caught = tally["caught"]
    score = caught / len(harmful) if harmful else 1.0
    print(
        f"harmful: {len(harmful)}: caught naming the device {caught} ({score:.1%}), caught "
        f"unnamed {tally['unnamed']}, refused {tally['refused']}, lost {tally['lost']}, "
        f"crashed {tally['crashed']}, missed {tally['missed']}"
    )
    named = (caught + tally["refused"]) / len(harmful) if harmful else 1.0
    print(f"  with the refusals naming the device's file (exit 2): {named:.1%}")
    print("  per table, statement or key (caught naming the device / harmful):")
    per: dict[str, Counter[str]] = {}
    for m, o in harmful:
        per.setdefault(f"{m.file} {_part(m)}", Counter())[o] += 1
    for part, seen in sorted(per.items()):
        others = ", ".join(f"{o} {n}" for o, n in sorted(seen.items()) if o != "caught")
        print(f"    {part:40} {seen['caught']}/{sum(seen.values())}  {others}")
    reds = [(m, o) for m, o in harmless if o != "missed"]
    print(f"harmless: {len(harmless)}: false reds {len(reds)}")
    print(
        f"deviations (in no count): {sum(deviations.values())}: {dict(sorted(deviations.items()))}"
    )
    for m, o in reds:
        print(f"  false red ({o}): {m.device} {m.file} {m.where} {m.kind}")
    for m, o in harmful:
        if o != "caught" and (args.show == "all" or o in ("missed", "crashed", "lost")):
            print(f"  {o}: {m.device} {m.file} {m.where} {m.kind}")
    for m, o in judged:
        if m.impact == "deviation" and o in ("crashed", "lost"):
            print(f"  deviation {o}: {m.device} {m.file} {m.where} {m.kind}")
    print(f"time: {took:.0f} s")
    if args.write:
        others = "".join(f"; {tally[o]} {o}" for o in ("unnamed", "lost", "crashed") if tally[o])
        row = (
            f"| {blocks.command()} | {verb} | {len(harmful)} | {caught} ({score:.1%}{others}) "
            f"| {tally['refused']} | {tally['missed']} | {len(reds)} ({len(harmless)}) "
            f"| {took:.0f} s, {blocks.load()} |"
        )
        for path in blocks.write_row("mutations", MUTATION_HEADER, row):
            print(f"rewrote {path.relative_to(REPO)}: mutations")
    return 1 if reds or tally["crashed"] else 0


if __name__ == "__main__":
    sys.exit(main())
