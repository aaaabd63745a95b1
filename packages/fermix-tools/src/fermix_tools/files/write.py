"""``file_write`` and ``file_edit``: atomic changes to text files inside the sandbox roots.

Both go through :func:`fermix_core.fsutil.atomic_write_nofollow`, so a crash, a full disk
or a cancelled turn leaves the old file or the new one, never a half-written mix, and a
directory swapped for a link after the sandbox's check cannot redirect the write. Refusing to
overwrite by default, and refusing an ambiguous edit, both exist because a model that
guesses wrong about a file's contents should get an error it can act on rather than
silently destroy work.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import anyio
from fermix_core.fsutil import PathSwapped, atomic_write_nofollow
from fermix_core.tool import Tool, ToolContext, ToolError, ToolOutput
from pydantic import BaseModel, ConfigDict, Field

from fermix_tools.files.common import (
    binary_error,
    human_size,
    open_regular,
    sandbox,
    swapped_error,
)

#: Largest content one file_write accepts, and the largest file file_edit rewrites.
MAX_WRITE_CHARS = 5_000_000
MAX_EDIT_BYTES = 10 * 1024 * 1024
#: Mode of a newly created file (an existing file keeps its own).
NEW_FILE_MODE = 0o644
_SNIPPET_CONTEXT = 2
_MAX_LOCATIONS = 5


class FileWriteArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(
        min_length=1,
        max_length=4096,
        description="File to write: absolute, or relative to the current directory.",
    )
    content: str = Field(max_length=MAX_WRITE_CHARS, description="The complete new content.")
    overwrite: bool = Field(
        default=False,
        description="Replace the file if it already exists (otherwise that is an error).",
    )


class FileEditArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(min_length=1, max_length=4096, description="File to edit.")
    old: str = Field(
        min_length=1,
        max_length=MAX_WRITE_CHARS,
        description="Exact text to replace, including whitespace and indentation.",
    )
    new: str = Field(max_length=MAX_WRITE_CHARS, description="Replacement text.")
    count: int = Field(
        default=1,
        ge=1,
        le=10_000,
        description="How many occurrences of old the file must contain; all are replaced.",
    )


class FileWrite(Tool[FileWriteArgs]):
    async def run(self, args: FileWriteArgs, ctx: ToolContext) -> ToolOutput:
        path = sandbox(ctx).resolve(args.path, ctx, write=True)
        payload = args.content.encode("utf-8")
        created = await anyio.to_thread.run_sync(_write, path, payload, args.overwrite)
        verb = "Created" if created else "Replaced"
        lines = args.content.count("\n") + (0 if args.content.endswith("\n") else 1)
        lines = lines if args.content else 0
        return ToolOutput(
            content=f"{verb} {path} ({human_size(len(payload))}, {lines} lines).",
            data={"path": str(path), "bytes": len(payload), "created": created},
        )


def _write(path: Path, payload: bytes, overwrite: bool) -> bool:
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        info = None
    except OSError as exc:
        raise ToolError(f"cannot write {path}: {exc.strerror or exc}") from None
    if info is not None:
        if stat.S_ISDIR(info.st_mode):
            raise ToolError(f"{path} is a directory; choose a file path inside it")
        if not stat.S_ISREG(info.st_mode):
            raise ToolError(f"{path} exists and is not a regular file; it is left alone")
        if not overwrite:
            raise ToolError(
                f"{path} already exists ({human_size(info.st_size)}). Pass overwrite=true "
                "to replace it, or use file_edit to change part of it."
            )
    mode = stat.S_IMODE(info.st_mode) if info is not None else NEW_FILE_MODE
    try:
        atomic_write_nofollow(path, payload, mode=mode)
    except PathSwapped:
        raise swapped_error(path) from None
    except (FileExistsError, NotADirectoryError):
        raise ToolError(
            f"cannot create {path}: a parent path exists and is not a directory"
        ) from None
    except PermissionError:
        raise ToolError(f"cannot write {path}: permission denied by the OS") from None
    except OSError as exc:
        raise ToolError(f"cannot write {path}: {exc.strerror or exc}") from None
    return info is None


class FileEdit(Tool[FileEditArgs]):
    async def run(self, args: FileEditArgs, ctx: ToolContext) -> ToolOutput:
        if args.old == args.new:
            raise ToolError("old and new are identical; there is nothing to change")
        path = sandbox(ctx).resolve(args.path, ctx, write=True)
        return await anyio.to_thread.run_sync(_edit, path, args.old, args.new, args.count)


def _edit(path: Path, old: str, new: str, count: int) -> ToolOutput:
    fd, info = open_regular(path)
    with os.fdopen(fd, "rb") as handle:
        if info.st_size > MAX_EDIT_BYTES:
            raise ToolError(
                f"{path} is {human_size(info.st_size)}; file_edit rewrites files up to "
                f"{human_size(MAX_EDIT_BYTES)}. Use shell tools for files this large."
            )
        raw = handle.read(MAX_EDIT_BYTES + 1)
    if b"\0" in raw:
        raise binary_error(path, info.st_size, "it contains NUL bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise binary_error(path, info.st_size, "it is not valid UTF-8") from None
    found = text.count(old)
    if found == 0:
        raise ToolError(_not_found(path, text, old))
    if found != count:
        where = ", ".join(str(n) for n in _line_numbers(text, old)[:_MAX_LOCATIONS])
        raise ToolError(
            f"old occurs {found} times in {path} (at lines {where}{', …' if found > 5 else ''})"
            f" but count={count}. Include more surrounding text so old matches exactly the "
            f"place you mean, or set count={found} to replace every occurrence."
        )
    first = text.index(old)
    updated = text.replace(old, new, count)
    after = os.stat(path)
    if (after.st_mtime_ns, after.st_size) != (info.st_mtime_ns, info.st_size):
        raise ToolError(f"{path} changed while it was being edited; read it again and retry")
    try:
        atomic_write_nofollow(path, updated.encode("utf-8"), mode=stat.S_IMODE(info.st_mode))
    except PathSwapped:
        raise swapped_error(path) from None
    except OSError as exc:
        raise ToolError(f"cannot write {path}: {exc.strerror or exc}") from None
    line = text.count("\n", 0, first) + 1
    noun = "occurrence" if count == 1 else "occurrences"
    summary = f"Replaced {count} {noun} in {path} (first at line {line})."
    return ToolOutput(
        content=f"{summary}\n{_snippet(updated, line, new)}",
        data={"path": str(path), "replaced": count, "first_line": line},
    )


def _not_found(path: Path, text: str, old: str) -> str:
    message = f"old was not found in {path}."
    if "\r\n" in text and "\n" in old and "\r\n" not in old:
        return (
            f"{message} The file uses Windows line endings (CRLF); include \\r\\n in old "
            "or edit one line at a time."
        )
    squeezed = " ".join(old.split())
    if squeezed and squeezed in " ".join(text.split()):
        return (
            f"{message} The same words exist with different whitespace or indentation; "
            "read the file with file_read and copy the text exactly."
        )
    if old.lower() in text.lower():
        return f"{message} It exists with different capitalisation; match the case exactly."
    return f"{message} Read the file with file_read and copy the exact text to replace."


def _line_numbers(text: str, needle: str) -> list[int]:
    numbers: list[int] = []
    start = text.find(needle)
    while start >= 0 and len(numbers) < _MAX_LOCATIONS:
        numbers.append(text.count("\n", 0, start) + 1)
        start = text.find(needle, start + len(needle))
    return numbers


def _snippet(text: str, line: int, new: str) -> str:
    """A few numbered lines around the first change, so the model can check its edit."""
    lines = text.split("\n")
    first = max(line - _SNIPPET_CONTEXT, 1)
    last = min(line + new.count("\n") + _SNIPPET_CONTEXT, len(lines), first + 40)
    return "\n".join(f"{n:>6}\t{lines[n - 1][:200]}" for n in range(first, last + 1))
