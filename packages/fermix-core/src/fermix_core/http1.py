"""A lean HTTP/1.1 transport for httpx: an asyncio protocol per connection, llhttp parsing.

The connections and their pool are :mod:`fermix_core.http1wire`'s (shared with the
providers' :class:`fermix_core.directclient.DirectClient`); this module adapts them to
httpx's transport interface.

The channels' platform calls (a WhatsApp reply is one small ``POST`` and one small JSON
answer) went through httpcore: a pool guarded by anyio locks and events, cancel scopes around
every read and write, h11 (pure Python) framing each event, anyio streams over the socket —
about 0.6–0.9 ms of CPU per request on this project's benchmark machine, more than the whole
rest of a webhook delivery. aiohttp's client costs a fifth of that but importing it adds
~11 MiB to the daemon. This transport keeps httpx's client (its API, its exceptions, its
mounts, auth, timeouts) and replaces only the wire: one :class:`asyncio.Protocol` per
connection fed to httptools' response parser (llhttp, already what the ingress parses
requests with), a per-origin pool of keep-alive connections, and waits that are plain
futures with a timer (no task cancellation): see :mod:`fermix_core.http1wire`.

What it does not handle goes to the *fallback* transport (httpx's own, pooled):

* ``HEAD`` and ``CONNECT`` (the parser cannot tell a ``HEAD`` answer has no body),
  schemes other than ``http``/``https``, and any loop other than asyncio's (trio);
* proxies: a ``proxy=`` or ``mounts=`` given to the client routes those URLs to httpx's own
  transports before this one is chosen. (httpx reads no proxy from the environment for a
  client built with its own transport, as with the pooled transport before it.)

Behaviour kept from the pooled transport: keep-alive connections expire after
``keepalive_expiry`` idle seconds, at most ``max_connections`` open (a request waits for a
slot up to the pool timeout), and a request that meets a reused keep-alive connection the
server has just closed (EOF or reset before any response byte) is sent once more on a fresh
connection when its body can be replayed. One event loop at a time, like httpcore's pool:
when requests start coming from another loop (a test's next ``asyncio.run``), the idle
connections of the previous one are dropped. Errors are httpx's (``ConnectError``,
``ConnectTimeout``, ``ReadTimeout``, ``WriteTimeout``, ``PoolTimeout``, ``ReadError``,
``WriteError``, ``RemoteProtocolError``, ``LocalProtocolError``), so callers' handling is
unchanged.
"""

from __future__ import annotations

from typing import Any

import httpx

from fermix_core.http1wire import DEFAULT_PORTS, Body, Http1Pool, asyncio_loop, head

__all__ = ["Http1Transport"]

_FALLBACK_METHODS = frozenset({"HEAD", "CONNECT"})


class _Body(Body, httpx.AsyncByteStream):
    """The wire's response body as the stream type httpx's client checks for."""


class Http1Transport(httpx.AsyncBaseTransport):
    """HTTP/1.1 over asyncio protocols with a per-origin keep-alive pool (see the module)."""

    def __init__(
        self,
        *,
        ssl_context: Any,
        fallback: httpx.AsyncBaseTransport,
        max_connections: int = 100,
        keepalive_expiry: float | None = 15.0,
    ) -> None:
        self.fallback = fallback
        self.pool = Http1Pool(
            ssl_context=ssl_context,
            max_connections=max_connections,
            keepalive_expiry=keepalive_expiry,
        )

    @property
    def ssl_context(self) -> Any:
        return self.pool.ssl_context

    @property
    def open_connections(self) -> int:
        return self.pool.open_connections

    @property
    def idle_connections(self) -> int:
        return self.pool.idle_connections

    @property
    def stale_retries(self) -> int:
        """Requests sent again after a stale keep-alive connection (tests read it)."""
        return self.pool.stale_retries

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        scheme = url.scheme
        if request.method in _FALLBACK_METHODS or scheme not in DEFAULT_PORTS:
            return await self.fallback.handle_async_request(request)
        loop = asyncio_loop()
        if loop is None:  # not asyncio (trio): httpx's own transport
            return await self.fallback.handle_async_request(request)
        timeouts = request.extensions.get("timeout") or {}
        origin = (scheme, url.raw_host.decode("ascii"), url.port or DEFAULT_PORTS[scheme])
        blob = head(request.method, url.raw_path, request.headers.raw, request)
        stream = request.stream
        replayable = isinstance(stream, httpx.ByteStream)
        connection = await self.pool.exchange(
            loop,
            origin,
            blob,
            request.content if replayable else None,
            None if replayable else stream,  # type: ignore[arg-type]
            timeouts,
            request,
            sni=request.extensions.get("sni_hostname"),
        )
        return httpx.Response(
            connection.status,
            headers=connection.headers,
            stream=_Body(connection, request, timeouts.get("read")),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": connection.reason.strip()},
        )

    async def aclose(self) -> None:
        await self.pool.aclose()
        await self.fallback.aclose()
