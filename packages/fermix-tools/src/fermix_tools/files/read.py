"""``file_read``: a window of a UTF-8 text file, with line numbers, or a raw byte range.

The file is streamed, never loaded whole: a model asking for lines 1-200 of a 4 GB log
costs 200 lines of I/O, and an unterminated multi-gigabyte "line" costs one bounded read.
Whatever is cut — lines past the window, the tail of an over-long line, the rest of the
file — is said out loud with the exact arguments that read it, because a model that does
not know output was cut will confidently reason about text it never saw.
"""

from __future__ import annotations

import codecs
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Literal

import anyio
from fermix_core.tool import Tool, ToolContext, ToolError, ToolOutput
from pydantic import BaseModel, ConfigDict, Field

from fermix_tools.files.common import SNIFF_BYTES, binary_error, open_regular, sandbox

#: Default and maximum lines per call.
MAX_LINES = 2000
#: Longest line shown in full; longer ones are cut and reported.
MAX_LINE_CHARS = 2000
#: Raw bytes read per line before the rest of the line is skipped.
MAX_LINE_BYTES = 8192
#: Total characters of line text one call returns.
MAX_OUTPUT_CHARS = 60_000
#: Default and maximum size of a byte range.
MAX_RANGE_BYTES = 65_536
#: Files up to this size get an exact line total in the header.
COUNT_LIMIT_BYTES = 64 * 1024 * 1024
_CHUNK = 1 << 20


class FileReadArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(
        min_length=1,
        max_length=4096,
        description="File to read: absolute, or relative to the current directory.",
    )
    offset: int | None = Field(
        default=None,
        ge=0,
        description=(
            "With unit='lines' (default): first line to return, 1-based. "
            "With unit='bytes': first byte, 0-based."
        ),
    )
    limit: int | None = Field(
        default=None,
        ge=1,
        description=(
            f"How many lines (default and maximum {MAX_LINES}) or, with unit='bytes', "
            f"how many bytes (default and maximum {MAX_RANGE_BYTES})."
        ),
    )
    unit: Literal["lines", "bytes"] = Field(
        default="lines",
        description="'lines' for numbered lines; 'bytes' for a raw range (e.g. a huge line).",
    )


@dataclass
class _Window:
    header: str
    body: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    data: dict[str, object] = field(default_factory=dict)

    def render(self) -> str:
        parts = [self.header, *self.body]
        if self.notes:
            parts.append("")
            parts.extend(f"[{note}]" for note in self.notes)
        return "\n".join(parts)


class FileRead(Tool[FileReadArgs]):
    async def run(self, args: FileReadArgs, ctx: ToolContext) -> ToolOutput:
        path = sandbox(ctx).resolve(args.path, ctx)
        if args.unit == "bytes":
            window = await anyio.to_thread.run_sync(
                _read_bytes, path, args.offset or 0, args.limit or MAX_RANGE_BYTES
            )
        else:
            window = await anyio.to_thread.run_sync(
                _read_lines, path, max(args.offset or 1, 1), args.limit or MAX_LINES
            )
        return ToolOutput(content=window.render(), data={"path": str(path), **window.data})


# --------------------------------------------------------------------------- lines


def _read_lines(path: Path, offset: int, limit: int) -> _Window:
    fd, info = open_regular(path)
    with os.fdopen(fd, "rb") as handle:
        if b"\0" in handle.read(SNIFF_BYTES):
            raise binary_error(path, info.st_size, "it contains NUL bytes")
        if info.st_size == 0:
            return _Window(f"{path} is empty (0 bytes)", data={"total_lines": 0})
        handle.seek(0)
        if not _skip_lines(handle, offset - 1, info.st_size):
            handle.seek(0)
            total = _count_lines(handle, 0, info.st_size)
            raise ToolError(
                f"{path} has {total} lines; offset {offset} is past the end. "
                f"Read from offset=1, or at most offset={max(total, 1)}."
            )
        return _collect(handle, path, info.st_size, offset, limit)


def _skip_lines(handle: BinaryIO, count: int, size: int) -> bool:
    """Position *handle* at the start of line ``count + 1``; false when the file ends first."""
    if count == 0:
        return True
    seen = 0
    while True:
        start = handle.tell()
        chunk = handle.read(_CHUNK)
        if not chunk:
            return False
        index = -1
        while seen < count:
            index = chunk.find(b"\n", index + 1)
            if index < 0:
                break
            seen += 1
        if seen == count:
            handle.seek(start + index + 1)
            # A final newline ends the last line; it does not start another one.
            return start + index + 1 < size


def _collect(handle: BinaryIO, path: Path, size: int, offset: int, limit: int) -> _Window:
    shown: list[str] = []
    cut: list[tuple[int, int]] = []  # (line number, byte offset) of lines cut short
    chars = 0
    number = offset - 1
    budget_hit = False
    limit = min(limit, MAX_LINES)
    while len(shown) < limit:
        start = handle.tell()
        raw = handle.readline(MAX_LINE_BYTES)
        if not raw:
            break
        number += 1
        long_line = not raw.endswith(b"\n") and len(raw) == MAX_LINE_BYTES
        if long_line:
            _skip_rest_of_line(handle)
        text = _decode_line(raw, long_line, path, size)
        if len(text) > MAX_LINE_CHARS:
            text, long_line = text[:MAX_LINE_CHARS], True
        if shown and chars + len(text) > MAX_OUTPUT_CHARS:
            number -= 1
            handle.seek(start)
            budget_hit = True
            break
        if long_line:
            cut.append((number, start))
        chars += len(text)
        shown.append(f"{number:>6}\t{text}")
    last = number
    more = handle.read(1) != b""
    total: int | None = last
    if more:
        handle.seek(-1, os.SEEK_CUR)
        total = _count_lines(handle, last, size) if size <= COUNT_LIMIT_BYTES else None
    of = f"of {total}" if total is not None else f"of more than {last}"
    window = _Window(
        f"{path} — lines {offset}-{last} {of}",
        shown,
        data={"first_line": offset, "last_line": last, "total_lines": total},
    )
    if more:
        why = " (output budget reached)" if budget_hit else ""
        window.notes.append(
            f"more lines follow{why}; call file_read with offset={last + 1} to continue"
        )
    if cut:
        line_no, byte_offset = cut[0]
        window.notes.append(
            f"{len(cut)} line(s) longer than {MAX_LINE_CHARS} characters were cut; read one "
            f"in full with unit='bytes' (line {line_no} starts at offset={byte_offset})"
        )
    return window


def _skip_rest_of_line(handle: BinaryIO) -> None:
    while True:
        chunk = handle.readline(_CHUNK)
        if not chunk or chunk.endswith(b"\n"):
            return


def _decode_line(raw: bytes, partial: bool, path: Path, size: int) -> str:
    if b"\0" in raw:
        raise binary_error(path, size, "it contains NUL bytes")
    try:
        # A cut line may end inside a multi-byte character: decode it as incomplete input.
        text = codecs.getincrementaldecoder("utf-8")().decode(raw, final=not partial)
    except UnicodeDecodeError:
        raise binary_error(path, size, "it is not valid UTF-8") from None
    if text.endswith("\n"):
        text = text[:-1]
        if text.endswith("\r"):
            text = text[:-1]
    return text


def _count_lines(handle: BinaryIO, before: int, size: int) -> int:
    """Lines in the file: *before* already counted, the rest from the current position."""
    count = before
    last = b"\n"
    while chunk := handle.read(_CHUNK):
        count += chunk.count(b"\n")
        last = chunk[-1:]
    return count + (1 if last != b"\n" and size else 0)


# --------------------------------------------------------------------------- bytes


def _read_bytes(path: Path, offset: int, limit: int) -> _Window:
    limit = min(limit, MAX_RANGE_BYTES)
    fd, info = open_regular(path)
    size = info.st_size
    with os.fdopen(fd, "rb") as handle:
        if offset > size or (offset == size and size):
            raise ToolError(
                f"{path} has {size} bytes; offset {offset} is past the end "
                f"(the last byte is at offset {max(size - 1, 0)})"
            )
        handle.seek(offset)
        data = handle.read(limit)
    if b"\0" in data:
        raise binary_error(path, size, "it contains NUL bytes")
    # Align to whole characters: skip continuation bytes at the start, and let the
    # incremental decoder hold back an incomplete character at the end.
    lead = 0
    while lead < min(3, len(data)) and data[lead] & 0xC0 == 0x80:
        lead += 1
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        text = decoder.decode(data[lead:], final=offset + len(data) >= size)
    except UnicodeDecodeError:
        raise binary_error(path, size, "it is not valid UTF-8") from None
    held = len(decoder.getstate()[0])
    first = offset + lead
    end = offset + len(data) - held  # exclusive
    window = _Window(
        f"{path} — bytes {first}-{max(end - 1, first)} of {size}"
        if data
        else f"{path} is empty (0 bytes)",
        [text] if text else [],
        data={"first_byte": first, "end_byte": end, "size": size},
    )
    if lead:
        window.notes.append(f"started {lead} byte(s) later to begin on a whole character")
    if end < size:
        window.notes.append(
            f"{size - end} more bytes; call file_read with unit='bytes', offset={end}"
        )
    return window
