"""What every backend's verbs share around a running twin, in one place: the checks before a
deploy, who deployed it, one command at a time per lab, its state file and its event log.

`Managed` wraps a backend (`labs.backend.Backend`; `labs.registry.get` gives every caller one):
a deploy first checks the lab's files (`twin.lab.check`: one line, exit 2, nothing created),
refuses a lab already running and a twin of the lab's name deployed from another lab
directory, lets the backend refuse what it cannot run, then records the deploy (the run
directory with its owner, the state file) before the backend creates anything, and on success
marks it running and logs one `deployed` event; any failure on the way removes what was made.
Destroy, fault and exec refuse a lab directory other than the one that deployed the running
twin, where a twin holds what is named after its lab on the machine or cluster (netns
namespaces, containers, a cluster namespace: `Backend.claims_name`); a fake or sim twin is
only records in its lab directory, so same-named copies of a lab run side by side (a drill's
cases, a review's two sides) and each is its directory's own. Destroy and cleanup forget the
twin (state file, run directory) after the backend removed it, and `twin cleanup` reaches a
backend's leftovers only through `Backend.cleanup`.

The events a lifecycle logs (`labs.events`), one schema on every backend:
`deployed` {backend, nodes, sessions, converged_s, details (the backend's own figures), and
`unconverged` (what it had not reached when it stopped waiting) where it did not converge} and
`destroyed` {backend, and what was removed, a count per kind}.

A twin is known on this machine by its lab's name: its run directory `/run/twin/<lab>` holds
the record of the deploy that made it (`.owner`: the lab directory and the deploying process).
Two lab directories may carry the same lab name (a copy of one, a fabric generated twice), so
a verb that acts on a running twin (deploy, destroy, fault, exec, run, cleanup) acts only from
the lab directory that deployed it, unless told to (`--force-owner`); the refusal names both.

One command at a time changes a lab: deploy, run, destroy and cleanup hold the lab's lock (an
`flock` on `/run/twin/.lock.<lab>`, released by the kernel when the holder dies); a second
command of the same lab is refused in one line instead of destroying the twin under the first.
Where twins do not hold the lab's name (`Backend.claims_name` false: fake, sim), the lock is
the lab directory's (`.lock.<lab>.<digest of its path>`), so same-named copies run side by side.

Not as root (the fake and sim backends need none), the run root is a directory of the user's
own under the temporary directory (`twin-<uid>`, refused unless it is theirs and private).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from labs import events, processes, state
from labs.backend import (
    Backend,
    Deployed,
    Fault,
    Observer,
    Phase,
    Played,
    Progress,
    Status,
    Timeline,
    Traffic,
    load,
    quiet,
)
from twin.errors import LabError, TwinError
from twin.intent.fabric import is_lab_name
from twin.lab import check as labcheck
from twin.lab.directory import Lab

RUN_ROOT = Path("/run/twin")
OWNER = ".owner"
LOCK = ".lock."
MAX_OWNER_BYTES = 4096


def run_dir(lab: str) -> Path:
    """The lab's own run directory; a name that breaks the lab-name rule is refused, so the
    path is always one entry directly under the run root."""
    if not is_lab_name(lab):
        raise ValueError(f"{lab!r} is not a lab name")
    return root() / lab


def root() -> Path:
    """The run root, made if missing: root's and readable by all (it is never removed:
    removing it while another lab claims its run directory in it would fail that claim);
    not as root, a private directory of the user's own."""
    if os.geteuid() == 0:
        RUN_ROOT.mkdir(mode=0o755, parents=True, exist_ok=True)
        return RUN_ROOT
    own = Path(tempfile.gettempdir()) / f"twin-{os.geteuid()}"
    with contextlib.suppress(FileExistsError):
        own.mkdir(mode=0o700)
    st = os.lstat(own)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise LabError(f"{own}: not a private directory of this user's (remove it)")
    return own


def labs_left() -> list[str]:
    """Labs with a run directory on this machine (entries named by the lab-name rule)."""
    base = root()
    return sorted(
        p.name for p in base.iterdir() if is_lab_name(p.name) and p.is_dir() and not p.is_symlink()
    )


@dataclass(frozen=True)
class Owner:
    """Who made a lab's run directory: its lab directory and the deploying process."""

    lab_dir: str
    pid: int
    start: int | None
    transient: bool = False  # the deploying command destroys the twin when it ends
    backend: str = "netns"  # the backend it runs on (records before there were others: netns)


def claim(lab: str, lab_dir: Path, backend: str = "netns") -> None:
    """Make the lab's run directory, with the record of this deploy in it, in one step (so a
    run directory is never seen without its record)."""
    final = run_dir(lab)
    tmp = Path(tempfile.mkdtemp(prefix=f".{lab}.", dir=final.parent))
    tmp.chmod(0o755)
    me = os.getpid()
    record = Owner(str(lab_dir.resolve()), me, processes.start_time(me), _transient[0], backend)
    (tmp / OWNER).touch(mode=0o600)  # root's only, as the lab directory it names
    (tmp / OWNER).write_text(json.dumps(asdict(record)))
    try:
        tmp.rename(final)
    except OSError as exc:
        (tmp / OWNER).unlink()
        tmp.rmdir()
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
            raise LabError(
                f"lab {lab}: {final} exists (another deploy of it, or its leftovers: "
                f"twin cleanup {lab})"
            ) from None
        raise


def release(lab: str) -> None:
    """Remove the lab's run directory once its backend removed what it held (the record of
    the deploy, then the directory if that left it empty)."""
    path = run_dir(lab)
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        (path / OWNER).unlink()
    with contextlib.suppress(OSError):
        path.rmdir()


def lab_dirs(lab: str, lab_dir: Path | None) -> set[Path]:
    """Where the lab's state file may be: `lab_dir`, and the lab directory its deploy
    recorded (read before its backend removes the run directory with the record)."""
    record = owner(lab)
    return {d for d in (lab_dir, Path(record.lab_dir) if record else None) if d is not None}


def forget(lab: str, dirs: set[Path], claimed: bool = True) -> None:
    """Forget the lab's twin: its state file in each of `dirs` where it is this lab's, and
    its run directory when its deploy `claimed` the lab's name."""
    for directory in dirs:
        if own_state(lab, directory) is not None:
            state.clear(directory)
    if claimed:
        release(lab)


_transient = [False]


@contextlib.contextmanager
def transient() -> Iterator[None]:
    """While inside, a twin this process deploys is recorded as its own for its lifetime
    (`twin run` destroys it at the end): once the process is gone, it is left over."""
    _transient[0] = True
    try:
        yield
    finally:
        _transient[0] = False


def owner(lab: str) -> Owner | None:
    """The record of the lab's deploy, or None when there is none (or it is not one)."""
    try:
        fd = os.open(run_dir(lab) / OWNER, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        raw = file.read(MAX_OWNER_BYTES)
    try:
        data = json.loads(raw)
        start = data["start"]
        if start is not None and type(start) is not int:
            return None
        backend = data.get("backend", "netns")
        if not isinstance(backend, str):
            return None
        transient = data.get("transient") is True
        return Owner(str(data["lab_dir"]), int(data["pid"]), start, transient, backend)
    except (ValueError, KeyError, TypeError):
        return None


def own_state(lab: str, lab_dir: Path | None) -> state.State | None:
    """The lab's state file in `lab_dir`, if it is this lab's."""
    if lab_dir is None:
        return None
    try:
        st = state.load(lab_dir)
    except (OSError, TwinError):
        return None
    return st if st is not None and st.lab == lab else None


def status(lab: str) -> str:
    """`deploying` (its deploying process lives; `in use by its run` when that is a `twin
    run` that destroys it at its end, and `left over` once that run is gone), `running` (its
    state says running and its processes live, or its backend says it is up: a fake, sim or
    container twin, which runs no process here), `unknown` (processes of it live, but no
    record or state file says what they are: its lab directory moved, say) or `left over`
    (nothing of it lives: none of the processes its state records, as after a destroy killed
    part-way; or its state says its deploy died)."""
    record = owner(lab)
    alive = bool(processes.tagged(lab))
    if record is None:
        return "unknown" if alive else "left over"
    if record.start is not None and processes.start_time(record.pid) == record.start:
        return "in use by its run" if record.transient else "deploying"
    if record.transient:  # its run died without destroying it (SIGKILL)
        return "left over"
    st = own_state(lab, Path(record.lab_dir))
    if st is None:
        return "unknown" if alive else "left over"
    if st.status != "running":
        return "left over"
    if alive:
        return "running"
    return "running" if not st.pids and _up(record) else "left over"


def _up(record: Owner) -> bool:
    """Whether the backend of the record says its twin is up (a fake, sim or container twin
    runs no process of this machine's; one it cannot read is not)."""
    try:
        return load(record.backend).running(Lab.open(Path(record.lab_dir)))
    except TwinError:
        return False


def check_owner(
    lab: str,
    lab_dir: Path | None,
    force: bool = False,
    hint: str = "use that directory, or --force-owner",
) -> None:
    """Refuse to act on lab `lab`'s live twin from anywhere but the lab directory that
    deployed it (`lab_dir` None: by name only), naming both; a twin that is provably left
    over, one whose lab directory is gone (moved or removed), or `force`, lets anyone act."""
    record = owner(lab)
    if force or record is None or not (Path(record.lab_dir) / "fabric.yaml").is_file():
        return
    here = str(lab_dir.resolve()) if lab_dir is not None else None
    if here == record.lab_dir:
        return
    why = status(lab)
    if why == "left over":
        return
    where = f"from {here}" if here else "by name"
    why = "live" if why == "unknown" else why
    raise LabError(
        f"lab {lab} is {why}, deployed from {record.lab_dir}: not acting on it {where} ({hint})"
    )


def check_lab_dir(path: Path, trusted: bool = False) -> None:
    """As root, refuse a lab directory (or its `runs`, `logs`) that another user owns or
    anyone but root can write, unless `trusted` (twin then still follows no link in it:
    `twin.safeio`)."""
    if os.geteuid() != 0 or trusted:
        return
    for directory in (path, path / "runs", path / "logs"):
        try:
            st = os.stat(directory)
        except FileNotFoundError:
            continue
        if st.st_uid != 0 or st.st_mode & 0o022:
            who = "another user owns it" if st.st_uid != 0 else "others can write it"
            raise LabError(
                f"{directory}: {who}, and twin runs as root here (--trust-lab-dir to go on)"
            )


_held: dict[str, int] = {}
"""Locks this process holds: lab (or lab and digest of its directory) -> descriptor of its
lock file."""


@contextlib.contextmanager
def locked(lab: str, verb: str, lab_dir: Path | None = None) -> Iterator[None]:
    """Hold the lab's lock while inside (that of its lab directory `lab_dir` when given; again
    inside: already held); another holder is refused in one line."""
    key = lab
    if lab_dir is not None:
        digest = hashlib.blake2b(str(lab_dir.resolve()).encode(), digest_size=8).hexdigest()
        key = f"{lab}.{digest}"
    if key in _held:
        yield
        return
    path = root() / (LOCK + key)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            where = f" ({lab_dir})" if lab_dir is not None else ""
            raise LabError(
                f"lab {lab}{where} is busy: another twin command is acting on it; {verb} refused"
            ) from None
        try:
            now = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            now = None
        held = os.fstat(fd)
        if now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
            break
        os.close(fd)  # its holder removed it as we opened it: take the new one
    _held[key] = fd
    try:
        yield
    finally:
        del _held[key]
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        os.close(fd)


class Managed:
    """A backend with the lifecycle around its verbs (the module's docstring); `force_owner`:
    act on a twin another lab directory deployed."""

    def __init__(self, backend: Backend, force_owner: bool = False) -> None:
        self.backend = backend
        self.name = backend.name
        self.capabilities = backend.capabilities
        self.computed = backend.computed
        self.force_owner = force_owner

    def locked(self, lab: str, lab_dir: Path | None, verb: str) -> AbstractContextManager[None]:
        """The lab's lock (`locked`): its name's where its twins hold the name, else its lab
        directory's (by name when none is given)."""
        return locked(lab, verb, None if self.backend.claims_name else lab_dir)

    def check(self, lab: Lab) -> None:
        """Refuse a lab directory other than the one that deployed the lab's running twin
        (where twins hold the lab's name: a fake or sim twin is its lab directory's own)."""
        if self.backend.claims_name:
            check_owner(lab.name, lab.path, self.force_owner)

    def deploy(
        self, lab: Lab, progress: Progress = quiet, timeout: float | None = None
    ) -> Deployed:
        """Check, record, create, mark running, log (the module's docstring)."""
        labcheck.check(lab, live=True, applied=not self.computed)
        recorded = state.load(lab.path)
        if recorded is not None and (recorded.backend != self.name or self.running(lab)):
            on = "" if recorded.backend == self.name else f" on the {recorded.backend} backend"
            raise LabError(f"lab {lab.name} is already running{on} ({lab.path}); destroy it first")
        claims = self.backend.claims_name
        if claims:
            check_owner(lab.name, lab.path, hint="twin destroy that directory first")
        self.backend.check(lab)
        if claims:
            claim(lab.name, lab.path, self.name)
        record = state.Record(lab.path, state.State(lab.name, self.name))
        try:
            record.save()
            up = self.backend.create(lab, record, progress, timeout)
        except BaseException:
            self._remove(lab)
            raise
        record.state.status = "running"
        record.save()
        events.append(
            lab.path,
            "deployed",
            backend=self.name,
            nodes=up.nodes,
            sessions=up.sessions,
            converged_s=up.seconds,
            details=up.details,
            **({"unconverged": up.unconverged} if up.unconverged else {}),
        )
        return up

    def destroy(self, lab: Lab) -> dict[str, int]:
        """Remove the twin and forget it; what was removed."""
        self.check(lab)
        had = state.load(lab.path)
        removed = self._remove(lab)
        if had is not None:
            events.append(lab.path, "destroyed", backend=self.name, **removed)
        return removed

    def _remove(self, lab: Lab) -> dict[str, int]:
        claims = self.backend.claims_name
        dirs = lab_dirs(lab.name, lab.path) if claims else {lab.path}
        removed = self.backend.remove(lab)
        forget(lab.name, dirs, claims)
        return removed

    def cleanup(self, lab: str, lab_dir: Path | None = None) -> dict[str, int]:
        """Remove the leftovers of lab `lab` (by name; the caller checked its owner) and forget
        its twin; what was removed."""
        claims = self.backend.claims_name
        dirs = lab_dirs(lab, lab_dir) if claims else {d for d in (lab_dir,) if d is not None}
        removed = self.backend.cleanup(lab)
        forget(lab, dirs, claims)
        return removed

    def live(self, lab: Lab) -> None:
        """Refuse unless this lab directory's twin runs (naming the directory that deployed a
        twin of its name, if another did)."""
        self.check(lab)
        if not self.running(lab):
            raise LabError(f"lab {lab.name} is not running (twin deploy {lab.path})")

    def running(self, lab: Lab) -> bool:
        """Whether a twin of this lab runs on the backend."""
        return self.backend.running(lab)

    def status(self, lab: Lab) -> Status:
        """Nodes, links and BGP sessions."""
        return self.backend.status(lab)

    def exec(self, lab: Lab, node: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
        """Run a command in a node of the lab directory's own twin."""
        self.check(lab)
        return self.backend.exec(lab, node, argv)

    def fault(self, lab: Lab, fault: Fault) -> dict[str, Any]:
        """Inject a fault into the lab directory's own twin; the event it logged."""
        self.check(lab)
        return self.backend.fault(lab, fault)

    def observer(self, lab: Lab) -> Observer:
        """A reader of the running twin's state."""
        return self.backend.observer(lab)

    def traffic(self, lab: Lab, phase: Phase) -> Traffic:
        """The prepared flows of one phase."""
        return self.backend.traffic(lab, phase)

    def play(self, lab: Lab, timeline: Timeline, progress: Progress = quiet) -> Played:
        """Play a whole timeline."""
        return self.backend.play(lab, timeline, progress)
