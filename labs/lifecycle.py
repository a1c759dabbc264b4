"""What every backend's verbs share around a running twin: who deployed it, and one command
at a time per lab.

A twin is known on this machine by its lab's name: its run directory `/run/twin/<lab>` holds
the record of the deploy that made it (`.owner`: the lab directory and the deploying process).
Two lab directories may carry the same lab name (a copy of one, a fabric generated twice), so
a verb that acts on a running twin (deploy, destroy, fault, exec, run, cleanup) acts only from
the lab directory that deployed it, unless told to (`--force-owner`); the refusal names both.

One command at a time changes a lab: deploy, run, destroy and cleanup hold the lab's lock (an
`flock` on `/run/twin/.lock.<lab>`, released by the kernel when the holder dies); a second
command of the same lab is refused in one line instead of destroying the twin under the first.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from labs import processes, state
from twin.errors import LabError, TwinError
from twin.intent.fabric import is_lab_name

RUN_ROOT = Path("/run/twin")
OWNER = ".owner"
LOCK = ".lock."
MAX_OWNER_BYTES = 4096


def run_dir(lab: str) -> Path:
    """The lab's own run directory; a name that breaks the lab-name rule is refused, so the
    path is always one entry directly under the run root."""
    if not is_lab_name(lab):
        raise ValueError(f"{lab!r} is not a lab name")
    return RUN_ROOT / lab


def make_root() -> None:
    """The run root, root's and readable by all (it is never removed: removing it while
    another lab claims its run directory in it would fail that claim)."""
    RUN_ROOT.mkdir(mode=0o755, parents=True, exist_ok=True)


@dataclass(frozen=True)
class Owner:
    """Who made a lab's run directory: its lab directory and the deploying process."""

    lab_dir: str
    pid: int
    start: int | None
    transient: bool = False  # the deploying command destroys the twin when it ends


def claim(lab: str, lab_dir: Path) -> None:
    """Make the lab's run directory, with the record of this deploy in it, in one step (so a
    run directory is never seen without its record)."""
    final = run_dir(lab)
    make_root()
    tmp = Path(tempfile.mkdtemp(prefix=f".{lab}.", dir=final.parent))
    tmp.chmod(0o755)
    me = os.getpid()
    record = Owner(str(lab_dir.resolve()), me, processes.start_time(me), _transient[0])
    (tmp / OWNER).write_text(json.dumps(asdict(record)))
    try:
        tmp.rename(final)
    except OSError as exc:
        (tmp / OWNER).unlink()
        tmp.rmdir()
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
            raise LabError(f"lab {lab}: another deploy of it claimed {final} first") from None
        raise


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
        return Owner(str(data["lab_dir"]), int(data["pid"]), start, data.get("transient") is True)
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
    state says running and its processes live), `unknown` (processes of it live, but no record
    or state file says what they are: its lab directory moved, say) or `left over` (nothing
    of it lives, or its state says its deploy died)."""
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
    return "running" if st.status == "running" and alive else "left over"


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


def _lock_dir() -> Path:
    """Where labs' locks are: the run root (root), else a directory of this user's own (its
    twins, fake or sim, are only records in lab directories)."""
    if os.geteuid() == 0:
        make_root()
        return RUN_ROOT
    own = Path(tempfile.gettempdir()) / f"twin-{os.geteuid()}"
    own.mkdir(mode=0o700, exist_ok=True)
    return own


_held: dict[str, int] = {}
"""Locks this process holds: lab -> descriptor of its lock file."""


@contextlib.contextmanager
def locked(lab: str, verb: str) -> Iterator[None]:
    """Hold the lab's lock while inside (again inside: already held); another holder is
    refused in one line."""
    if lab in _held:
        yield
        return
    path = _lock_dir() / (LOCK + lab)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LabError(
                f"lab {lab} is busy: another twin command is acting on it; {verb} refused"
            ) from None
        try:
            now = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            now = None
        held = os.fstat(fd)
        if now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
            break
        os.close(fd)  # its holder removed it as we opened it: take the new one
    _held[lab] = fd
    try:
        yield
    finally:
        del _held[lab]
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        os.close(fd)
