"""Helpers every file, search and exec tool shares: the sandbox lookup, roots and messages.

Paths in tool output are always the canonical absolute path the sandbox resolved. A path
relative to the run's cwd would be shorter, but it is only meaningful while the model keeps
the same cwd in mind, and an absolute path can be passed back to any tool unchanged.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

from fermix_core.tool import ToolContext, ToolError

#: Bytes sniffed at the start of a file to decide whether it is text.
SNIFF_BYTES = 8192
#: Version-control internals: huge, binary-ish and never what a search is looking for.
VCS_DIRS = frozenset({".git", ".hg", ".svn"})


def sandbox(ctx: ToolContext) -> Any:
    """The run's :class:`~fermix_core.sandbox.SandboxPolicy` (a clear error when absent)."""
    return ctx.service("sandbox")


def human_size(size: int) -> str:
    """``1536`` → ``"1.5 KB"``: error messages are read by a model and shown to people."""
    value = float(size)
    for unit in ("bytes", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{size} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def working_dir(policy: Any, ctx: ToolContext, given: str | None, *, what: str = "root") -> Path:
    """The directory a search or command runs in: *given*, else the cwd, else the workspace.

    A run's cwd is not always inside the sandbox (a remote turn in ``strict`` mode, say);
    falling back to the workspace keeps the no-argument call useful instead of failing on
    a directory the model never asked for.
    """
    if given:
        path = policy.resolve(given, ctx)
    else:
        try:
            path = policy.resolve(ctx.cwd, ctx)
        except ToolError:
            path = policy.resolve(policy.workspace, ctx)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ToolError(
            f"{what} {path} does not exist; pass an existing directory inside the sandbox"
        ) from None
    if not stat.S_ISDIR(info.st_mode):
        raise ToolError(f"{what} {path} is not a directory; pass the directory that contains it")
    return path


def binary_error(path: Path, size: int, why: str) -> ToolError:
    """The refusal for non-text content: what the file is and how big, and what to do."""
    return ToolError(
        f"{path} is not a text file ({why}; {human_size(size)}). file_read and file_edit "
        "only handle UTF-8 text; send it with send_attachment or inspect it another way."
    )


def open_regular(path: Path, *, what: str = "file") -> tuple[int, os.stat_result]:
    """Open *path* read-only without following a final symlink; refuse non-regular files.

    The sandbox resolved *path* to its canonical form a moment ago, so a symlink on it — the
    file itself or any directory above it — means it was swapped in since: every
    component is opened with ``O_NOFOLLOW`` on its parent's descriptor, and a link fails
    the open. ``O_NONBLOCK`` keeps a FIFO from hanging the open; such files are then
    refused by type.
    """
    from fermix_core.fsutil import PathSwapped, open_nofollow

    flags = os.O_RDONLY | os.O_NONBLOCK
    try:
        fd = open_nofollow(path, flags)
    except PathSwapped:
        raise swapped_error(path) from None
    except FileNotFoundError:
        raise ToolError(
            f"{path} does not exist; check the path (glob_search can find files by name)"
        ) from None
    except IsADirectoryError:
        raise _directory_error(path) from None
    except PermissionError:
        raise ToolError(f"{path} is not readable (permission denied by the OS)") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise swapped_error(path) from None
        raise ToolError(f"cannot open {path}: {exc.strerror or exc}") from None
    info = os.fstat(fd)
    if stat.S_ISREG(info.st_mode):
        os.set_blocking(fd, True)
        return fd, info
    os.close(fd)
    if stat.S_ISDIR(info.st_mode):
        raise _directory_error(path)
    raise ToolError(f"{path} is not a regular {what} (a device, socket or pipe); it is refused")


def swapped_error(path: Path) -> ToolError:
    return ToolError(
        f"{path} changed while it was being opened (a file or directory on the path was "
        "replaced by a link since the sandbox checked it); nothing was read or written. "
        "Check the folder and retry."
    )


def _directory_error(path: Path) -> ToolError:
    return ToolError(f"{path} is a directory; use glob_search with root={str(path)!r} to list it")
