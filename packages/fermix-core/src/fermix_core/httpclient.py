"""The runtime's shared HTTP client, with certificate loading deferred to the first TLS use.

Every provider adapter of a runtime shares one ``httpx.AsyncClient``. httpx builds its
verifying ``ssl.SSLContext`` when the client is constructed, and loading the CA bundle into
it costs about 40 ms of CPU and a megabyte or two of memory — paid by every process that
builds a client, including a one-off ``fermix ask`` to a model on ``http://127.0.0.1``
that never makes a TLS connection. :class:`DeferredTrustContext` is a verifying client
context that loads its trust store on the first handshake instead; the verification
itself is the one httpx would do (``SSL_CERT_FILE``, then ``SSL_CERT_DIR``, then
certifi's bundle).

Its transport (:class:`PooledTransport`) is httpx's own with three changes that matter when
many requests share the pool (a channel's replies to a hundred chats at once):

* **a cheap stale check.** Before every request httpcore asks each pooled connection whether
  its socket is readable (an idle connection the server closed is); through anyio that built
  a dict of socket attributes and called ``getpeername`` per connection per request. The
  network backend here keeps the raw socket and answers with one ``poll``;
* **no keep-alive churn.** ``max_keepalive_connections`` equals ``max_connections``: with
  httpx's 20 of 100, a burst of more than 20 concurrent requests made the pool close idle
  connections at every checkout and open new ones;
* **a stale connection is retried once.** A request sent on a reused keep-alive connection
  that the server had just closed (the reset or EOF arrives before any response byte) never
  reached the application, so it is sent again at once on a fresh connection — what
  browsers and Go's client do — instead of failing as a network error.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import select
import ssl
import sys
import threading
from typing import Any

log = logging.getLogger("fermix.http")

#: Idle keep-alive connections older than this are discarded at checkout.
KEEPALIVE_EXPIRY_SECONDS = 15.0
#: Connections per pool (httpx's default); all of them may stay alive while idle.
MAX_CONNECTIONS = 100


class DeferredTrustContext(ssl.SSLContext):
    """``ssl.create_default_context()`` for a client, with the CA certificates loaded on
    the first ``wrap_bio``/``wrap_socket`` (every TLS connection goes through one)."""

    def __new__(cls, *, trust_env: bool = True) -> DeferredTrustContext:
        return super().__new__(cls, ssl.PROTOCOL_TLS_CLIENT)

    def __init__(self, *, trust_env: bool = True) -> None:
        # PROTOCOL_TLS_CLIENT already means CERT_REQUIRED and check_hostname, as in
        # create_default_context; what else that function sets is copied here.
        super().__init__()
        self._trust_env = trust_env
        self._trust_loaded = False
        self._trust_lock = threading.Lock()
        if sys.version_info >= (3, 13):  # create_default_context's stricter defaults there
            self.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN | ssl.VERIFY_X509_STRICT
        keylog = os.environ.get("SSLKEYLOGFILE")
        if keylog and not sys.flags.ignore_environment and hasattr(self, "keylog_filename"):
            self.keylog_filename = keylog

    @property
    def trust_loaded(self) -> bool:
        return self._trust_loaded

    def load_trust(self) -> None:
        """Load the CA certificates now (idempotent, thread-safe)."""
        if self._trust_loaded:
            return
        with self._trust_lock:
            if self._trust_loaded:
                return
            cafile = os.environ.get("SSL_CERT_FILE") if self._trust_env else None
            capath = os.environ.get("SSL_CERT_DIR") if self._trust_env else None
            if cafile:
                self.load_verify_locations(cafile=cafile)
            elif capath:
                self.load_verify_locations(capath=capath)
            else:
                import certifi

                self.load_verify_locations(cafile=certifi.where())
            self._trust_loaded = True

    def wrap_socket(self, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        self.load_trust()
        return super().wrap_socket(*args, **kwargs)

    def wrap_bio(self, *args: Any, **kwargs: Any) -> ssl.SSLObject:
        self.load_trust()
        return super().wrap_bio(*args, **kwargs)


class LazyTrustContext:
    """The runtime client's TLS context until a TLS connection needs one: a
    :class:`DeferredTrustContext` built on first use, once, and shared from then on.

    Merely creating an ``ssl.SSLContext`` (OpenSSL's ``SSL_CTX_new`` and the cipher and
    group tables behind it) adds about 0.45 MiB to a process, which a one-off ``fermix
    ask`` to a model on ``http://`` never needs. The lean transport
    (:class:`fermix_core.http1.Http1Transport`) takes :attr:`context` when it opens a TLS
    connection. httpcore asks the pool's context for nothing before a TLS connection
    opens; then it sets the ALPN protocols on it and hands it to the network stream's
    ``start_tls``, where :func:`_network_backend`'s stream passes on :attr:`context`
    instead. Any other attribute is the built context's.
    """

    def __init__(self, *, trust_env: bool = True) -> None:
        self._trust_env = trust_env
        self._context: DeferredTrustContext | None = None
        self._lock = threading.Lock()

    @property
    def built(self) -> bool:
        return self._context is not None

    @property
    def context(self) -> DeferredTrustContext:
        if self._context is None:
            with self._lock:
                if self._context is None:
                    self._context = DeferredTrustContext(trust_env=self._trust_env)
        return self._context

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.context, name)


def real_context(context: Any) -> Any:
    """*context*, or the context a :class:`LazyTrustContext` stands for (built now)."""
    return context.context if isinstance(context, LazyTrustContext) else context


def _readable(sock: Any) -> bool:
    """Whether *sock* has something to read now (for an idle connection: the server's EOF)."""
    try:
        fd = sock.fileno()
    except (AttributeError, OSError):
        return True
    if fd < 0:
        return True
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


#: Send a request's head and body in one write (see ``Stream.write``).
COALESCE_WRITES = True
_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*0*[1-9][0-9]*[ \t]*\r\n", re.IGNORECASE)


def _announces_body(buffer: bytes) -> bool:
    """Whether *buffer* is a complete request head announcing a non-empty body by length."""
    return buffer.endswith(b"\r\n\r\n") and _CONTENT_LENGTH.search(buffer) is not None


def _network_backend() -> Any:
    """httpcore's anyio backend with streams that keep their raw socket (built lazily: the
    classes subclass httpcore's, imported with httpx)."""
    import httpcore

    class Stream(httpcore.AsyncNetworkStream):
        __slots__ = ("_held", "_inner", "_sock")

        def __init__(self, inner: Any) -> None:
            self._inner = inner
            self._sock = inner.get_extra_info("socket")
            self._held: bytes | None = None

        async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            if self._held is not None:  # never wait for an answer to bytes not yet sent
                held, self._held = self._held, None
                await self._inner.write(held, timeout)
            return await self._inner.read(max_bytes, timeout)

        async def write(self, buffer: bytes, timeout: float | None = None) -> None:
            if self._held is not None:
                buffer, self._held = self._held + buffer, None
            elif COALESCE_WRITES and _announces_body(buffer):
                # httpcore writes a request's head and its body separately: two sends, two
                # wake-ups of the peer. The head waits for the body (the next write).
                self._held = bytes(buffer)
                return
            await self._inner.write(buffer, timeout)

        async def aclose(self) -> None:
            self._held = None
            await self._inner.aclose()

        async def start_tls(self, *args: Any, **kwargs: Any) -> Any:
            if args:
                args = (real_context(args[0]), *args[1:])
            if "ssl_context" in kwargs:
                kwargs["ssl_context"] = real_context(kwargs["ssl_context"])
            return Stream(await self._inner.start_tls(*args, **kwargs))

        def get_extra_info(self, info: str) -> Any:
            if info == "is_readable":
                return self._sock is None or _readable(self._sock)
            if info == "socket":
                return self._sock
            return self._inner.get_extra_info(info)

    class Backend(httpcore.AsyncNetworkBackend):
        def __init__(self) -> None:
            self._inner = httpcore.AnyIOBackend()

        async def connect_tcp(self, *args: Any, **kwargs: Any) -> Any:
            return Stream(await self._inner.connect_tcp(*args, **kwargs))

        async def connect_unix_socket(self, *args: Any, **kwargs: Any) -> Any:
            return Stream(await self._inner.connect_unix_socket(*args, **kwargs))

        async def sleep(self, seconds: float) -> None:
            await self._inner.sleep(seconds)

    return Backend()


#: How often (at most) the pool looks at every idle connection for expiry and surplus.
FULL_SCAN_SECONDS = 1.0


@functools.cache
def _pool_class() -> Any:
    """httpcore's connection pool with an O(connections) checkout instead of a scan of
    every connection (a readability syscall each, and a quadratic idle count) per request.

    On every checkout and release, httpcore 1.0 asked *every* idle connection whether it
    had expired or was readable, and for each idle one counted all connections again: with
    50 connections open (50 replies in flight) that was most of a delivery's CPU. Here only
    the connection about to be used is checked (an expired or server-closed one is closed
    and the next one tried); the full sweep — expired idle connections, idle ones over
    ``max_keepalive_connections`` — runs at most every :data:`FULL_SCAN_SECONDS`. Which
    requests get which connections, and when new ones open, is httpcore's own rule.
    """
    import time

    import httpcore

    class Pool(httpcore.AsyncConnectionPool):
        full_scan_seconds = FULL_SCAN_SECONDS

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._next_sweep = 0.0

        def _sweep(self, closing: list[Any]) -> None:
            idle = 0
            for connection in list(self._connections):
                if connection.is_closed():
                    self._connections.remove(connection)
                elif connection.has_expired():
                    self._connections.remove(connection)
                    closing.append(connection)
                elif connection.is_idle():
                    idle += 1
                    if idle > self._max_keepalive_connections:
                        self._connections.remove(connection)
                        closing.append(connection)

        def _usable(self, origin: Any, closing: list[Any]) -> Any:
            connections = self._connections
            index = 0
            while index < len(connections):
                connection = connections[index]
                if connection.can_handle_request(origin) and connection.is_available():
                    if not connection.has_expired():
                        return connection
                    del connections[index]  # expired, or the server closed it
                    closing.append(connection)
                    continue
                if connection.is_closed():
                    del connections[index]
                    continue
                index += 1
            return None

        def _assign_requests_to_connections(self) -> list[Any]:
            closing: list[Any] = []
            now = time.monotonic()
            if now >= self._next_sweep:
                self._next_sweep = now + self.full_scan_seconds
                self._sweep(closing)
            for pool_request in self._requests:
                if not pool_request.is_queued():
                    continue
                origin = pool_request.request.url.origin
                connection = self._usable(origin, closing)
                if connection is None:
                    if len(self._connections) >= self._max_connections:
                        idle = next((c for c in self._connections if c.is_idle()), None)
                        if idle is None:
                            continue  # every connection busy: the request waits its turn
                        self._connections.remove(idle)
                        closing.append(idle)
                    connection = self.create_connection(origin)
                    self._connections.append(connection)
                pool_request.assign_to_connection(connection)
            return closing

    if not callable(getattr(httpcore.AsyncConnectionPool, "_assign_requests_to_connections", None)):
        return httpcore.AsyncConnectionPool  # another httpcore: its own pool, unchanged
    return Pool


@functools.cache
def _transport_class() -> Any:
    import httpx

    class PooledTransport(httpx.AsyncHTTPTransport):
        """httpx's transport over a pool with the cheap stale check, and one immediate
        retry of a request that failed on a reused connection before any response byte."""

        def __init__(self, *, verify: Any, limits: Any, trust_env: bool = True) -> None:
            super().__init__(verify=verify, limits=limits, trust_env=trust_env)
            self._pool = _pool_class()(
                ssl_context=httpx.create_ssl_context(verify=verify, trust_env=trust_env),
                max_connections=limits.max_connections,
                max_keepalive_connections=limits.max_keepalive_connections,
                keepalive_expiry=limits.keepalive_expiry,
                network_backend=_network_backend(),
            )
            #: Requests sent again after a stale connection (tests and benchmarks read it).
            self.stale_retries = 0

        def _reusing(self, request: Any) -> bool:
            import httpcore

            origin = httpcore.URL(str(request.url)).origin
            return any(
                connection.is_idle() and connection.can_handle_request(origin)
                for connection in self._pool.connections
            )

        async def handle_async_request(self, request: Any) -> Any:
            reusing = self._reusing(request)
            try:
                return await super().handle_async_request(request)
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
                # Only a body we can send again (bytes, not a one-shot stream), and only
                # when an idle connection was there to be reused: a fresh connection that
                # fails is a real failure, reported as one.
                if not reusing or not isinstance(request.stream, httpx.ByteStream):
                    raise
                log.debug(
                    "%s %s: stale keep-alive connection (%r); sending again",
                    request.method,
                    request.url.host,
                    exc,
                )
                self.stale_retries += 1
                return await super().handle_async_request(request)

    return PooledTransport


class FallbackOnDemand:
    """The lean client's fallback transport, built by the first request that needs it.

    :class:`fermix_core.http1.Http1Transport` hands only ``HEAD``/``CONNECT`` and non-asyncio
    loops on, which a provider call or a platform API call never is. Building httpx's pooled
    transport up front imported httpcore and h11 (about 45 modules: 6% of a cold
    ``fermix ask``'s instructions and 1.2 MiB) in every process for a transport that is
    almost never used."""

    def __init__(self, build: Any) -> None:
        self._build = build
        self.inner: Any = None

    async def handle_async_request(self, request: Any) -> Any:
        if self.inner is None:
            self.inner = self._build()
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        if self.inner is not None:
            await self.inner.aclose()


_TRANSPORT_OPTIONS = frozenset({"http1", "http2", "cert"})


@functools.cache
def _lean_client_class() -> Any:
    import httpx

    class SetCookieOnly(httpx.Cookies):
        """Cookies read from a response only when it sets one: httpx runs every response
        through ``http.cookiejar`` (two compatibility objects and a header scan, ~20 us),
        and the platform APIs authenticate by token, not cookie. Same jar, same result."""

        def extract_cookies(self, response: httpx.Response) -> None:
            if "set-cookie" in response.headers:
                super().extract_cookies(response)

    class LeanClient(httpx.AsyncClient):
        """``httpx.AsyncClient`` whose cookie jar is :class:`SetCookieOnly`."""

        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.cookies = kwargs.get("cookies")

        @property
        def cookies(self) -> httpx.Cookies:
            return self._set_cookie_only

        @cookies.setter
        def cookies(self, cookies: Any) -> None:
            self._set_cookie_only = SetCookieOnly(cookies)

    return LeanClient


def runtime_client(*, lean: bool = False, **kwargs: Any) -> Any:
    """The runtime-wide ``httpx.AsyncClient``: keep-alive expiry, no redirects, a verifying
    TLS context that loads its certificates only when a TLS connection opens, and the
    pooled transport above. Keyword arguments are passed on to ``httpx.AsyncClient``.

    *lean* puts :class:`fermix_core.http1.Http1Transport` in front of the pooled transport
    (which then serves only what the lean one hands on: ``HEAD``, non-asyncio loops, and is
    built only when one comes, :class:`FallbackOnDemand`): the channels' client, whose many
    small platform calls it makes several times cheaper, and the providers' client of a
    service, for which it also keeps httpcore and h11 out of a one-off ``fermix ask``."""
    import httpx

    kwargs.setdefault(
        "limits",
        httpx.Limits(
            max_connections=MAX_CONNECTIONS,
            max_keepalive_connections=MAX_CONNECTIONS,
            keepalive_expiry=KEEPALIVE_EXPIRY_SECONDS,
        ),
    )
    kwargs.setdefault("follow_redirects", False)
    verify = kwargs.pop("verify", None)
    # Transport-level settings of httpx's own (HTTP/2, client certificates) keep its transport.
    pooled_only = "transport" not in kwargs and not _TRANSPORT_OPTIONS & kwargs.keys()
    if verify is None:
        trust_env = kwargs.get("trust_env", True)
        if pooled_only and not {"proxy", "mounts"} & kwargs.keys():
            # Only our transports (whose connections unwrap it) ever see this context:
            # httpx reads ``verify`` only to build transports of its own (proxies, mounts).
            verify = LazyTrustContext(trust_env=trust_env)
        else:
            verify = DeferredTrustContext(trust_env=trust_env)
    if pooled_only:
        limits = kwargs["limits"]
        trust_env = kwargs.get("trust_env", True)
        build_pooled = functools.partial(
            _transport_class(), verify=verify, limits=limits, trust_env=trust_env
        )
        pooled = FallbackOnDemand(build_pooled) if lean else build_pooled()
        kwargs["transport"] = pooled
        if lean:
            from fermix_core.http1 import Http1Transport

            context = verify
            if not isinstance(context, (ssl.SSLContext, LazyTrustContext)):
                context = httpx.create_ssl_context(verify=verify, trust_env=trust_env)
            kwargs["transport"] = Http1Transport(
                ssl_context=context,
                fallback=pooled,
                max_connections=limits.max_connections or MAX_CONNECTIONS,
                keepalive_expiry=limits.keepalive_expiry,
            )
    if lean:
        return _lean_client_class()(verify=verify, **kwargs)
    return httpx.AsyncClient(verify=verify, **kwargs)


#: What the runtime's clients call themselves.
USER_AGENT = "fermix/0.1"


def provider_client() -> Any:
    """The providers' client of a service: a :class:`fermix_core.directclient.DirectClient`
    sending their calls on the HTTP/1.1 pool without httpx, with :func:`runtime_client`
    (lean) built for anything else only when it comes. Both share one
    :class:`LazyTrustContext`, so the trust store is loaded once, by the first TLS
    connection of either."""
    from fermix_core.directclient import DirectClient

    context = LazyTrustContext()
    return DirectClient(
        functools.partial(runtime_client, lean=True, verify=context),
        ssl_context=context,
        user_agent=USER_AGENT,
        max_connections=MAX_CONNECTIONS,
        keepalive_expiry=KEEPALIVE_EXPIRY_SECONDS,
    )
