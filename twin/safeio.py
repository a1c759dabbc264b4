"""Files twin writes as root in directories a user may also write: never through a link.

A path is opened one directory at a time, each relative to the descriptor of the one above
(`dir_fd`), so nothing swapped in after a check is ever followed: a symbolic link is followed
only inside a directory that root (or this user) owns and no one else can write, as the
kernel's `protected_symlinks` does for sticky directories; anywhere else (a lab directory
another user owns or can write, its `runs`, `logs`...) a link is refused in one line. Files
are opened with `O_NOFOLLOW` and `O_NONBLOCK` (a FIFO planted there never blocks) and must be
regular files with one link (a hard link planted to a file elsewhere is refused); a whole
file is written to a new temporary name and renamed over the old one in the same directory.
A new directory (`fresh_dir`) is filled inside a root-only scratch directory reached through
this process's descriptor of it (`/proc/self/fd/N`), so no name another user renames or
replaces meanwhile redirects a write, and is renamed into place by descriptor.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from twin.errors import LabError

DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
FILE = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _trusted(fd: int) -> bool:
    """Whether links in this directory can be followed: only root or this user owns it and
    no one else can write it."""
    st = os.fstat(fd)
    return st.st_uid in (0, os.geteuid()) and not st.st_mode & 0o022


def _refused(path: Path | str, why: str) -> LabError:
    return LabError(f"{path}: {why} (twin writes here and follows no link)")


def open_dir(path: Path, create: bool = False) -> int:
    """A descriptor of directory `path`, reached without following a link in any directory
    another user can write (missing directories made, 0755, when `create`)."""
    parts = Path(os.path.abspath(path)).parts
    fd = os.open("/", DIR)
    try:
        for name in parts[1:]:
            flags = DIR if _trusted(fd) else DIR | os.O_NOFOLLOW
            try:
                here = os.open(name, flags, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o755, dir_fd=fd)
                here = os.open(name, DIR | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _refused(path, f"{name} is a link or not a directory") from None
                raise
            os.close(fd)
            fd = here
    except BaseException:
        os.close(fd)
        raise
    return fd


def _checked(fd: int, path: Path) -> int:
    """`fd` if it is a regular file with one link, else closed and refused."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        raise _refused(path, "not a regular file of its own")
    return fd


def _open_in(directory: int, name: str, flags: int, path: Path) -> int:
    try:
        return _checked(os.open(name, flags | FILE, 0o644, dir_fd=directory), path)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
            raise _refused(path, "a link or not a regular file") from None
        raise


def mkdir(path: Path) -> None:
    """Make directory `path` and those above it that are missing."""
    os.close(open_dir(path, create=True))


def write(path: Path, data: str | bytes) -> None:
    """Write a whole file (a new file renamed over the old one)."""
    with create(path) as file:
        file.write(data.encode() if isinstance(data, str) else data)


@contextlib.contextmanager
def create(path: Path) -> Iterator[BinaryIO]:
    """A new file to write, renamed to `path` when the block ends without error."""
    directory = open_dir(path.parent, create=True)
    tmp = f".{path.name}.{os.getpid()}.tmp"
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=directory)
        fd = _open_in(directory, tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, path)
        try:
            with os.fdopen(fd, "wb") as file:
                yield file
            os.replace(tmp, path.name, src_dir_fd=directory, dst_dir_fd=directory)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=directory)
            raise
    finally:
        os.close(directory)


def writing(path: Path) -> BinaryIO:
    """A file open for writing from its start (made when missing, emptied after it was
    checked); the caller closes it."""
    directory = open_dir(path.parent, create=True)
    try:
        fd = _open_in(directory, path.name, os.O_WRONLY | os.O_CREAT, path)
    finally:
        os.close(directory)
    os.ftruncate(fd, 0)
    return os.fdopen(fd, "wb")


def _clear(directory: int) -> None:
    """Remove what a directory holds (links removed, never followed)."""
    for name in os.listdir(directory):
        try:
            shutil.rmtree(name, dir_fd=directory)
        except NotADirectoryError:
            os.unlink(name, dir_fd=directory)
        except OSError:  # a link: rmtree refuses it
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=directory)


@contextlib.contextmanager
def fresh_dir(out: Path, replace: bool = False) -> Iterator[Path]:
    """A new directory to fill, renamed to `out` when the block ends without error (an empty
    directory `out` is replaced, a full one only when `replace`), removed when it fails.

    It is made inside a scratch directory beside `out` that only root can enter, and the path
    yielded reaches it through this process's descriptor of the scratch directory, so what
    another user does meanwhile to names in `out`'s parent never redirects a write into it.
    """
    parent = open_dir(out.parent, create=True)
    scratch_name = f".{out.name}.{secrets.token_hex(4)}"
    try:
        os.mkdir(scratch_name, 0o700, dir_fd=parent)
        scratch = os.open(scratch_name, DIR | os.O_NOFOLLOW, dir_fd=parent)
        try:
            os.mkdir("new", 0o700, dir_fd=scratch)
            yield Path(f"/proc/self/fd/{scratch}/new")
            try:
                if replace:
                    os.rename(out.name, "old", src_dir_fd=parent, dst_dir_fd=scratch)
                else:
                    os.rmdir(out.name, dir_fd=parent)
            except FileNotFoundError:
                pass
            except OSError as exc:
                if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
                    raise _refused(out, "exists and is not an empty directory") from None
                raise
            os.rename("new", out.name, src_dir_fd=scratch, dst_dir_fd=parent)
        finally:
            _clear(scratch)
            os.close(scratch)
            with contextlib.suppress(OSError):
                os.rmdir(scratch_name, dir_fd=parent)
    finally:
        os.close(parent)


def append(path: Path, data: str) -> None:
    """Append to a file (made when missing)."""
    with appending(path) as file:
        file.write(data.encode())


def appending(path: Path) -> BinaryIO:
    """A file open for appending (made when missing); the caller closes it."""
    directory = open_dir(path.parent, create=True)
    try:
        fd = _open_in(directory, path.name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, path)
    finally:
        os.close(directory)
    return os.fdopen(fd, "ab")


def remove(path: Path) -> None:
    """Remove a file, if it is there (a link is removed, never followed)."""
    try:
        directory = open_dir(path.parent)
    except FileNotFoundError:
        return
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path.name, dir_fd=directory)
    finally:
        os.close(directory)


def read(path: Path, limit: int) -> bytes | None:
    """A regular file's bytes (None when it is missing); refused when it is larger than
    `limit` or not a regular file."""
    try:
        directory = open_dir(path.parent)
    except FileNotFoundError:
        return None
    try:
        fd = _open_in(directory, path.name, os.O_RDONLY, path)
    except FileNotFoundError:
        return None
    finally:
        os.close(directory)
    with os.fdopen(fd, "rb") as file:
        data = file.read(limit + 1)
    if len(data) > limit:
        raise LabError(f"{path}: larger than {limit} bytes (not a file twin wrote)")
    return data
