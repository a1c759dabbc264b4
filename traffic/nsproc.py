"""Child processes that work inside a network namespace, and their raw sockets.

Children are forked (so callers need no ``__main__`` guard and start-up is fast) and
enter the namespace with ``setns`` before opening any socket; ``setns`` moves only the
calling thread, which is all a fresh fork has. A namespace is named (``<lab>.<node>``, bound
under /run/netns) or given by path (``/proc/<pid>/ns/net``: a container's, entered by the pid
of its main process). Each child talks to its parent over a pipe with ``(kind, value)``
messages; ``"error"`` carries a traceback.

A child belongs to a lab (the one given, else the one whose namespace ``<lab>.<node>`` it
works in): it carries the lab's tag ``TWIN_LAB=<lab>`` in its environment, so ``twin
cleanup`` finds it, and it is killed when the thread that forked it ends
(``PR_SET_PDEATHSIG``), so a parent killed with SIGKILL leaves no worker behind. Start
children from a thread that outlives them.
"""

import contextlib
import ctypes
import logging
import multiprocessing
import os
import signal
import socket
import time
import traceback
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

TAG = "TWIN_LAB"
"""The environment variable naming the lab a process belongs to (read back by cleanup)."""
_CTX = multiprocessing.get_context("fork")
log = logging.getLogger(__name__)
_SOCKET_BUFFER = 64 << 20
# asm-generic values (x86-64, arm64); Python's socket module lacks these constants.
SO_SNDBUFFORCE = 32
SO_RCVBUFFORCE = 33

ChildTarget = Callable[..., None]
PR_SET_PDEATHSIG = 1
NETNS_DIR = Path("/var/run/netns")
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)
# Fields of /proc/PID/stat (proc(5) numbers them from 1; the list starts at field 3).
_ENV_START, _ENV_END = 50 - 3, 51 - 3


class ChildError(RuntimeError):
    """A namespace child failed; the message holds its traceback."""


def enter_netns(name: str) -> None:
    """Move the calling process into network namespace ``name``, a name or a path such as
    ``/proc/<pid>/ns/net`` (never creates one)."""
    from pyroute2 import netns

    netns.setns(name, flags=0)


def setns(fd: int) -> None:
    """Move this thread into the network namespace open at `fd` (os.setns is 3.12+)."""
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


@contextlib.contextmanager
def inside(netns: str) -> Iterator[None]:
    """Run the block with this thread (only) in network namespace `netns`, a name or a path:
    a socket opened there stays there after the thread comes back, with no process to fork."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(NETNS_DIR / netns, os.O_RDONLY)
    except BaseException:
        os.close(home)
        raise
    try:
        setns(target)
        yield
    finally:
        setns(home)
        os.close(target)
        os.close(home)


def packet_socket(iface: str | None, proto: int, *, receive: bool) -> socket.socket:
    """AF_PACKET raw socket on ``iface`` (all interfaces if None) for EtherType ``proto``.

    ``proto`` 0 receives nothing (send-only). The receive (or send) buffer is raised to
    64 MiB so bursts wait in the kernel instead of being dropped. A socket for one
    interface opens with protocol 0 and binds later, so no other interface's frame
    slips in first.
    """
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0 if iface else proto))
    option = SO_RCVBUFFORCE if receive else SO_SNDBUFFORCE
    sock.setsockopt(socket.SOL_SOCKET, option, _SOCKET_BUFFER)
    if iface is not None:
        sock.bind((iface, proto))
    return sock


def die_with_parent(parent: int) -> None:
    """Have the kernel SIGKILL this process when the thread that forked it ends; exit now if
    the parent is already gone."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    if os.getppid() != parent:
        os._exit(1)


def lab_of(netns: str) -> str | None:
    """The lab a namespace `<lab>.<node>` belongs to (None for other names).

    >>> lab_of("small.server1"), lab_of("twtest-12-a")
    ('small', None)
    """
    lab, dot, _ = netns.partition(".")
    return lab if dot and lab else None


def tag_environ(lab: str) -> bool:
    """Put ``TWIN_LAB=<lab>`` in the environment the kernel shows for this forked process
    (``/proc/self/environ``); False when its environment is too small to hold it.

    A fork shows its parent's environment block, and setting ``os.environ`` does not change
    that block (moving it needs CAP_SYS_RESOURCE). So the child overwrites the tail of its own
    copy of the block: the last variables give way to the tag. C code reading them in this
    child would see them gone; Python read its environment at start-up.
    """
    entry = f"{TAG}={lab}".encode() + b"\0"
    block = Path("/proc/self/environ").read_bytes()
    if entry[:-1] in block.split(b"\0"):
        return True
    stat = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    start, end = int(stat[_ENV_START]), int(stat[_ENV_END])
    if end - start != len(block) or len(block) < len(entry):
        return False
    starts = [0] + [i + 1 for i, byte in enumerate(block[:-1]) if byte == 0]
    at = max(p for p in starts if len(block) - p >= len(entry))
    with open("/proc/self/mem", "r+b", buffering=0) as mem:
        mem.seek(start + at)
        mem.write(entry + b"\0" * (len(block) - at - len(entry)))
    os.environ[TAG] = lab
    return True


def _child_main(
    netns: str,
    lab: str | None,
    parent: int,
    target: ChildTarget,
    conn: Connection,
    args: tuple[Any, ...],
) -> None:
    try:
        die_with_parent(parent)
        lab = lab or lab_of(netns)
        if lab is not None:
            tag_environ(lab)
        enter_netns(netns)
        target(conn, *args)
    except BaseException:
        with contextlib.suppress(OSError):  # the parent may have gone away
            conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()


class NetnsChild:
    """``target(conn, *args)`` running in a forked process inside ``netns`` (a name or a
    path), tagged with ``lab`` (default: the lab the namespace's name gives)."""

    def __init__(
        self, netns: str, target: ChildTarget, args: tuple[Any, ...], lab: str | None = None
    ) -> None:
        self.conn, child_conn = _CTX.Pipe()
        self.process = _CTX.Process(
            target=_child_main,
            args=(netns, lab, os.getpid(), target, child_conn, args),
            daemon=True,
        )
        self.started = time.monotonic()
        self.what = f"{getattr(target, '__name__', 'child')} in {netns}"
        self.process.start()
        child_conn.close()
        took = (time.monotonic() - self.started) * 1000
        log.debug("%s: forked, pid %s, in %.1f ms", self.what, self.process.pid, took)

    def send(self, kind: str, value: object = None) -> None:
        """Message the child."""
        self.conn.send((kind, value))

    def expect(self, kind: str, timeout_s: float | None = None) -> Any:
        """Wait for the child's ``kind`` message and return its value.

        Raises :class:`ChildError` when the child reports an error or dies, and
        ``TimeoutError`` after ``timeout_s`` (None waits as long as the child lives).
        """
        waited = 0.0
        while not self.conn.poll(0.2):
            waited += 0.2
            if not self.process.is_alive() and not self.conn.poll():
                raise ChildError(f"child exited with code {self.process.exitcode}")
            if timeout_s is not None and waited >= timeout_s:
                raise TimeoutError(f"no {kind!r} from child pid {self.process.pid}")
        try:
            got, value = self.conn.recv()
        except EOFError as exc:
            raise ChildError(f"child exited with code {self.process.exitcode}") from exc
        if got == "error":
            raise ChildError(value)
        if got != kind:
            raise ChildError(f"expected {kind!r} from child, got {got!r}")
        return value

    def close(self, timeout_s: float = 5.0) -> None:
        """Hang up, wait ``timeout_s`` for the child to exit, else terminate it by its pid."""
        self.conn.close()
        self.process.join(timeout_s)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join()
        lived = time.monotonic() - self.started
        log.debug("%s: exit %s after %.3f s", self.what, self.process.exitcode, lived)
