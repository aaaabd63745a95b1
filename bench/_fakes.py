"""Load a platform stand-in from the channel test suites by file path; lean HTTP/1.1 ends.

The loopback fakes live beside the adapter tests (they are test code, not a package), so the
benchmarks import them by path, once per process.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any


def load_fake(name: str, path: Path) -> ModuleType:
    """The module at *path*, imported once under *name*."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


# ----------------------------------------------------------------------------- lean HTTP/1.1
#
# A load generator must cost far less per request than what it measures. These two speak
# plain HTTP/1.1 with Content-Length framing and keep-alive over asyncio streams (no pool to
# scan, no per-request objects beyond the bytes): the benchmarks' client for the webhook
# side and the server under the platform API stand-ins they run in their driver process.


class HttpError(Exception):
    """The peer broke the HTTP/1.1 framing or closed the connection mid-exchange."""


async def _read_message(reader: asyncio.StreamReader) -> tuple[bytes, dict[bytes, bytes], bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    first, *lines = head[:-4].split(b"\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
    if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
        raise HttpError("chunked bodies are not supported by the lean stand-ins")
    length = int(headers.get(b"content-length", b"0"))
    body = await reader.readexactly(length) if length else b""
    return first, headers, body


class LeanServer:
    """``handler(method, target, headers, body) -> (status, body bytes)`` on a loopback port."""

    def __init__(self, handler: Any) -> None:
        self.handler = handler
        self.server: asyncio.Server | None = None
        self.url = ""
        self._open: dict[asyncio.StreamWriter, asyncio.Task] = {}

    async def __aenter__(self) -> LeanServer:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        # Each connection's handler ends on its own (EOF), not cancelled at loop shutdown.
        for writer in self._open:
            writer.close()
        await asyncio.gather(*self._open.values(), return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._open[writer] = task
        try:
            while True:
                try:
                    first, headers, body = await _read_message(reader)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                method, target, _ = first.split(b" ", 2)
                status, payload = self.handler(method.decode(), target.decode(), headers, body)
                writer.write(
                    b"HTTP/1.1 %d X\r\ncontent-type: application/json\r\n"
                    b"content-length: %d\r\n\r\n%s" % (status, len(payload), payload)
                )
        finally:
            self._open.pop(writer, None)
            writer.close()


class LeanConnection:
    """One keep-alive connection; one request at a time (callers take turns)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        extra = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        self.writer.write(
            f"POST {path} HTTP/1.1\r\nhost: {self.host}:{self.port}\r\n{extra}"
            f"content-length: {len(body)}\r\n\r\n".encode()
            + body
        )
        try:
            first, answer_headers, answer = await _read_message(self.reader)
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            self.close()
            raise HttpError(f"the server closed the connection: {exc!r}") from exc
        if answer_headers.get(b"connection", b"").lower() == b"close":
            self.close()
        return int(first.split(b" ", 2)[1]), answer

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None
