"""The lab directory: what `twin generate` writes and everything else reads.

    DIR/fabric.yaml                    the resolved intent, every default written out
    DIR/design.json                    the design graph (networkx node-link JSON) and figures
    DIR/ifmap.json                     per node: port -> Linux name (netns) and endpoint (clab)
    DIR/configs/<switch>/config_db.json, frr.conf
    DIR/configs/<server>/host.json
    DIR/topology.clab.yml              the containerlab topology (when the lab fits the image)
    DIR/clabernetes.yml                the same as a Clabernetes Topology with its ConfigMaps
    DIR/clab/<node>/...                the container flavour of the configs (twin.render.sonic_vs)

Backends and validators read the configs in this directory, so an edited config is what gets
tested. The directory is written whole into a scratch directory only root can enter and
renamed into place (`twin.safeio.fresh_dir`): bad input never leaves half a lab, and no link
another user plants beside it is followed.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import networkx as nx
import orjson

from twin import safeio
from twin.design import grow
from twin.design.graph import Design, Port, design, figures, ports_of
from twin.errors import LabError
from twin.intent import fabric as intent
from twin.intent.inputs import CONFIG_BYTES, read_json, read_text
from twin.render import clab, config_db, frr_conf, host_conf, sonic_vs
from twin.render.config_db import ConfigDb

STATE_FILE = "state.json"


def ifmap(d: Design) -> dict[str, dict[str, dict[str, str]]]:
    """Deterministic port -> Linux name mapping of every node.

    In the netns backend one veth carries each routed interface: a bundle of parallel fabric
    or peer-link ports is one veth named after its PortChannel; a server-facing port (one
    member of a split MLAG bundle) and a server NIC keep their own names. All fit in 15
    characters (`Ethernet1016`, `PortChannel100`).
    """
    mapping: dict[str, dict[str, dict[str, str]]] = {}
    for node in d.graph.nodes:
        ports = ports_of(d.graph, node)
        mapping[node] = {
            p.name: {
                "netns": p.bundle if p.bundle and p.kind in ("fabric", "peerlink") else p.name,
                "clab": clab.endpoint(p.index),
            }
            for p in ports
        }
    return mapping


def _write_json(path: Path, data: Any) -> None:
    """Indented JSON as `json.dumps(data, indent=2)` writes it, at orjson's speed (the
    standard library's encoder is pure Python when it indents)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))


KEPT = ("runs", "logs", "events.jsonl")
"""What `generate(..., keep=True)` carries over from the lab directory it replaces."""


def _design_json(d: Design) -> dict[str, Any]:
    graph = nx.node_link_data(d.graph, edges="links")
    grown = {"grown": {"mac_numbers": d.numbers}} if d.numbers else {}
    basis = {"headroom": config_db.headroom_basis()}
    return {"figures": figures(d), "sizing": vars(d.sizing), **basis, "graph": graph, **grown}


def recorded(lab: Lab) -> grow.Record:
    """What the lab records of its design (`twin generate --grow-from`), from the design.json
    it has read."""
    return grow.record(lab.design_data, lab.fabric, str(lab.path))


def redesigned(lab: Lab) -> Design:
    """The lab's intent designed again: like its own design when it was grown from another
    lab (its design.json records `grown`), else from the intent alone."""
    if "grown" in lab.design_data:
        return grow.grown(lab.fabric, str(lab.path / "fabric.yaml"), recorded(lab))
    return design(lab.fabric)


def holds(out: Path, fabric: intent.Fabric, file: str = "fabric.yaml") -> bool:
    """Whether the lab directory `out` holds the design of `fabric` (its fabric.yaml and
    design.json are what `generate` would write for it)."""
    d = design(fabric, file)
    try:
        resolved = (out / "fabric.yaml").read_text()
        written = json.loads((out / "design.json").read_bytes())
    except (OSError, ValueError):
        return False
    return resolved == intent.dump(d.fabric) and written == json.loads(
        orjson.dumps(_design_json(d))
    )


def generate(
    fabric: intent.Fabric,
    out: Path,
    file: str = "fabric.yaml",
    force: bool = False,
    keep: bool = False,
    grow_from: Path | None = None,
) -> Design:
    """Design the fabric and write its lab directory to `out` (atomically); with `keep`, the
    runs, logs and events of the lab directory it replaces are carried over (`KEPT`); with
    `grow_from`, every assignment of that lab is kept (`twin.design.grow`)."""
    d = (
        design(fabric, file)
        if grow_from is None
        else grow.grown(fabric, file, recorded(Lab.open(grow_from)))
    )
    if (out / STATE_FILE).exists():
        raise LabError(f"{out}: a twin of this lab is running; destroy it first")
    here = Path.cwd().resolve()
    if out.exists() and (out.resolve() == here or out.resolve() in here.parents):
        raise LabError(f"{out}: the working directory or one above it (write a lab into its own)")
    if out.exists() and any(out.iterdir()):
        if not force:
            raise LabError(f"{out}: directory exists and is not empty (use --force to replace it)")
        check_replaceable(out)
    with safeio.fresh_dir(out, replace=force) as tmp:
        _write(d, tmp)
        moved: list[str] = []
        try:
            for entry in KEPT if keep else ():
                if os.path.lexists(out / entry):
                    (out / entry).rename(tmp / entry)
                    moved.append(entry)
        except BaseException:
            for entry in moved:  # what was carried over goes back, whatever failed
                (tmp / entry).rename(out / entry)
            raise
    return d


LAB_ENTRIES = frozenset(
    {
        "fabric.yaml",
        "design.json",
        "ifmap.json",
        "configs",
        "topology.clab.yml",
        "clabernetes.yml",
        "clab",
        "logs",
        "validate",
        "runs",
        "events.jsonl",
    }
)
"""What a lab directory holds: `twin generate` writes the first ones, the verbs the rest."""


def check_replaceable(out: Path) -> None:
    """Refuse to replace `out` unless it is a lab directory with nothing else in it (not a
    link, not a directory holding anything else)."""
    if out.is_symlink() or not out.is_dir():
        raise LabError(f"{out}: not a directory (--force replaces only a lab directory)")
    names = {entry.name for entry in out.iterdir()}
    missing = sorted({"fabric.yaml", "design.json", "ifmap.json"} - names)
    others = sorted(names - LAB_ENTRIES)
    if missing or others:
        why = f"{missing[0]} missing" if missing else f"it holds {others[0]!r}"
        raise LabError(f"{out}: not a lab directory ({why}); --force replaces only a lab directory")


def _write(d: Design, root: Path) -> None:
    (root / "fabric.yaml").write_text(intent.dump(d.fabric))
    _write_json(root / "design.json", _design_json(d))
    names = ifmap(d)
    _write_json(root / "ifmap.json", names)
    for switch in d.switches():
        _write_json(root / "configs" / switch / "config_db.json", config_db.render(d, switch))
        (root / "configs" / switch / "frr.conf").write_text(frr_conf.render(d, switch))
    for server in d.nodes("server"):
        _write_json(root / "configs" / server / "host.json", host_conf.render(d, server))
    with contextlib.suppress(sonic_vs.Refused):
        clab.write(Lab(root))


def clab_refusal(lab: Lab) -> str | None:
    """Why the lab cannot run on containerlab (one line), or None when it can."""
    try:
        sonic_vs.check(lab)
    except sonic_vs.Refused as refused:
        return str(refused)
    return None


WRITTEN = ("configs", "logs", "validate", "runs")
"""Folders of a lab directory searched whole for links."""


def refuse_links(root: Path, folders: tuple[str, ...] = ()) -> None:
    """Refuse a symbolic link among the entries of `root` or anywhere in its `folders`: twin
    reads and writes there as root (state, event log, logs, reports) and follows no link."""
    found = [entry for entry in root.iterdir() if entry.is_symlink()]
    for folder in folders:
        found += _links_under(str(root / folder))
    if found:
        raise LabError(f"{found[0]}: a symbolic link (twin writes here and follows no link)")
    odd = [e for e in root.iterdir() if not (e.is_file() or e.is_dir())]
    if odd:
        raise LabError(f"{odd[0]}: not a regular file or directory (a FIFO or socket planted?)")


def _links_under(top: str) -> list[Path]:
    """The symbolic links under a folder in os.walk's order (top down, in each folder the
    links to folders first, a folder it cannot list skipped, links not followed), told by
    each entry's type as `scandir` read it: no `lstat` a file."""
    try:
        with os.scandir(top) as listing:
            entries = list(listing)
    except OSError:
        return []
    links = [e for e in entries if e.is_symlink()]
    to_folders = [e for e in links if _is_dir(e)]
    found = [Path(e.path) for e in to_folders + [e for e in links if e not in to_folders]]
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            found += _links_under(entry.path)
    return found


def _is_dir(entry: os.DirEntry[str]) -> bool:
    """Whether an entry is a folder or a link to one (False where it cannot be told)."""
    try:
        return entry.is_dir()
    except OSError:
        return False


def lab_target(target: str) -> tuple[str, Lab | None]:
    """The lab a command line names: a lab directory (its name is read from it) or a lab
    name; anything else is refused, so a path can never be taken for a name."""
    path = Path(target)
    if target and (path / "fabric.yaml").is_file():
        lab = Lab.open(path)
        return lab.name, lab
    if path.is_dir():
        raise LabError(f"{target}: a directory but not a lab directory (fabric.yaml missing)")
    if intent.is_lab_name(target):
        return target, None
    raise LabError(
        f"{target!r}: neither a lab name ({intent.LAB_NAME.pattern}) nor a lab directory"
    )


RACY_NS = 2_000_000_000
"""A file changed less than this before it was read is not kept: within a file system's
timestamp tick (a few ms, 2 s on FAT) a later edit of the same size in place leaves its stat
unchanged (git's "racily clean" rule)."""

Stat = tuple[int, int, int]
"""What tells a file's version: (st_mtime_ns, st_size, st_ino)."""


def version(path: str | Path, since: int) -> Stat | None:
    """The version of a regular file, to keep what is read from it until it changes; None
    when it was written within `RACY_NS` before `since` (time.time_ns() taken before reading
    it: a later change may not show). FileNotFoundError when it is not a regular file."""
    return _version(os.stat(path), path, since)


Listing = list[tuple[str, bool]]
"""A folder's entries but links to folders, in name order: (path, whether a folder)."""


def _versions(
    top: str, since: int, out: list[tuple[str, Stat]], kept: dict[str, tuple[Stat, Listing]]
) -> bool:
    """The `version` of every file under `top` added to `out` as `os.walk` lists them (top
    down, names sorted, a directory it cannot list skipped, links to directories not
    followed), with one `stat` a file (a run stamps the configs 16 times or more); False,
    stopping, at one just written. A folder is listed again only when its own version
    changed (an entry added, removed or renamed there), else read from `kept`: a `stat` a
    folder, not a `scandir`."""
    listing = _listing(top, since, kept)
    if listing is None:
        return True
    below = []
    for path, is_dir in listing:
        if is_dir:
            below.append(path)
            continue
        found = _version(os.stat(path), path, since)
        if found is None:
            return False
        out.append((path, found))
    return all(_versions(folder, since, out, kept) for folder in below)


def _listing(top: str, since: int, kept: dict[str, tuple[Stat, Listing]]) -> Listing | None:
    """A folder's `Listing` (None when it cannot be listed), from `kept` while the folder's
    (mtime, size, inode) are those it was listed at, more than `RACY_NS` before; one holding
    a link is not kept (the kind of what it points to may change without the folder)."""
    try:
        st = os.stat(top)
    except OSError:
        return None
    now: Stat = (st.st_mtime_ns, st.st_size, st.st_ino)
    hit = kept.get(top)
    if hit is not None and hit[0] == now:
        return hit[1]
    try:
        with os.scandir(top) as entries:
            found = sorted(entries, key=lambda e: e.name)
    except OSError:
        return None
    kinds = [(entry, _is_dir(entry)) for entry in found]
    listing = [(e.path, is_dir) for e, is_dir in kinds if not (is_dir and e.is_symlink())]
    if st.st_mtime_ns < since - RACY_NS and not any(e.is_symlink() for e in found):
        kept[top] = (now, listing)
    return listing


def _version(st: os.stat_result, path: str | Path, since: int) -> Stat | None:
    """`version` of a file from its `os.stat`."""
    if not stat.S_ISREG(st.st_mode):
        raise FileNotFoundError(path)
    if st.st_mtime_ns >= since - RACY_NS:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


@dataclass
class Lab:
    """A lab directory on disk, read lazily."""

    path: Path
    _read: dict[Path, tuple[Stat, Any]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    checked: dict[tuple[bool, bool], Any] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    """`twin.lab.check.check`'s memo: per (`live`, hosts checked as applied), the `stamp` the
    files had when they passed."""
    _ports: dict[str, tuple[Port, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _listings: dict[str, tuple[Stat, Listing]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    """`configs_stamp`'s folders as last listed (`_listing`)."""

    @classmethod
    def open(cls, path: Path) -> Lab:
        """Open a lab directory, or say what is missing or planted."""
        for needed in ("fabric.yaml", "design.json", "ifmap.json"):
            if not (path / needed).is_file():
                raise LabError(f"{path}: not a lab directory ({needed} missing; run twin generate)")
        refuse_links(path, WRITTEN)
        return cls(path)

    @cached_property
    def fabric(self) -> intent.Fabric:
        """The resolved intent."""
        return intent.load(self.path / "fabric.yaml")

    @property
    def name(self) -> str:
        """The lab's name: the tag of everything its twin creates."""
        return self.fabric.name

    @cached_property
    def design_data(self) -> dict[str, Any]:
        """design.json as read."""
        data: dict[str, Any] = read_json(self.path / "design.json")
        return data

    @cached_property
    def graph(self) -> nx.MultiGraph:
        """The design graph."""
        graph: nx.MultiGraph = nx.node_link_graph(
            self.design_data["graph"], edges="links", multigraph=True
        )
        return graph

    def ports(self, node: str) -> tuple[Port, ...]:
        """The node's connected ports in port order (`ports_of` its design graph), made once
        a node: seven static validators read every switch's (a 1,024-server lab's 174
        switches hold 11,276 ports), host_rdma every server's."""
        made = self._ports.get(node)
        if made is None:
            made = self._ports[node] = tuple(ports_of(self.graph, node))
        return made

    @property
    def figures(self) -> dict[str, Any]:
        """The design's headline figures."""
        figs: dict[str, Any] = self.design_data["figures"]
        return figs

    @cached_property
    def ifmap(self) -> dict[str, dict[str, dict[str, str]]]:
        """Port -> Linux names per node."""
        data: dict[str, dict[str, dict[str, str]]] = read_json(self.path / "ifmap.json")
        return data

    def nodes(self, role: str) -> list[str]:
        """Nodes with this role, in design order."""
        return [n for n, d in self.graph.nodes(data=True) if d["role"] == role]

    def switches(self) -> list[str]:
        """Every switch."""
        return self.nodes("superspine") + self.nodes("spine") + self.nodes("leaf")

    def config_db(self, node: str) -> ConfigDb:
        """A switch's `config_db.json` as it is now on disk (`_json`: shared, read-only)."""
        config: ConfigDb = self._json(node, "config_db.json")
        return config

    def frr_conf(self, node: str) -> str:
        """A switch's `frr.conf` as it is now on disk."""
        return read_text(self._file(node, "frr.conf"), CONFIG_BYTES)

    def host(self, node: str) -> dict[str, Any]:
        """A server's host file as it is now on disk (`_json`: shared, read-only)."""
        host: dict[str, Any] = self._json(node, "host.json")
        return host

    def stamp(self) -> tuple[Any, ...] | None:
        """The `version` of the design, its port names and every config (`configs_stamp`):
        what is read from them can be kept while it is unchanged; None when one was just
        written or is missing."""
        now = time.time_ns()
        try:
            files = tuple(version(self.path / f, now) for f in ("design.json", "ifmap.json"))
        except OSError:
            return None
        configs = self.configs_stamp()
        return None if None in files or configs is None else (*files, configs)

    def configs_stamp(self) -> tuple[tuple[str, Stat], ...] | None:
        """The `version` of every file under configs/, so that what is computed from them can
        be kept while it is unchanged; None when one was just written."""
        out: list[tuple[str, Stat]] = []
        top, now = str(self.path / "configs"), time.time_ns()
        return tuple(out) if _versions(top, now, out, self._listings) else None

    def _file(self, node: str, name: str) -> Path:
        path = self.path / "configs" / node / name
        if not path.is_file():
            raise LabError(f"{path}: missing")
        return path

    def _json(self, node: str, name: str) -> Any:
        """A config file parsed, read again only when its `version` changed (or was None):
        callers share the returned object and copy it before changing it."""
        path = self.path / "configs" / node / name
        now = time.time_ns()
        try:
            kept = version(path, now)
        except OSError:
            raise LabError(f"{path}: missing") from None
        cached = self._read.get(path)
        if kept is not None and cached is not None and cached[0] == kept:
            return cached[1]
        data = read_json(path, CONFIG_BYTES)
        if kept is not None:
            self._read[path] = (kept, data)
        return data
