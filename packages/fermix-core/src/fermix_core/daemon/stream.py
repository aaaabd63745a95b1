"""A minimal async byte stream over a connected unix socket.

anyio's own ``UNIXSocketStream`` registers ``future.set_result`` as a raw reader callback;
when a receive is cancelled in the same loop iteration the socket turns readable, the
queued callback resolves a cancelled future and asyncio logs "invalid state". That happens
on every daemon shutdown with a client attached, so the control socket uses this small
stream instead, built on ``anyio.wait_readable``/``wait_writable``, which handle that race.
"""

from __future__ import annotations

import contextlib
import socket

import anyio


class SocketByteStream:
    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self.sock = sock
        self._closed = False

    @classmethod
    async def connect(cls, path: str) -> SocketByteStream:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.connect(path)
        except BlockingIOError:
            await anyio.wait_writable(sock)
            error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if error:
                sock.close()
                raise OSError(error, "connect failed") from None
        except OSError:
            sock.close()
            raise
        return cls(sock)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        while True:
            if self._closed:
                raise anyio.ClosedResourceError
            try:
                data = self.sock.recv(max_bytes)
            except (BlockingIOError, InterruptedError):
                await anyio.wait_readable(self.sock)
                continue
            except OSError as exc:
                raise anyio.BrokenResourceError from exc
            if not data:
                raise anyio.EndOfStream
            return data

    async def send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            if self._closed:
                raise anyio.ClosedResourceError
            try:
                sent = self.sock.send(view)
            except (BlockingIOError, InterruptedError):
                await anyio.wait_writable(self.sock)
                continue
            except OSError as exc:
                raise anyio.BrokenResourceError from exc
            view = view[sent:]

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            with contextlib.suppress(OSError):
                self.sock.close()

    async def __aenter__(self) -> SocketByteStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
