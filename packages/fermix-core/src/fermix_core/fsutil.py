"""File-system helpers shared by every writer of durable files (config, auth.json, seeds)."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path


def atomic_write(path: Path | str, data: str | bytes, *, mode: int = 0o600) -> None:
    """Replace *path* with *data* so that readers see the old file or the new one, never half.

    The data goes to a temporary file in the same directory (same file system, so the
    rename is atomic), is flushed and fsynced, gets *mode* before it becomes visible, and
    is renamed over the target. On any failure the temporary file is removed and the
    original is left exactly as it was.
    """
    import tempfile  # here: it brings shutil, random, bz2 and lzma to a process that may
    # write nothing (a one-off ask whose caches are current)

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(target.parent)


def _fsync_dir(directory: Path) -> None:
    """Persist the rename itself; best effort where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- no-follow I/O
#
# The sandbox decides on a canonical path (every symlink resolved); the tool then opens it.
# If another process swaps a directory on that path for a link in between (``ws/d`` ->
# ``~/.ssh``), opening the path by name would follow the link. These helpers walk the path
# one component at a time from ``/`` on directory descriptors with ``O_NOFOLLOW``, so a
# link anywhere on it — which a canonical path cannot contain — fails the open instead.

_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
_DIR_FLAGS |= getattr(os, "O_CLOEXEC", 0)


class PathSwapped(OSError):
    """A component of a canonical path is no longer a plain directory (a link or a file
    was put in its place after the sandbox checked it)."""


def _components(path: Path) -> list[str]:
    parts = Path(os.path.abspath(path)).parts
    return [part for part in parts[1:] if part not in ("", ".")]


def open_dir_nofollow(path: Path | str, *, create: bool = False, mode: int = 0o755) -> int:
    """A descriptor for directory *path*, reached without following any symlink
    (``create``: missing components are made, each one inside the verified parent).
    Raises :class:`PathSwapped` for a link on the way, ``NotADirectoryError`` for a file."""
    fd = os.open("/", _DIR_FLAGS)
    try:
        for part in _components(Path(path)):
            try:
                child = _open_child_dir(part, fd, path)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, mode, dir_fd=fd)
                child = _open_child_dir(part, fd, path)
            os.close(fd)
            fd = child
        return fd
    except BaseException:
        os.close(fd)
        raise


def _open_child_dir(part: str, fd: int, path: Path | str) -> int:
    try:
        return os.open(part, _DIR_FLAGS, dir_fd=fd)
    except (FileNotFoundError, PermissionError):
        raise
    except OSError as exc:
        try:
            info = os.stat(part, dir_fd=fd, follow_symlinks=False)
        except OSError:
            raise exc from None
        if stat.S_ISLNK(info.st_mode):
            raise PathSwapped(
                exc.errno, f"{path}: {part!r} is a link, not a plain directory", str(path)
            ) from None
        raise NotADirectoryError(errno.ENOTDIR, f"{part!r} is not a directory", str(path)) from None


def open_nofollow(path: Path | str, flags: int, mode: int = 0o600) -> int:
    """``os.open(path, flags | O_NOFOLLOW)`` with every directory on the way reached
    without following links (see :func:`open_dir_nofollow`)."""
    target = Path(os.path.abspath(path))
    parent = open_dir_nofollow(target.parent)
    try:
        return os.open(
            target.name, flags | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC, mode, dir_fd=parent
        )
    finally:
        os.close(parent)


def atomic_write_nofollow(path: Path | str, data: str | bytes, *, mode: int = 0o600) -> None:
    """:func:`atomic_write` for paths the agent chose: the directory is resolved without
    following links (missing ones are created inside it), and the temporary file is made
    and renamed inside that directory's descriptor, so a directory swapped for a link
    after the sandbox's check cannot redirect the write."""
    target = Path(os.path.abspath(path))
    payload = data.encode("utf-8") if isinstance(data, str) else data
    parent = open_dir_nofollow(target.parent, create=True)
    try:
        tmp = f".{target.name}.{os.urandom(6).hex()}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC
        fd = os.open(tmp, flags, 0o600, dir_fd=parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(payload)
                handle.flush()
                os.fchmod(handle.fileno(), mode)
                os.fsync(handle.fileno())
            os.replace(tmp, target.name, src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=parent)
            raise
        with contextlib.suppress(OSError):
            os.fsync(parent)
    finally:
        os.close(parent)
