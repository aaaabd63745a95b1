"""HTTP/1.1 connections and their keep-alive pool over asyncio protocols, without httpx.

The wire under both of the runtime's HTTP clients: :class:`fermix_core.http1.Http1Transport`
(an httpx transport, the channels' client) and :class:`fermix_core.directclient.DirectClient`
(the providers' client of a service). One :class:`asyncio.Protocol` per connection is fed to
httptools' response parser (llhttp, already what the ingress parses requests with); a
per-origin pool keeps connections alive; waits are plain futures with a timer (no task
cancellation).

Nothing here imports httpx: a one-off ``fermix ask`` whose model answers never loads it
(with the ``email``, ``http.client``, ``urllib.request`` and ``http.cookiejar`` modules it
brings, about a twelfth of the ask's imports). Its errors are still httpx's
(``ConnectError``, ``ConnectTimeout``, ``ReadTimeout``, ``WriteTimeout``, ``PoolTimeout``,
``ReadError``, ``WriteError``, ``RemoteProtocolError``, ``LocalProtocolError``), made by
:func:`http_error`, which imports httpx when the first one is raised, so callers' handling is the
same for both clients.

Behaviour kept from httpx's pooled transport: keep-alive connections expire after
``keepalive_expiry`` idle seconds, at most ``max_connections`` open (a request waits for a
slot up to the pool timeout), and a request that meets a reused keep-alive connection the
server has just closed (EOF or reset before any response byte) is sent once more on a fresh
connection when its body can be replayed. One event loop at a time, like httpcore's pool:
when requests start coming from another loop (a test's next ``asyncio.run``), the idle
connections of the previous one are dropped.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import ssl
import time
from collections.abc import AsyncIterable
from typing import Any

from fermix_core.httpclient import real_context

__all__ = ["DEFAULT_PORTS", "Body", "Connection", "Http1Pool", "asyncio_loop", "head", "http_error"]

log = logging.getLogger("fermix.http")

#: Response bytes buffered unread above which the connection stops reading (flow control).
READ_HIGH_WATER = 1 << 20
#: ... and below which it reads again.
READ_LOW_WATER = 1 << 18
#: A request body at most this large goes out in the same write as the head.
COALESCE_BODY_BYTES = 1 << 16
#: A response head (status line and headers) larger than this is refused.
MAX_HEAD_BYTES = 1 << 16
#: How often (at most) idle connections of every origin are checked for expiry.
SWEEP_SECONDS = 1.0

DEFAULT_PORTS = {"http": 80, "https": 443}
_FORBIDDEN = (b"\r", b"\n", b"\0")


def _httptools() -> Any:
    # Imported with the first connection: an idle daemon never loads the parser.
    import httptools

    return httptools


def http_error(name: str, message: str, request: Any = None) -> Exception:
    """The httpx exception *name* (``"ReadTimeout"`` …): httpx is imported by the first."""
    import httpx

    return getattr(httpx, name)(message, request=request)


def asyncio_loop() -> asyncio.AbstractEventLoop | None:
    """The running asyncio loop; ``None`` under another one (trio), which httpx serves."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


_Head = tuple[bytes, bool, bool]


def head(method: str, target: bytes, headers: Any, request: Any = None) -> _Head:
    """The request head's bytes, whether its body goes chunked, whether it asks to close.

    *headers* are ``(name, value)`` byte pairs, as they go out. httpx lets CR, LF and NUL
    through in header values (h11 refuses them when it writes); a header carrying one could
    smuggle headers or a second request, so it is refused here, before any connection is
    taken."""
    blob = [method.encode("ascii"), b" ", target, b" HTTP/1.1\r\n"]
    chunked = closing = False
    for name, value in headers:
        if any(bad in name or bad in value for bad in _FORBIDDEN):
            raise http_error(
                "LocalProtocolError", f"illegal character in request header {name!r}", request
            )
        lowered = name.lower()
        if lowered == b"transfer-encoding":
            chunked = b"chunked" in value.lower()
        elif lowered == b"connection":
            closing = b"close" in value.lower()
        blob += (name, b": ", value, b"\r\n")
    blob.append(b"\r\n")
    return b"".join(blob), chunked, closing


class _Stale(Exception):
    """A reused connection was closed by the server before any response byte arrived."""


def _expire(waiter: asyncio.Future) -> None:
    if not waiter.done():
        waiter.set_result(True)


class Connection(asyncio.Protocol):
    """One keep-alive connection: one exchange at a time, parsed as the bytes arrive."""

    def __init__(self, transport: Http1Pool, origin: tuple[str, str, int]) -> None:
        self.owner = transport
        self.origin = origin
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.counted = True  # holds one of the pool's slots
        self.idle_since = 0.0
        self.uses = 0
        self.parser: Any = None
        self.waiter: asyncio.Future | None = None
        self.write_paused = False
        self.read_paused = False
        self.lost: BaseException | None = None
        self._reset()

    def _reset(self) -> None:
        self.status = 0
        self.reason = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.headers_done = False
        self.framed = False  # the body's end is known (a length, chunked, or none allowed)
        self.chunks: collections.deque[bytes] = collections.deque()
        self.buffered = 0
        self.complete = False
        self.error: Exception | None = None
        self.got_bytes = False
        self.head_bytes = 0
        self.header_bytes = 0
        self.keep_alive = False
        self.want_close = False

    # -- asyncio.Protocol ---------------------------------------------------------------

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.parser is None or self.complete:
            # Bytes no request asked for: the connection cannot be trusted any more.
            self._fail(http_error("RemoteProtocolError", "the server sent data outside a response"))
            self.close()
            return
        self.got_bytes = True
        parsing = _httptools()
        try:
            self.parser.feed_data(data)
        except parsing.HttpParserUpgrade:
            self._fail(http_error("RemoteProtocolError", "the server switched protocols unasked"))
            self.close()
            return
        except parsing.HttpParserError as exc:
            self._fail(http_error("RemoteProtocolError", f"malformed HTTP response: {exc}"))
            self.close()
            return
        if not self.headers_done:
            self.head_bytes += len(data)  # a head that never ends
            if self.head_bytes > MAX_HEAD_BYTES:
                self._head_too_large()
        if self.error is not None:
            self.close()

    def _head_too_large(self) -> None:
        self._fail(http_error("RemoteProtocolError", "the response head is over 64 KiB"))

    def eof_received(self) -> bool:
        return False  # close our side too; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.lost = exc
        if self.parser is not None and not self.complete and self.error is None:
            if self.headers_done and not self.framed:
                self.complete = True  # a body delimited by the connection's end
                self.keep_alive = False
            elif not self.got_bytes:
                self.error = _Stale()
            elif self.headers_done:
                self.error = http_error(
                    "RemoteProtocolError",
                    "the server closed the connection before the whole response body",
                )
            else:
                self.error = http_error(
                    "RemoteProtocolError",
                    "the server closed the connection in the middle of a response",
                )
        self._wake()
        self.owner._lost(self)

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        self._wake()

    # -- httptools callbacks ------------------------------------------------------------

    def on_status(self, status: bytes) -> None:
        self.reason += status

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))
        self.header_bytes += len(name) + len(value) + 4
        if self.header_bytes > MAX_HEAD_BYTES:  # h11 caps a head too
            self._head_too_large()

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        self.headers_done = True
        if self.status < 200 or self.status in (204, 304):
            self.framed = True
        else:
            for name, value in self.headers:
                lowered = name.lower()
                if lowered == b"content-length" or (
                    lowered == b"transfer-encoding" and b"chunked" in value.lower()
                ):
                    self.framed = True
                    break
        self._wake()

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)
        self.buffered += len(body)
        if self.buffered > READ_HIGH_WATER and not self.read_paused and self.transport:
            self.read_paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        if self.status < 200:
            # An interim answer (100 Continue, 103 Early Hints): the real one follows on
            # the same parser.
            self._reset()
            self.got_bytes = True
            return
        self.keep_alive = self.parser.should_keep_alive()
        self.complete = True
        self._wake()

    # -- the exchange -------------------------------------------------------------------

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(False)

    def _fail(self, error: Exception) -> None:
        if self.error is None and not self.complete:
            self.error = error
        self._wake()

    async def wait(self, timeout: float | None) -> bool:
        """Until something happens on the connection; True when *timeout* passed first."""
        loop = self.owner.loop
        waiter = self.waiter = loop.create_future()
        timer = loop.call_later(timeout, _expire, waiter) if timeout is not None else None
        try:
            return await waiter
        finally:
            self.waiter = None
            if timer is not None:
                timer.cancel()

    def close(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.close()
        self.closed = True

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()
        self.closed = True

    async def _write_all(self, data: bytes, timeouts: dict[str, Any], request: Any) -> None:
        if self.closed or self.transport is None or self.transport.is_closing():
            if self.uses > 1:
                raise _Stale()
            raise http_error(
                "WriteError", "the connection closed before the request was sent", request
            )
        self.transport.write(data)
        while self.write_paused and not self.closed and self.error is None:
            if await self.wait(timeouts.get("write")):
                raise http_error("WriteTimeout", "timed out sending the request body", request)

    async def send(
        self,
        blob: _Head,
        body: bytes | None,
        stream: AsyncIterable[bytes] | None,
        timeouts: dict[str, Any],
        request: Any,
    ) -> None:
        """Send a request and read the response head (:attr:`status`, :attr:`headers`,
        :attr:`reason`); the body streams from :class:`Body`. *body* is the whole body when
        it is known (it can be sent again), *stream* the pieces of one that is not."""
        self._reset()
        self.parser = _httptools().HttpResponseParser(self)
        self.uses += 1
        data, chunked, closing = blob
        if body is not None and not chunked and len(body) <= COALESCE_BODY_BYTES:
            await self._write_all(data + body, timeouts, request)
        else:
            await self._write_all(data, timeouts, request)
            if body is not None and not chunked:
                await self._write_all(body, timeouts, request)
            else:
                if body is not None:  # a known body the request's headers say is chunked
                    await self._write_piece(body, chunked, timeouts, request)
                elif stream is not None:
                    async for piece in stream:
                        await self._write_piece(piece, chunked, timeouts, request)
                if chunked:
                    await self._write_all(b"0\r\n\r\n", timeouts, request)
        read_timeout = timeouts.get("read")
        while not self.headers_done:
            if self.error is not None:
                raise self._mapped(request)
            if await self.wait(read_timeout):
                raise http_error("ReadTimeout", "timed out waiting for the response", request)
        if self.error is not None:  # the head arrived whole, but wrong
            raise self._mapped(request)
        self.want_close = closing

    async def _write_piece(
        self, piece: bytes, chunked: bool, timeouts: dict[str, Any], request: Any
    ) -> None:
        if piece:
            await self._write_all(
                b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece, timeouts, request
            )

    def _mapped(self, request: Any) -> Exception:
        error = self.error
        if isinstance(error, _Stale):
            if self.uses > 1:
                return error
            return http_error(
                "RemoteProtocolError", "the server disconnected without sending a response", request
            )
        assert error is not None
        if getattr(error, "_request", False) is None:  # an httpx error made without one
            error.request = request  # type: ignore[attr-defined]
        return error

    def take(self) -> bytes:
        data = b"".join(self.chunks) if len(self.chunks) != 1 else self.chunks[0]
        self.chunks.clear()
        self.buffered = 0
        if self.read_paused and not self.closed and self.transport is not None:
            self.read_paused = False
            self.transport.resume_reading()
        return data


class Body:
    """A response body as it arrives; closing it returns the connection to the pool."""

    def __init__(self, connection: Connection, request: Any, timeout: float | None) -> None:
        self.connection = connection
        self.request = request
        self.timeout = timeout
        self.done = False

    async def __aiter__(self) -> Any:
        connection = self.connection
        while True:
            if connection.chunks:
                yield connection.take()
                continue
            if connection.complete:
                return
            if connection.error is not None:
                error = connection.error
                if isinstance(error, _Stale):
                    error = http_error("RemoteProtocolError", "the server closed the connection")
                raise error
            if await connection.wait(self.timeout):
                raise http_error("ReadTimeout", "timed out reading the response body", self.request)

    async def aclose(self) -> None:
        if not self.done:
            self.done = True
            self.connection.owner._release(self.connection)


class Http1Pool:
    """Per-origin keep-alive connections, at most *max_connections* open (see the module)."""

    def __init__(
        self,
        *,
        ssl_context: Any,
        max_connections: int = 100,
        keepalive_expiry: float | None = 15.0,
    ) -> None:
        self.ssl_context = ssl_context
        self.max_connections = max_connections
        self.keepalive_expiry = keepalive_expiry
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]
        self._idle: dict[tuple[str, str, int], list[Connection]] = {}
        self._open = 0
        self._waiters: collections.deque[asyncio.Future] = collections.deque()
        self._next_sweep = 0.0
        self._closed = False
        #: Requests sent again after a stale keep-alive connection (tests read it).
        self.stale_retries = 0

    @property
    def open_connections(self) -> int:
        return self._open

    @property
    def idle_connections(self) -> int:
        return sum(1 for idle in self._idle.values() for c in idle if not c.closed)

    async def exchange(
        self,
        loop: asyncio.AbstractEventLoop,
        origin: tuple[str, str, int],
        blob: _Head,
        body: bytes | None,
        stream: AsyncIterable[bytes] | None,
        timeouts: dict[str, Any],
        request: Any,
        *,
        sni: str | None = None,
    ) -> Connection:
        """Send one request to *origin* (scheme, host, port) from *loop*; the connection
        comes back with the response head read. A request whose *body* is known is sent once
        more on a fresh connection when a reused one turns out closed; a *stream* is not."""
        if self._closed:
            raise RuntimeError("the HTTP transport is closed")
        if loop is not self.loop:
            self._forget()
            self.loop = loop
        connection = await self._acquire(origin, request, timeouts, reuse=True, sni=sni)
        try:
            return await self._send(connection, blob, body, stream, timeouts, request)
        except _Stale:
            if body is None:
                raise http_error(
                    "RemoteProtocolError",
                    "the server closed the connection before answering",
                    request,
                ) from None
            log.debug("%s: stale keep-alive connection; sending again", origin[1])
            self.stale_retries += 1
            connection = await self._acquire(origin, request, timeouts, reuse=False, sni=sni)
            try:
                return await self._send(connection, blob, body, stream, timeouts, request)
            except _Stale:
                raise http_error(
                    "RemoteProtocolError",
                    "the server disconnected without sending a response",
                    request,
                ) from None

    async def _send(
        self,
        connection: Connection,
        blob: _Head,
        body: bytes | None,
        stream: AsyncIterable[bytes] | None,
        timeouts: dict[str, Any],
        request: Any,
    ) -> Connection:
        try:
            await connection.send(blob, body, stream, timeouts, request)
        except BaseException:
            # Failed, timed out or cancelled mid-exchange: the connection's state is unknown.
            connection.abort()
            self._discard(connection)
            raise
        return connection

    # -- the pool -----------------------------------------------------------------------

    async def _acquire(
        self,
        origin: tuple[str, str, int],
        request: Any,
        timeouts: dict[str, Any],
        *,
        reuse: bool,
        sni: str | None,
    ) -> Connection:
        now = time.monotonic()
        if now >= self._next_sweep:
            self._next_sweep = now + SWEEP_SECONDS
            self._sweep(now)
        while True:
            idle = self._idle.get(origin)
            while reuse and idle:
                connection = idle.pop()
                if connection.closed:
                    continue  # its slot was given back when it closed
                if self._expired(connection, now):
                    connection.close()
                    self._discard(connection)
                    continue
                return connection
            if self._open >= self.max_connections and not self._evict_idle():
                waiter = self.loop.create_future()
                self._waiters.append(waiter)
                timeout = timeouts.get("pool")
                timer = (
                    self.loop.call_later(timeout, _expire, waiter) if timeout is not None else None
                )
                try:
                    if await waiter:
                        raise http_error(
                            "PoolTimeout", "timed out waiting for a free connection", request
                        )
                finally:
                    if timer is not None:
                        timer.cancel()
                    if waiter in self._waiters:
                        self._waiters.remove(waiter)
                now = time.monotonic()
                continue
            self._open += 1
            try:
                return await self._connect(origin, request, timeouts, sni)
            except BaseException:
                self._open -= 1
                self._wake_waiter()
                raise

    async def _connect(
        self, origin: tuple[str, str, int], request: Any, timeouts: dict[str, Any], sni: str | None
    ) -> Connection:
        scheme, host, port = origin
        connection = Connection(self, origin)
        tls = scheme == "https"
        # A LazyTrustContext is built for the first TLS connection.
        context = real_context(self.ssl_context) if tls else None
        try:
            await asyncio.wait_for(
                self.loop.create_connection(
                    lambda: connection,
                    host,
                    port,
                    ssl=context,
                    server_hostname=(sni or host) if tls else None,
                ),
                timeouts.get("connect"),
            )
        except TimeoutError:
            raise http_error(
                "ConnectTimeout", f"timed out connecting to {host}:{port}", request
            ) from None
        except (OSError, ssl.SSLError) as exc:
            raise http_error("ConnectError", f"{host}:{port}: {exc}", request) from None
        return connection

    def _expired(self, connection: Connection, now: float) -> bool:
        expiry = self.keepalive_expiry
        return expiry is not None and now - connection.idle_since > expiry

    def _sweep(self, now: float) -> None:
        for origin, idle in list(self._idle.items()):
            keep = []
            for connection in idle:
                if connection.closed:
                    continue
                if self._expired(connection, now):
                    connection.close()
                    self._discard(connection)
                else:
                    keep.append(connection)
            if keep:
                self._idle[origin] = keep
            else:
                del self._idle[origin]

    def _evict_idle(self) -> bool:
        """Close one idle connection (of any origin) to make room; False when none is idle."""
        for idle in self._idle.values():
            while idle:
                connection = idle.pop(0)
                if not connection.closed:
                    connection.close()
                    self._discard(connection)
                    return True
        return False

    def _release(self, connection: Connection) -> None:
        """The body was read or abandoned: keep the connection alive or close it."""
        connection.parser = None if connection.complete else connection.parser
        if (
            connection.complete
            and connection.keep_alive
            and not connection.want_close
            and connection.error is None
            and not connection.closed
            and not self._closed
        ):
            connection.idle_since = time.monotonic()
            self._idle.setdefault(connection.origin, []).append(connection)
            self._wake_waiter()
            return
        connection.abort() if not connection.complete else connection.close()
        self._discard(connection)

    def _discard(self, connection: Connection) -> None:
        if connection.counted:
            connection.counted = False
            self._open -= 1
            self._wake_waiter()

    def _lost(self, connection: Connection) -> None:
        """The connection closed; an idle one gives its slot back now."""
        if connection.parser is None:
            self._discard(connection)

    def _wake_waiter(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(False)
                return

    def _forget(self) -> None:
        """A new event loop: connections of the old one cannot be used from it."""
        self._waiters.clear()
        for idle in self._idle.values():
            for connection in idle:
                if not connection.closed and connection.transport is not None:
                    with contextlib.suppress(RuntimeError):  # that loop is closed already
                        connection.transport.abort()
                connection.closed = True
                self._discard(connection)
        self._idle.clear()
        self._waiters.clear()

    async def aclose(self) -> None:
        self._closed = True
        try:
            loop: Any = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is not self.loop:
            self._forget()  # connections of a loop that is gone
        for idle in self._idle.values():
            for connection in idle:
                connection.close()
                self._discard(connection)
        self._idle.clear()
