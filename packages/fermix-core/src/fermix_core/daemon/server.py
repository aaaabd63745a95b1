"""The daemon's side of the control socket."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import anyio

from fermix_core import __version__
from fermix_core.daemon.client import probe
from fermix_core.daemon.protocol import PROTOCOL_VERSION, ProtocolError, encode, read_frame
from fermix_core.daemon.stream import SocketByteStream
from fermix_core.logs import redact

log = logging.getLogger("fermix.daemon")

Handler = Callable[[dict[str, Any]], Awaitable[Any]]


class DaemonAlreadyRunning(RuntimeError):
    pass


class MethodError(Exception):
    """Raised by a handler to answer with an error code the client can act on."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(message)


async def claim_socket(path: Path) -> None:
    """Remove a stale socket left by a crashed daemon; refuse if a live daemon answers."""
    if not os.path.lexists(path):
        return
    hello = await probe(path, timeout=1.0)
    if hello is not None:
        raise DaemonAlreadyRunning(
            f"a daemon (pid {hello.get('pid')}, version {hello.get('version')}) "
            f"already serves {path}"
        )
    log.warning("removing stale control socket %s left by a daemon that is gone", path)
    path.unlink()


class ControlServer:
    def __init__(self, path: Path, handlers: Mapping[str, Handler]) -> None:
        self.path = path
        self.handlers = dict(handlers)
        self.handlers.setdefault("hello", self._hello)

    async def _hello(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "protocol": PROTOCOL_VERSION,
            "version": __version__,
            "pid": os.getpid(),
            "methods": sorted(self.handlers),
        }

    async def serve(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Accept connections until cancelled; the socket file is removed on the way out.

        The accept loop waits with ``anyio.wait_readable`` on a plain socket rather than
        using anyio's unix listener, whose accept future can be resolved after it was
        cancelled (an "invalid state" error logged on every shutdown); see ``stream.py``.
        """
        await claim_socket(self.path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(str(self.path))
            os.chmod(self.path, 0o600)
            listener.listen(128)
            listener.setblocking(False)
        except OSError:
            listener.close()
            raise
        task_status.started()
        try:
            async with anyio.create_task_group() as connections:
                while True:
                    await anyio.wait_readable(listener)
                    try:
                        conn, _ = listener.accept()
                    except (BlockingIOError, InterruptedError):
                        continue
                    stream = SocketByteStream(conn)
                    connections.start_soon(self._connection, stream)
        finally:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            listener.close()

    async def _connection(self, stream: Any) -> None:
        async with stream:
            while True:
                try:
                    request = await read_frame(stream)
                except ProtocolError as exc:
                    await _send(
                        stream,
                        {
                            "v": PROTOCOL_VERSION,
                            "id": None,
                            "error": {"code": "protocol", "message": redact(str(exc))},
                        },
                    )
                    return
                if request is None:
                    return
                await _send(stream, await self._answer(request))

    async def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        reply: dict[str, Any] = {"v": PROTOCOL_VERSION, "id": request.get("id")}
        method = request.get("method")
        handler = self.handlers.get(method) if isinstance(method, str) else None
        if handler is None:
            reply["error"] = {
                "code": "unknown_method",
                "message": f"this daemon (version {__version__}) has no method {method!r}",
            }
            return reply
        params = request.get("params") or {}
        if not isinstance(params, dict):
            reply["error"] = {"code": "bad_params", "message": "params must be an object"}
            return reply
        try:
            reply["result"] = await handler(params)
        except MethodError as exc:
            reply["error"] = {"code": exc.code, "message": exc.message}
        except Exception as exc:
            log.exception("control method %s failed", method)
            reply["error"] = {"code": "internal", "message": f"{type(exc).__name__}: {exc}"}
        if "error" in reply:
            # The client prints error messages to the user: never a secret in them.
            reply["error"]["message"] = redact(str(reply["error"]["message"]))
        return reply


async def _send(stream: Any, message: dict[str, Any]) -> None:
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
        await stream.send(encode(message))
