"""Shared fixtures of the netns backend tests: lab directories and running twins.

Every twin here has a lab name of its own (`it-<6 hex>`), so tests never touch the labs other
people run on the same machine (`small`, `reference`, `twtest-*`): namespaces `<lab>.<node>`,
processes tagged `TWIN_LAB=<lab>`, `/run/twin/<lab>`. Each twin is destroyed when its fixture
ends, pass or fail, and whatever its destroy missed is removed by name (`twin cleanup`).

The lab is examples/small.yaml with two MLAG pairs (4 leaves) instead of one: with a single
pair no leaf has a remote server subnet, so there would be no ECMP route to count and no
"other pair" to reach a server from.

Integration tests skip, with the reason, when not root or FRR is missing.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pytest
import yaml

from labs.netns import frr
from labs.netns.plan import Plan, build
from twin import labdir
from twin.errors import LabError
from twin.intent import fabric as intent
from twin.labdir import Lab

REPO = Path(__file__).resolve().parent.parent
SMALL = REPO / "examples" / "small.yaml"
TWIN = Path(sys.executable).with_name("twin")
# Where a twin may leave files by mistake (searched for names containing the lab's name).
PLACES = [Path("/tmp"), Path("/run"), Path("/var/run"), Path("/var/tmp"), Path("/dev/shm")]


def lab_name(prefix: str = "it") -> str:
    """A fresh lab name of our own (matches ^[a-z][a-z0-9-]{0,11}$)."""
    return f"{prefix}-{secrets.token_hex(3)}"


def write_lab(out: Path, name: str, leaves: int = 4) -> Path:
    """Generate examples/small.yaml under another name (and `leaves` leaves) into `out`."""
    fabric = yaml.safe_load(SMALL.read_text())
    fabric["name"] = name
    fabric["leaves"]["count"] = leaves
    source = out.parent / f"{out.name}.yaml"
    source.write_text(yaml.safe_dump(fabric))
    labdir.generate(intent.load(source), out, str(source))
    return out


def twin_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the `twin` command in a new process."""
    argv = [str(TWIN)] if TWIN.exists() else [sys.executable, "-m", "twin.cli.main"]
    return subprocess.run(
        [*argv, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def root_and_frr() -> str | None:
    """Why integration tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, veths, FRR)"
    try:
        frr.check_installed()
    except LabError as exc:
        return str(exc)
    for tool in ("ip", "iptables", "tc", "ping"):
        if shutil.which(tool) is None:
            return f"needs {tool}"
    return None


def tagged(name: str) -> list[int]:
    """Pids whose environment says TWIN_LAB=<name> (read here, not through the library)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if f"TWIN_LAB={name}".encode() in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
    return found


def namespaces(name: str) -> list[str]:
    """The lab's namespaces that exist now."""
    listing = Path("/var/run/netns")
    if not listing.exists():
        return []
    return sorted(p.name for p in listing.iterdir() if p.name.split(".", 1)[0] == name)


def leftovers(name: str, pids: list[int] | None = None) -> list[str]:
    """Everything of lab `name` left on the machine: namespaces, processes, files outside the
    lab directory (the run directory, FRR crash-log directories of its daemons `pids`, any
    entry naming the lab where a twin could write)."""
    found = [f"namespace {n}" for n in namespaces(name)]
    found += [f"process {p}" for p in tagged(name)]
    found += [f"file {p}" for p in [frr.RUN_ROOT / name] if p.exists()]
    for pid in pids or []:
        found += [f"file {p}" for p in frr.FRR_TMP.glob(f"*.{pid}")]
    for place in PLACES:
        with contextlib.suppress(OSError):
            found += [f"file {p}" for p in place.iterdir() if name in p.name]
    return found


@dataclass
class Twin:
    """A lab directory, and the helpers to look into its running twin."""

    path: Path
    pids_seen: list[int] = field(default_factory=list)

    @cached_property
    def lab(self) -> Lab:
        """The lab directory."""
        return Lab.open(self.path)

    @property
    def name(self) -> str:
        """The lab's name."""
        return self.lab.name

    @cached_property
    def plan(self) -> Plan:
        """What the twin consists of."""
        return build(self.lab)

    def cli(self, verb: str, *args: str) -> subprocess.CompletedProcess[str]:
        """`twin VERB DIR ARGS...` in a new process."""
        return twin_cli(verb, str(self.path), *args)

    def deploy(self) -> subprocess.CompletedProcess[str]:
        """Deploy from a new process; fail the test (with its stderr) if it does not."""
        done = self.cli("deploy")
        self.remember_pids()
        assert done.returncode == 0, done.stderr
        return done

    def remember_pids(self) -> None:
        """Note the daemons the state file lists (for the leftover check)."""
        state = self.path / labdir.STATE_FILE
        if state.exists():
            for daemons in json.loads(state.read_text())["pids"].values():
                self.pids_seen += list(daemons.values())

    def destroy(self) -> list[str]:
        """Destroy from a new process, remove by name whatever it missed; returns leftovers
        found after the destroy (before the clean-up)."""
        self.remember_pids()
        self.cli("destroy")
        left = leftovers(self.name, self.pids_seen)
        if left:
            twin_cli("cleanup", self.name)
        return left

    def ns(self, node: str, *argv: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """Run a command in a node's namespace."""
        return subprocess.run(
            ["ip", "netns", "exec", f"{self.name}.{node}", *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def servers(self) -> dict[str, str]:
        """Server -> its address, from host.json."""
        return {s: self.lab.host(s)["address"].split("/")[0] for s in self.lab.nodes("server")}

    def pair_of(self, server: str) -> set[str]:
        """The leaves a server hangs on."""
        return {nic["peer"] for nic in self.lab.host(server)["interfaces"]}

    def remote_subnets(self, leaf: str) -> list[str]:
        """Server subnets of the other leaf pairs."""
        nodes = self.lab.graph.nodes
        mine = nodes[leaf]["subnet"]
        return sorted({nodes[n]["subnet"] for n in self.lab.nodes("leaf")} - {mine})

    def spines(self) -> int:
        """Number of spines: the full ECMP width of a leaf."""
        return len(self.lab.nodes("spine"))

    def widths(self, leaf: str) -> dict[str, int]:
        """Prefix -> usable next hops, from `ip -j route` in the leaf's namespace."""
        done = self.ns(leaf, "ip", "-j", "route", "show", "table", "main")
        assert done.returncode == 0, done.stderr
        widths = {}
        for route in json.loads(done.stdout):
            hops = route.get("nexthops", [route])
            alive = [h for h in hops if not {"dead", "linkdown"} & set(h.get("flags", []))]
            dst = route["dst"] if "/" in route["dst"] else f"{route['dst']}/32"
            widths[dst] = len(alive) if route.get("type", "unicast") == "unicast" else 0
        return widths

    def remote_widths(self) -> dict[tuple[str, str], int]:
        """(leaf, remote subnet) -> ECMP width, for every leaf."""
        return {
            (leaf, subnet): self.widths(leaf).get(subnet, 0)
            for leaf in self.lab.nodes("leaf")
            for subnet in self.remote_subnets(leaf)
        }

    def bgp(self, node: str, cli: bool = False) -> dict[str, dict[str, Any]]:
        """Peers of a switch: `vtysh -c 'show bgp summary json'` against its daemons, through
        `twin exec DIR NODE -- vtysh ...` when `cli` (a new Python process: slower)."""
        command = ["vtysh", "-c", "show bgp summary json"]
        if cli:
            done = self.cli("exec", node, "--", *command)
        else:
            socket = ["--vty_socket", str(frr.run_dir(self.name, node))]
            done = self.ns(node, command[0], *socket, *command[1:])
        assert done.returncode == 0, done.stderr
        peers: dict[str, dict[str, Any]] = json.loads(done.stdout)["ipv4Unicast"]["peers"]
        return peers

    def bgp_all(self) -> dict[tuple[str, str], dict[str, Any]]:
        """(switch, peer) -> peer summary, for every switch (in parallel)."""
        with ThreadPoolExecutor(4) as pool:
            results = pool.map(self.bgp, self.lab.switches())
            return {
                (node, peer): summary
                for node, peers in zip(self.lab.switches(), results, strict=True)
                for peer, summary in peers.items()
            }

    def snapshot(self) -> dict[str, Any]:
        """What another lab could break: the twin's processes, and every interface (index,
        name, MTU, admin state) of every namespace."""
        links = {}
        for node in self.plan.nodes:
            done = self.ns(node, "ip", "-j", "link", "show")
            assert done.returncode == 0, done.stderr
            links[node] = sorted(
                (x["ifindex"], x["ifname"], x["mtu"], "UP" in x["flags"])
                for x in json.loads(done.stdout)
            )
        return {"pids": sorted(tagged(self.name)), "links": links}

    def established(self) -> bool:
        """Every BGP session of every switch Established."""
        return {s["state"] for s in self.bgp_all().values()} == {"Established"}

    def converged(self) -> bool:
        """Every remote subnet at full width on every leaf."""
        return all(w == self.spines() for w in self.remote_widths().values())

    def events(self, since: float = 0.0) -> list[dict[str, Any]]:
        """The lab's event log from `since` on."""
        path = self.path / "events.jsonl"
        if not path.exists():
            return []
        lines = path.read_text().splitlines()
        return [e for e in map(json.loads, filter(None, lines)) if e["t"] >= since]

    def ping(self, src: str, dst: str, *options: str) -> subprocess.CompletedProcess[str]:
        """One ping from a node to an address."""
        return self.ns(src, "ping", "-n", "-q", *options, dst)


def wait_for(check: Callable[[], bool], what: str, timeout: float = 30) -> None:
    """Poll `check` until it holds; fail naming `what` if it never does."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not reached within {timeout:.0f} s")
        time.sleep(0.2)


@contextlib.contextmanager
def running_twin(path: Path) -> Iterator[Twin]:
    """Deploy the lab in `path` from a new process and always destroy it afterwards."""
    twin = Twin(path)
    try:
        twin.deploy()
        yield twin
    finally:
        twin.destroy()


def _small_twin(tmp_path_factory: pytest.TempPathFactory, folder: str) -> Iterator[Twin]:
    reason = root_and_frr()
    if reason:
        pytest.skip(reason)
    path = write_lab(tmp_path_factory.mktemp("netns") / folder, lab_name())
    with running_twin(path) as twin:
        yield twin


@pytest.fixture(scope="session")
def small_twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Twin]:
    """A running twin of the small lab (two MLAG pairs), shared by the read-only tests."""
    yield from _small_twin(tmp_path_factory, "shared")


@pytest.fixture(scope="module")
def own_twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Twin]:
    """A running twin of the small lab for one module's destructive tests."""
    yield from _small_twin(tmp_path_factory, "own")
