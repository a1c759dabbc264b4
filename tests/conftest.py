"""Shared fixtures of the tests (lab directories and running twins) and the test tiers.

The tiers are directories, each test marked by where it lives (`pytest -m unit`, ...):
tests/unit (pure Python: no root, no processes, no sockets, no simulator runs; the packages'
doctests count here too), tests/sim (runs the packet simulator's C core), tests/contract (every
backend through the lifecycle's promises) and tests/integration (live twins: namespaces, FRR,
root, and tests that start processes).

A running twin is `twin.pytest_plugin.Twin` (the plugin's helper: its lab and backend, read
through the backend interface); the functions here add what only tests need (the CLI in a
new process, a netns twin's plan and processes, leftovers).

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
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from labs import lifecycle, registry
from labs.netns import frr
from labs.netns.plan import Plan, build
from twin.cli import main as twin_main
from twin.errors import LabError
from twin.intent import fabric as intent
from twin.lab import directory as labdir
from twin.lab.directory import Lab
from twin.pytest_plugin import Twin

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"
TIERS = ("unit", "sim", "contract", "integration")
SMALL = REPO / "examples" / "small.yaml"
TWIN = Path(sys.executable).with_name("twin")
# Where a twin may leave files by mistake (searched for names containing the lab's name).
PLACES = [Path("/tmp"), Path("/run"), Path("/var/run"), Path("/var/tmp"), Path("/dev/shm")]


def tier(path: Path) -> str | None:
    """The tier of a collected file: its directory under tests/, `unit` for a package's
    doctests, None for anything else."""
    if not path.is_relative_to(REPO):
        return None
    parts = path.relative_to(REPO).parts
    if parts[0] == "tests":
        return parts[1] if len(parts) > 2 and parts[1] in TIERS else None
    return "unit" if parts[0] in ("twin", "labs", "traffic", "validators") else None


SESSION_PID = os.getpid()


def _interrupt(signum: int, _: object) -> None:
    """Stop the session as at Ctrl-C; a forked child (pyroute2's namespace helpers, ended by
    SIGTERM) inherits this handler and must die of the signal instead: raised there, the
    interrupt ran the session's teardown in the child and removed the twins' namespaces under
    the tests still using them."""
    if os.getpid() != SESSION_PID:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    raise KeyboardInterrupt(signal.Signals(signum).name)


def pytest_configure(config: pytest.Config) -> None:
    """A suite started in the background (`cmd &` starts it with SIGINT ignored) or ended by a
    CI timeout (SIGTERM) stops as at Ctrl-C: its fixtures' teardown removes the twins, users
    and namespaces the session made (a SIGTERM left them behind)."""
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test with the tier of the directory it lives in."""
    for item in items:
        name = tier(item.path)
        if name is not None:
            item.add_marker(name)


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


def twin_cli(
    *args: str, timeout: float = 120, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the `twin` command in a new process (in `cwd`, else here)."""
    argv = [str(TWIN)] if TWIN.exists() else [sys.executable, "-m", "twin.cli.main"]
    return subprocess.run(
        [*argv, *args], capture_output=True, text=True, timeout=timeout, check=False, cwd=cwd
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


BACKENDS = [
    pytest.param(
        "netns",
        marks=[
            pytest.mark.integration,
            pytest.mark.skipif(root_and_frr() is not None, reason=str(root_and_frr())),
        ],
    ),
    "fake",
    "sim",
]
"""Backends a backend-neutral test runs on (`@pytest.mark.parametrize("backend", BACKENDS)`
or a fixture's `params`): netns as an integration test, fake and sim everywhere."""


def tagged(name: str) -> list[int]:
    """Pids whose environment says TWIN_LAB=<name> (read here, not through the library)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if f"TWIN_LAB={name}".encode() in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """Whether the process exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


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
    found += [f"file {p}" for p in [lifecycle.RUN_ROOT / name] if p.exists()]
    for pid in pids or []:
        found += [f"file {p}" for p in frr.FRR_TMP.glob(f"*.{pid}")]
    for place in PLACES:
        with contextlib.suppress(OSError):
            found += [f"file {p}" for p in place.iterdir() if name in p.name]
    return found


def cli(twin: Twin, verb: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`twin VERB DIR ARGS...` on the twin's lab, in a new process."""
    return twin_cli(verb, str(twin.path), *args)


def ping(twin: Twin, src: str, dst: str, *options: str) -> subprocess.CompletedProcess[str]:
    """One ping from a node to an address."""
    return twin.exec(src, "ping", "-n", "-q", *options, dst)


def plan(twin: Twin) -> Plan:
    """What a netns twin of the lab consists of."""
    return build(twin.lab)


def bgp_cli(twin: Twin, node: str) -> dict[str, dict[str, Any]]:
    """A switch's peers as the user sees them: `twin exec DIR NODE -- vtysh -c 'show bgp
    summary json'` in a new process."""
    done = cli(twin, "exec", node, "--", "vtysh", "-c", "show bgp summary json")
    assert done.returncode == 0, done.stderr
    peers: dict[str, dict[str, Any]] = json.loads(done.stdout)["ipv4Unicast"]["peers"]
    return peers


def snapshot(twin: Twin) -> dict[str, Any]:
    """What another lab could break: a netns twin's processes, and every interface (index,
    name, MTU, admin state) of every namespace."""
    links = {}
    for node in plan(twin).nodes:
        done = twin.exec(node, "ip", "-j", "link", "show")
        assert done.returncode == 0, done.stderr
        links[node] = sorted(
            (x["ifindex"], x["ifname"], x["mtu"], "UP" in x["flags"])
            for x in json.loads(done.stdout)
        )
    return {"pids": sorted(tagged(twin.name)), "links": links}


def recorded_pids(path: Path) -> list[int]:
    """The daemons a lab's state file lists (for the leftover check)."""
    state = path / labdir.STATE_FILE
    if not state.exists():
        return []
    return [
        pid
        for daemons in json.loads(state.read_text())["pids"].values()
        for pid in daemons.values()
    ]


def wait_for(check: Callable[[], bool], what: str, timeout: float = 30) -> None:
    """Poll `check` until it holds; fail naming `what` if it never does."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not reached within {timeout:.0f} s")
        time.sleep(0.2)


@contextlib.contextmanager
def running_twin(path: Path, backend: str = "netns") -> Iterator[Twin]:
    """Deploy the lab in `path` from a new process and always destroy it afterwards (and
    remove by name whatever the destroy missed)."""
    pids: list[int] = []
    try:
        done = twin_cli("deploy", str(path), "--backend", backend)
        pids += recorded_pids(path)
        assert done.returncode == 0, done.stderr
        yield Twin(Lab.open(path), registry.get(backend))
    finally:
        pids += recorded_pids(path)
        twin_cli("destroy", str(path))
        name = Lab.open(path).name
        if leftovers(name, pids):
            twin_cli("cleanup", name)


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


@pytest.fixture(scope="module", params=BACKENDS)
def any_twin(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Twin]:
    """The small lab running on each backend in turn, for one module's backend-neutral tests."""
    path = write_lab(tmp_path_factory.mktemp("any") / "lab", lab_name("any"))
    with running_twin(path, request.param) as twin:
        yield twin


SHORT = {
    "name": "short",
    "settle": 0,
    "traffic": [{"at": 0, "duration": 1, "kind": "backup", "src": "server1", "dst": "server3"}],
    "validate": {"bgp_health": {}},
}


@pytest.fixture(scope="module")
def played_lab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lab directory with one run (`runs/<time>`) of a short scenario on the fake backend."""
    root = tmp_path_factory.mktemp("played")
    lab = write_lab(root / "lab", lab_name())
    scenario = root / "short.yaml"
    scenario.write_text(yaml.safe_dump(SHORT))
    assert twin_main.main(["run", str(lab), str(scenario), "--backend", "fake"]) in (0, 1)
    return lab


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A temporary directory another local user (or frr) can reach (pytest's are root's
    only)."""
    path = Path(tempfile.mkdtemp(prefix="twt-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


@pytest.fixture
def netns() -> Iterator[str]:
    """An empty network namespace of this test's own, its loopback up."""
    name = f"twt-{secrets.token_hex(3)}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
    yield name
    subprocess.run(["ip", "netns", "delete", name], check=False)


@pytest.fixture(scope="session")
def other_user() -> Iterator[str]:
    """A second local user of our own (`twt` and 5 hex digits), removed afterwards."""
    name = f"twt{secrets.token_hex(3)[:5]}"
    subprocess.run(
        ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        check=True,
        capture_output=True,
    )
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], check=False, capture_output=True)


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The mutation campaign on the small lab (tests/mutations.py), once per test module."""
    from tests.mutations import Campaign

    return Campaign.small(tmp_path_factory.mktemp("mutations"))
