"""Incremental Server-Sent Events parsing that counts what arrived.

Parsing happens as bytes arrive (never after buffering the body), and :class:`StreamStats`
records how many network chunks and events were seen. That count is what lets an adapter
*prove* a failure was pre-response: zero chunks means nothing came back at all.
"""

from __future__ import annotations

import codecs
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One server-sent event: its type, its data lines joined, its id."""

    event: str
    data: str
    id: str | None = None


@dataclass(slots=True)
class StreamStats:
    """Counts of one streamed response, read by the failover rules (was anything seen?)."""

    chunks: int = 0
    bytes: int = 0
    events: int = 0
    #: Set by adapters once something user-visible (text) has been emitted.
    visible: bool = False
    extra: dict = field(default_factory=dict)


async def iter_sse(
    chunks: AsyncIterable[bytes], stats: StreamStats | None = None
) -> AsyncIterator[SSEEvent]:
    """Yield events from a byte stream per the SSE format (``data:``/``event:``/``id:``)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    buffer = ""
    event_type = ""
    data_lines: list[str] = []
    last_id: str | None = None
    async for chunk in chunks:
        if stats is not None:
            stats.chunks += 1
            stats.bytes += len(chunk)
        buffer += decoder.decode(chunk)
        # Walk the buffer with a position and cut it once per chunk: slicing after every
        # line made a large chunk quadratic in its size.
        pos = 0
        while True:
            cut = _line_end(buffer, pos)
            if cut is None:
                break
            line, pos = buffer[pos : cut[0]], cut[1]
            if line == "":
                if data_lines:
                    if stats is not None:
                        stats.events += 1
                    yield SSEEvent(event_type or "message", "\n".join(data_lines), last_id)
                event_type, data_lines = "", []
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if name == "data":
                data_lines.append(value)
            elif name == "event":
                event_type = value
            elif name == "id" and "\0" not in value:
                last_id = value
        buffer = buffer[pos:]
    tail = buffer + decoder.decode(b"", final=True)
    if tail.startswith("data"):
        _, _, value = tail.partition(":")
        data_lines.append(value[1:] if value.startswith(" ") else value)
    if data_lines:
        if stats is not None:
            stats.events += 1
        yield SSEEvent(event_type or "message", "\n".join(data_lines), last_id)


def _line_end(text: str, start: int = 0) -> tuple[int, int] | None:
    """Position of the first line terminator at or after *start* (CRLF, LF or CR) and
    where the next line starts."""
    newline = text.find("\n", start)
    carriage = text.find("\r", start, newline if newline != -1 else len(text))
    if carriage == -1:
        return (newline, newline + 1) if newline != -1 else None
    if carriage + 1 == len(text):
        return None  # a CR at the end may be half of a CRLF still in flight
    return carriage, carriage + (2 if text[carriage + 1] == "\n" else 1)
