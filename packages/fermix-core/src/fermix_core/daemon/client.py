"""Talking to a running daemon over ``$FERMIX_HOME/daemon.sock``."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import anyio

from fermix_core.daemon.protocol import PROTOCOL_VERSION, RemoteError, encode, read_frame
from fermix_core.daemon.stream import SocketByteStream

#: What a client says when the daemon vanished mid-request (killed, crashed, restarted).
_GONE = (
    "the daemon stopped before it answered (it was stopped, killed or crashed); nothing was "
    "lost on this side — see `fermix logs` for why, start it again with `fermix start`, "
    "and repeat the request"
)


class DaemonUnavailable(Exception):
    """No daemon answers on the socket (not running, or a stale socket file)."""


class DaemonClient:
    """One connection; requests are sent one at a time and answered in order."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stream: Any = None
        self._ids = itertools.count(1)
        self.hello: dict[str, Any] = {}

    async def __aenter__(self) -> DaemonClient:
        try:
            self._stream = await SocketByteStream.connect(str(self.path))
        except (FileNotFoundError, ConnectionRefusedError, OSError) as exc:
            raise DaemonUnavailable(f"no daemon is listening on {self.path}") from exc
        self.hello = await self.call("hello", {"client_protocol": PROTOCOL_VERSION})
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._stream is not None:
            await self._stream.aclose()

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        try:
            return await self._call(method, params)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError) as exc:
            raise DaemonUnavailable(_GONE) from exc

    async def _call(self, method: str, params: dict[str, Any] | None) -> Any:
        request_id = next(self._ids)
        await self._stream.send(
            encode(
                {"v": PROTOCOL_VERSION, "id": request_id, "method": method, "params": params or {}}
            )
        )
        while True:
            message = await read_frame(self._stream)
            if message is None:
                raise DaemonUnavailable(_GONE)
            if message.get("id") != request_id:
                continue  # a late answer to an abandoned request
            if "error" in message:
                error = message["error"] or {}
                raise RemoteError(str(error.get("code", "error")), str(error.get("message", "")))
            return message.get("result")


async def probe(path: Path, timeout: float = 2.0) -> dict[str, Any] | None:
    """The daemon's ``hello`` answer, or ``None`` when nothing answers in time."""
    with anyio.move_on_after(timeout):
        try:
            async with DaemonClient(path) as client:
                return client.hello
        except (DaemonUnavailable, RemoteError, OSError):
            return None
    return None
