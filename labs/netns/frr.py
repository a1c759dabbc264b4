"""FRR daemons per switch namespace: zebra, staticd, bgpd and (when configured) bfdd.

Each switch has its own run directory (sockets, pid files, logs), owned by user frr, under
`/run/twin/<lab>/<node>` (unix socket paths must stay short), and its configs in
`/run/twin/<lab>/.conf/<node>`, which only root writes; logs are moved into the lab directory
at destroy. Every daemon carries the lab's
tag in its environment (`TWIN_LAB`, `TWIN_NODE`) so cleanup can find it by that tag.
"""

from __future__ import annotations

import functools
import grp
import os
import shutil
import stat
import subprocess
import time
from pathlib import Path

from labs import cmdlog, lifecycle, processes
from traffic.nsproc import inside
from twin import safeio
from twin.errors import LabError

FRR_BIN = Path("/usr/lib/frr")
# Under a lab's run directory: the switches' configs, written by root only (see `conf_dir`).
CONF_DIR = ".conf"
# Each daemon keeps a crash-log directory `<daemon>.<pid>` here and removes it when it exits
# cleanly; one killed with SIGKILL leaves it behind.
FRR_TMP = Path("/var/tmp/frr")
VTYSH = "vtysh"
BFDCTL = "bfdd.sock"
EVENT_LOG = "frr.log"
# Lines of frr.conf a daemon only honours in the config it reads at startup (vtysh cannot
# change them in a running daemon): each daemon starts from these, then `apply` loads the rest.
STARTUP_ONLY = ("frr defaults ", "hostname ")
# zebra also starts without kernel nexthop objects. FRR 8.4 installs ECMP routes as kernel
# nexthop groups; a link going down makes the kernel drop its nexthop from every group, and
# when the link comes back zebra reuses the group id without re-adding the member, so the
# route stays one path short for good (FRR pull requests 13413 and 14080, after 8.4).
# Plain multipath routes do not have that problem.
ZEBRA_STARTUP = ["no zebra nexthop kernel enable"]
# The daemons' niceness. Each daemon leads a session of its own, and with the kernel's
# autogroups (on by default) a niceness only ranks a process among its own session's: it gives
# the daemons no precedence over other sessions' processes (docs/netns-backend.md).
PRIORITY = -10
# bfdd runs real-time round robin at the lowest real-time priority: its 3 x 300 ms leave less
# than a second between control packets, and on a loaded machine a daemon of its own session
# (niceness or not) waited up to 1.4 s for a CPU, so sessions no fault touched went down
# ("Cease/BFD Down", reason control-expired). bfdd's work per packet and per timer is small,
# and the kernel's real-time throttling keeps 5 % of each CPU for other processes regardless.
REALTIME = ("chrt", "--rr", "1")


def run_dir(lab: str, node: str) -> Path:
    """Sockets and pid files of one switch's daemons."""
    return lab_run_dir(lab) / node


def daemons(frr_conf: str) -> list[str]:
    """The daemons a config needs, in start order: staticd always, as on SONiC (FRR 8 installs
    frr.conf's `ip route` lines through it, and vtysh refuses them without it).

    >>> daemons("router bgp 65000\\n"), daemons("bfd\\n profile x\\nrouter bgp 1\\n")
    (['zebra', 'staticd', 'bgpd'], ['zebra', 'staticd', 'bfdd', 'bgpd'])
    """
    needed = ["zebra", "staticd"]
    if any(line.strip() == "bfd" or " bfd" in line for line in frr_conf.splitlines()):
        needed.append("bfdd")
    needed.append("bgpd")
    return needed


@functools.cache
def realtime() -> bool:
    """Whether this host lets a daemon run real-time (a container without CAP_SYS_NICE, or a
    cgroup without real-time runtime, refuses it)."""
    try:
        done = subprocess.run([*REALTIME, "true"], capture_output=True, check=False)
    except OSError:
        return False
    return done.returncode == 0


def _scheduling(daemon: str) -> list[str]:
    """The command that starts a daemon at its scheduling: bfdd real-time where allowed, the
    others (and bfdd where not) at niceness `PRIORITY`."""
    if daemon == "bfdd" and realtime():
        return list(REALTIME)
    # nice adds to the caller's niceness (a test suite run at niceness 15 would give 5)
    return ["nice", "-n", str(PRIORITY - os.getpriority(os.PRIO_PROCESS, 0))]


def check_installed() -> None:
    """Refuse to deploy without FRR."""
    missing = [d for d in ("zebra", "staticd", "bgpd", "bfdd") if not (FRR_BIN / d).exists()]
    if missing or shutil.which(VTYSH) is None:
        raise LabError(
            "FRR is not installed (apt-get install frr): " + ", ".join(missing or [VTYSH])
        )


def _startup_conf(conf: str, rundir: Path, daemon: str) -> str:
    """What a daemon reads at startup: frr.conf's startup-only lines, the event log (one log
    of all daemons with millisecond timestamps, for the monitor) and zebra's own settings."""
    lines = [line for line in conf.splitlines() if line.startswith(STARTUP_ONLY)]
    lines += [f"log file {rundir / EVENT_LOG}", "log timestamp precision 3"]
    if daemon == "zebra":
        lines += ZEBRA_STARTUP
    return "".join(f"{line}\n" for line in lines)


def conf_dir(lab: str, node: str) -> Path:
    """The configs a switch's daemons read: written by root in a directory that group frr can
    read but not write, and no one else can read (root never writes into the run directory
    frr owns)."""
    return lab_run_dir(lab) / CONF_DIR / node


def _conf_files(lab: str, node: str, source: Path) -> tuple[Path, str]:
    """Copy the switch's `frr.conf` into its root-owned config directory; returns the copy
    and its text."""
    confs = conf_dir(lab, node)
    safeio.mkdir(confs)
    for directory in (confs.parent, confs):
        os.chown(directory, 0, _frr_group())
        directory.chmod(0o750)
    conf = confs / "frr.conf"
    text = source.read_text()
    _write_readable(conf, text)
    return conf, text


def _frr_group() -> int:
    return grp.getgrnam("frr").gr_gid


def _write_readable(path: Path, text: str) -> None:
    """Write a config the daemons read: root's, readable by group frr only (0640), as the lab
    directory it comes from is not readable by others."""
    with safeio.create(path) as file:
        os.fchown(file.fileno(), 0, _frr_group())
        os.fchmod(file.fileno(), 0o640)
        file.write(text.encode())


def start(
    lab: str, node: str, netns: str, source: Path, only: list[str] | None = None
) -> dict[str, int]:
    """Start the switch's daemons (or those in `only`) in its namespace from a copy of its
    `frr.conf`.

    The daemons run as user frr, bfdd real-time and the others at niceness `PRIORITY` (every
    thread: set before exec; `_scheduling`), so
    their sockets, pid files and logs live in the run
    directory, which frr owns; their configs are in `conf_dir`, which only root writes.
    `save_logs` moves the logs into the lab directory at destroy. They are spawned from this
    thread while it is inside the namespace, so they are born there.
    """
    rundir = run_dir(lab, node)
    rundir.mkdir(parents=True, exist_ok=True)
    shutil.chown(rundir, "frr", "frr")
    rundir.chmod(0o750)  # its sockets steer the switch: frr's and root's only
    conf, text = _conf_files(lab, node, source)
    env = {
        "PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
        "TWIN_LAB": lab,
        "TWIN_NODE": node,
    }
    pids = {}
    zserv = rundir / "zserv.api"
    for daemon in daemons(text):
        if only is not None and daemon not in only:
            continue
        boot = conf.with_name(f"{daemon}.startup.conf")
        _write_readable(boot, _startup_conf(text, rundir, daemon))
        (rundir / f"{daemon}.vty").unlink(missing_ok=True)
        if daemon == "zebra":
            zserv.unlink(missing_ok=True)
        args = [
            *_scheduling(daemon),
            str(FRR_BIN / daemon),
            "-f",
            str(boot),
            "-i",
            str(rundir / f"{daemon}.pid"),
            "--vty_socket",
            str(rundir),
            "-z",
            str(zserv),
            "--log",
            "stdout",  # into the output log twin opened (a `file:` one is opened as root)
        ]
        if daemon == "bfdd":
            args += ["--bfdctl", str(rundir / BFDCTL)]
        out = safeio.appending(rundir / f"{daemon}.out.log")
        try:
            with inside(netns):
                proc = cmdlog.start(
                    args,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                    umask=0o007,  # sockets (bfdd.sock too) for user and group frr only
                )
        finally:
            out.close()
        pids[daemon] = proc.pid
        if daemon == "zebra":
            _wait_for(zserv, proc, node)
    return pids


def _wait_for(zserv: Path, zebra: subprocess.Popen[bytes], node: str, timeout: float = 10) -> None:
    """Wait until zebra listens: a client daemon that finds no socket retries only ~10 s
    later (bfdd would then miss the BFD sessions bgpd asks for)."""
    deadline = time.monotonic() + timeout
    while not zserv.exists():
        if zebra.poll() is not None or time.monotonic() > deadline:
            raise LabError(f"{node}: zebra did not start (logs in {zserv.parent})")
        time.sleep(0.005)


def _restrict(sock: Path) -> None:
    """Make a daemon's socket user and group frr's only (bfdd makes its control socket, which
    can take BFD sessions and the BGP sessions on them down, for everyone): the socket itself
    as found, never what a link there points to."""
    fd = os.open(sock, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if stat.S_ISSOCK(os.fstat(fd).st_mode):
            os.chmod(f"/proc/self/fd/{fd}", 0o660)
    finally:
        os.close(fd)


def apply(lab: str, node: str, timeout: float = 10) -> None:
    """Load the switch's `frr.conf` into its running daemons, as FRR's integrated config is
    loaded at boot (`vtysh -b`): vtysh sends each section to the daemon that owns it."""
    rundir = run_dir(lab, node)
    path = conf_dir(lab, node) / "frr.conf"
    conf = path.read_text()
    deadline = time.monotonic() + timeout
    sockets = [rundir / f"{d}.vty" for d in daemons(conf)]
    sockets += [rundir / BFDCTL] if "bfdd" in daemons(conf) else []
    while not all(s.exists() for s in sockets):
        if time.monotonic() > deadline:
            raise LabError(f"{node}: FRR daemons did not start (logs in {rundir})")
        time.sleep(0.02)
    if "bfdd" in daemons(conf):
        _restrict(rundir / BFDCTL)
    args = [VTYSH, "--vty_socket", str(rundir), "-f", str(path)]
    done = cmdlog.run(args, timeout=timeout)
    if done.returncode != 0:
        raise LabError(f"{node}: frr.conf was refused: {(done.stdout + done.stderr).strip()[:300]}")


def vtysh(lab: str, node: str, *commands: str, timeout: float = 10) -> str:
    """Run vtysh commands against one switch's daemons; returns their output."""
    args = [VTYSH, "--vty_socket", str(run_dir(lab, node))]
    for command in commands:
        args += ["-c", command]
    done = cmdlog.run(args, timeout=timeout)
    if done.returncode != 0:
        raise LabError(
            f"{node}: vtysh {' / '.join(commands)}: {done.stderr.strip() or done.stdout.strip()}"
        )
    return done.stdout


def save_logs(lab: str, dest: Path) -> None:
    """Move every switch's daemon logs into `dest/<node>/`: regular files only (the run
    directories are frr's, so anything else there was planted)."""
    for rundir in sorted(lab_run_dir(lab).glob("*")):
        if rundir.name == CONF_DIR or rundir.is_symlink() or not rundir.is_dir():
            continue
        for log in rundir.glob("*.log"):
            _move_log(log, dest / rundir.name)


def _move_log(log: Path, dest: Path) -> None:
    """Copy a log into `dest` and remove it, if it is a regular file when opened: the check
    and the read are one (opened without following a link), so a file frr swaps for a link
    after it was listed is never read through."""
    try:
        fd = os.open(log, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return
    with os.fdopen(fd, "rb") as source:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        with safeio.create(dest / log.name) as copy:  # never through a link in the lab
            shutil.copyfileobj(source, copy)
    log.unlink(missing_ok=True)


def read_log(path: Path, offset: int) -> tuple[list[str], int]:
    """The lines a daemon log in frr's run directory gained since `offset`, and the new
    offset: nothing when it is not a regular file (a link or a FIFO frr planted is not read
    through, nor waited on)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return [], offset
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return [], offset
    with os.fdopen(fd, errors="replace") as log:
        log.seek(offset)
        lines = log.readlines()
        return lines, log.tell()


def remove_tmp(pids: list[int]) -> None:
    """Remove the crash-log directories of ended daemons (those a SIGKILL left behind)."""
    for pid in pids:
        if processes.alive(pid):
            continue
        for leftover in FRR_TMP.glob(f"*.{pid}"):
            shutil.rmtree(leftover, ignore_errors=True)


def lab_run_dir(lab: str) -> Path:
    """The lab's own run directory (`labs.lifecycle.run_dir`)."""
    return lifecycle.run_dir(lab)


def remove_run_dir(lab: str) -> None:
    """Remove the lab's run directory (a directory, never a symlink's target)."""
    path = lab_run_dir(lab)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
