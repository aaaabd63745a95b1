"""The control-socket wire: length-prefixed JSON frames with versioned methods.

A frame is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON. Requests
are ``{"v": 1, "id": N, "method": "...", "params": {...}}``; responses carry the same ``id``
and either ``result`` or ``error: {"code", "message"}``. ``hello`` is the handshake: it
returns the protocol version, the daemon's package version, its pid and the methods it
serves, so a newer CLI can tell what an older daemon understands.
"""

from __future__ import annotations

import json
import struct
from typing import Any

PROTOCOL_VERSION = 1
#: Large enough for a long reply with tool results; small enough that a bad length prefix
#: cannot make either side allocate without bound.
MAX_FRAME_BYTES = 16 * 1024 * 1024
_HEADER = struct.Struct(">I")


class ProtocolError(Exception):
    """The peer sent something that is not a valid frame."""


class RemoteError(Exception):
    """The daemon answered a request with an error."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(f"{message} ({code})")


def encode(message: dict[str, Any]) -> bytes:
    payload = json.dumps(message, separators=(",", ":"), default=str).encode()
    if len(payload) > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame of {len(payload)} bytes exceeds {MAX_FRAME_BYTES}")
    return _HEADER.pack(len(payload)) + payload


async def read_frame(stream: Any) -> dict[str, Any] | None:
    """Read one frame from an anyio byte stream; ``None`` on a clean end of stream."""
    header = await _read_exactly(stream, _HEADER.size, allow_eof=True)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    if size > MAX_FRAME_BYTES:
        raise ProtocolError(f"peer announced a {size}-byte frame; the limit is {MAX_FRAME_BYTES}")
    payload = await _read_exactly(stream, size, allow_eof=False)
    try:
        message = json.loads(payload)
    except ValueError as exc:
        raise ProtocolError("frame is not valid JSON") from exc
    if not isinstance(message, dict):
        raise ProtocolError("frame must be a JSON object")
    return message


async def _read_exactly(stream: Any, size: int, *, allow_eof: bool) -> bytes | None:
    import anyio

    chunks = bytearray()
    while len(chunks) < size:
        try:
            chunk = await stream.receive(size - len(chunks))
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            if allow_eof and not chunks:
                return None
            raise ProtocolError("connection closed in the middle of a frame") from None
        chunks += chunk
    return bytes(chunks)
