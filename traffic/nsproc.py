"""Child processes that work inside a network namespace, and their raw sockets.

Children are forked (so callers need no ``__main__`` guard and start-up is fast) and
enter the namespace with ``setns`` before opening any socket; ``setns`` moves only the
calling thread, which is all a fresh fork has. Each child talks to its parent over a
pipe with ``(kind, value)`` messages; ``"error"`` carries a traceback.
"""

import contextlib
import multiprocessing
import socket
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

_CTX = multiprocessing.get_context("fork")
_SOCKET_BUFFER = 64 << 20
# asm-generic values (x86-64, arm64); Python's socket module lacks these constants.
SO_SNDBUFFORCE = 32
SO_RCVBUFFORCE = 33

ChildTarget = Callable[..., None]


class ChildError(RuntimeError):
    """A namespace child failed; the message holds its traceback."""


def enter_netns(name: str) -> None:
    """Move the calling process into network namespace ``name`` (never creates one)."""
    from pyroute2 import netns

    netns.setns(name, flags=0)


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


def _child_main(netns: str, target: ChildTarget, conn: Connection, args: tuple[Any, ...]) -> None:
    try:
        enter_netns(netns)
        target(conn, *args)
    except BaseException:
        with contextlib.suppress(OSError):  # the parent may have gone away
            conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()


class NetnsChild:
    """``target(conn, *args)`` running in a forked process inside ``netns``."""

    def __init__(self, netns: str, target: ChildTarget, args: tuple[Any, ...]) -> None:
        self.conn, child_conn = _CTX.Pipe()
        self.process = _CTX.Process(
            target=_child_main, args=(netns, target, child_conn, args), daemon=True
        )
        self.process.start()
        child_conn.close()

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
