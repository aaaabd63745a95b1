"""The daemon's HTTP ingress: one ASGI app for health and every adapter's webhook routes.

uvicorn serves the app (with httptools' parser, h11 where httptools is missing) and
Starlette routes health and everything unknown: both are small, well kept, and mean this
module owns no HTTP parsing. A webhook request (the one kind that comes in floods) is
matched by exact method and path ahead of Starlette's middleware and router and served by
a small ASGI endpoint with the same answers (statuses, headers, caps). Adapters never see
either: a webhook route is a framework-free
:class:`~fermix_core.channel.WebhookRoute` whose handler takes a
:class:`~fermix_core.channel.WebhookRequest` (raw body bytes, lower-cased headers) and
returns a :class:`~fermix_core.channel.WebhookResponse`.

* ``GET /health`` — liveness plus a one-line summary of the channels;
* ``GET /health/live`` — 200 while the process serves requests;
* ``GET /health/ready`` — 200 when the daemon takes turns and every supervised channel is
  ``ready``, else 503; the body lists every channel's health either way;
* each adapter route at its own path and methods.

Bodies are capped before the handler runs: a ``Content-Length`` over the cap is answered
413 unread, and a chunked body is read only up to the cap. A handler that raises is
answered 500 with no detail (the error goes to the log); nothing of it reaches the caller.

The server binds ``FERMIX_HTTP_BIND`` (default ``127.0.0.1``) on ``[fermix_web] port``
(default 4030, ``0`` picks a free one). The socket is bound before the daemon reports
ready, so a port in use is one clear error in the log — the daemon keeps running without
its webhooks — and a connection made after start-up is never refused. The daemon builds
the app lazily (:func:`app_factory`): Starlette and uvicorn are imported, on a worker
thread, when the first connection arrives, so an idle daemon does not hold them.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

import anyio

from fermix_core.channel import WebhookRequest, WebhookResponse, WebhookRoute

__all__ = [
    "BIND_ENV",
    "DEFAULT_BIND",
    "HttpIngress",
    "IngressInfo",
    "app_factory",
    "build_app",
    "resolve_bind",
]

log = logging.getLogger("fermix.ingress")

BIND_ENV = "FERMIX_HTTP_BIND"
DEFAULT_BIND = "127.0.0.1"
RESERVED_PREFIX = "/health"
#: How long an idle keep-alive connection is kept open (see :func:`_quiet_server`).
KEEP_ALIVE_SECONDS = 75


@dataclass
class IngressInfo:
    """Where the ingress listens (``url``), or why it does not (``error``)."""

    bind: str
    port: int
    url: str | None = None
    error: str | None = None
    routes: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "bind": self.bind,
            "port": self.port,
            "url": self.url,
            "error": self.error,
            "routes": list(self.routes),
        }


def resolve_bind(environ: Mapping[str, str]) -> str:
    """The bind address: ``FERMIX_HTTP_BIND`` or loopback; a wildcard logs a warning."""
    bind = (environ.get(BIND_ENV) or "").strip() or DEFAULT_BIND
    try:
        address = ipaddress.ip_address(bind.strip("[]"))
    except ValueError:
        address = None
    if address is not None and address.is_unspecified:
        log.warning(
            "%s=%s: the HTTP ingress listens on every network interface; put it behind a "
            "TLS-terminating reverse proxy or tunnel, or bind 127.0.0.1",
            BIND_ENV,
            bind,
        )
    return bind.strip("[]")


def _json(status: int, payload: Any) -> Any:
    from starlette.responses import Response

    return Response(
        json.dumps(payload, separators=(",", ":")).encode(),
        status_code=status,
        media_type="application/json",
    )


def _text_type(media_type: str) -> str:
    """``media_type`` as Starlette's ``Response`` sends it (``text/*`` gets a charset)."""
    if media_type.startswith("text/") and "charset=" not in media_type.lower():
        return f"{media_type}; charset=utf-8"
    return media_type


async def _respond(
    send: Callable[[dict[str, Any]], Any],
    status: int,
    body: bytes,
    content_type: str | None,
    headers: Mapping[str, str] | None = None,
) -> None:
    """One complete response, with the headers Starlette's ``Response`` would send."""
    raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    names = {name for name, _ in raw}
    if b"content-length" not in names and not (status < 200 or status in (204, 304)):
        raw.append((b"content-length", str(len(body)).encode("latin-1")))
    if content_type and b"content-type" not in names:
        raw.append((b"content-type", _text_type(content_type).encode("latin-1")))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


class _WebhookEndpoint:
    """One adapter route as a plain ASGI app: cap the body, build the framework-free
    :class:`~fermix_core.channel.WebhookRequest`, call the handler, send its answer.

    The ingress calls it directly for its exact path and methods, ahead of Starlette's
    middleware and router (a webhook is the one request that comes in floods), and
    Starlette mounts the same object for what it routes there otherwise (``HEAD``).
    """

    def __init__(self, channel: str, route: WebhookRoute, cap: int) -> None:
        self.channel = channel
        self.route = route
        self.limit = min(route.max_body_bytes, cap)

    async def _body(self, scope: Mapping[str, Any], receive: Any) -> bytes | None:
        """The body, ``None`` when it is over the cap; raises ``_Disconnected``."""
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    if int(value) > self.limit:
                        return None
                except ValueError:
                    return None
                break
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _Disconnected
            body += message.get("body", b"")
            if len(body) > self.limit:
                return None
            if not message.get("more_body", False):
                return bytes(body)

    async def __call__(self, scope: Mapping[str, Any], receive: Any, send: Any) -> None:
        route, channel = self.route, self.channel
        method = scope["method"]
        try:
            body = await self._body(scope, receive)
        except _Disconnected:
            return  # the sender is gone: nobody to answer
        if body is None:
            log.warning("%s %s: body over %d bytes refused", method, route.path, self.limit)
            await _respond(send, 413, b"request body too large\n", "text/plain")
            return
        query: dict[str, str] = {}
        if scope.get("query_string"):
            for key, value in parse_qsl(
                scope["query_string"].decode("latin-1"), keep_blank_values=True
            ):
                query.setdefault(key, value)
        request = WebhookRequest(
            method=method,
            path=scope["path"],
            query=query,
            headers={k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]},
            body=body,
        )
        try:
            answer = await route.handler(request)
        except Exception:
            log.exception("channel %s: webhook handler for %s failed", channel, route.path)
            await _respond(send, 500, b"internal error\n", "text/plain")
            return
        if not isinstance(answer, WebhookResponse):
            log.error(
                "channel %s: webhook handler for %s returned %s, not a WebhookResponse",
                channel,
                route.path,
                type(answer).__name__,
            )
            await _respond(send, 500, b"internal error\n", "text/plain")
            return
        await _respond(send, answer.status, answer.body, answer.content_type, answer.headers)


class _Disconnected(Exception):
    pass


class _Ingress:
    """The ASGI app: webhook routes first (by exact method and path), then Starlette."""

    def __init__(self, app: Any, webhooks: Mapping[tuple[str, str], _WebhookEndpoint]) -> None:
        self.app = app
        self.webhooks = webhooks

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            endpoint = self.webhooks.get((scope["method"], scope["path"]))
            if endpoint is not None:
                await endpoint(scope, receive, send)
                return
        await self.app(scope, receive, send)


def build_app(
    *,
    live: Callable[[], dict[str, Any]],
    ready: Callable[[], tuple[bool, dict[str, Any]]],
    routes: Sequence[tuple[str, WebhookRoute]] = (),
    max_body_bytes: int = 1_048_576,
) -> tuple[Any, list[str]]:
    """The ASGI app and the webhook paths it serves (``METHOD /path`` each).

    A route on a reserved path (``/health…``) or one whose path and method another channel
    already claimed is skipped with an error in the log.
    """
    make, served = app_factory(live=live, ready=ready, routes=routes, max_body_bytes=max_body_bytes)
    return make(), served


def app_factory(
    *,
    live: Callable[[], dict[str, Any]],
    ready: Callable[[], tuple[bool, dict[str, Any]]],
    routes: Sequence[tuple[str, WebhookRoute]] = (),
    max_body_bytes: int = 1_048_576,
) -> tuple[Callable[[], Any], list[str]]:
    """:func:`build_app` with the app built later: the routes are checked (and refusals
    logged) now, Starlette is imported only when the returned function is called."""
    accepted: list[tuple[str, WebhookRoute, list[str]]] = []
    claimed: dict[tuple[str, str], str] = {}
    served: list[str] = []
    for channel, route in routes:
        if not route.path.startswith("/") or route.path.startswith(RESERVED_PREFIX):
            log.error("channel %s: webhook path %r is reserved or invalid", channel, route.path)
            continue
        methods = [m.upper() for m in route.methods]
        taken = [m for m in methods if (m, route.path) in claimed]
        if taken:
            log.error(
                "channel %s: %s %s is already served for channel %s; route skipped",
                channel,
                "/".join(taken),
                route.path,
                claimed[(taken[0], route.path)],
            )
            continue
        for method in methods:
            claimed[(method, route.path)] = channel
            served.append(f"{method} {route.path}")
        accepted.append((channel, route, methods))

    def make() -> Any:
        from starlette.applications import Starlette
        from starlette.routing import Route

        async def health(request: Any) -> Any:
            return _json(200, live())

        async def health_live(request: Any) -> Any:
            return _json(200, {"ok": True})

        async def health_ready(request: Any) -> Any:
            ok, payload = ready()
            return _json(200 if ok else 503, payload)

        table = [
            Route("/health", health, methods=["GET"]),
            Route("/health/live", health_live, methods=["GET"]),
            Route("/health/ready", health_ready, methods=["GET"]),
        ]
        webhooks: dict[tuple[str, str], _WebhookEndpoint] = {}
        for channel, route, methods in accepted:
            endpoint = _WebhookEndpoint(channel, route, max_body_bytes)
            # Also in Starlette's table: it answers 405 for other methods, HEAD for GET.
            table.append(Route(route.path, endpoint, methods=methods))
            for method in methods:
                webhooks[(method, route.path)] = endpoint
        return _Ingress(Starlette(routes=table), webhooks)

    return make, served


def _bind(bind: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    # proto must say TCP: asyncio turns Nagle off (TCP_NODELAY) only on sockets that do,
    # and without it every small response waits out the peer's delayed ACK (~40 ms).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((bind, port))
        sock.listen(256)
    except BaseException:
        sock.close()
        raise
    return sock


class HttpIngress:
    """Runs the app under uvicorn inside the caller's event loop; see :meth:`serving`."""

    def __init__(
        self,
        app: Any = None,
        *,
        make_app: Callable[[], Any] | None = None,
        bind: str = DEFAULT_BIND,
        port: int = 4030,
        routes: Sequence[str] = (),
        graceful_timeout: float = 5.0,
    ) -> None:
        if (app is None) == (make_app is None):
            raise TypeError("HttpIngress takes an app or make_app, not both")
        self.app = app
        self.make_app = make_app
        self.info = IngressInfo(bind, port, routes=tuple(routes))
        self.graceful_timeout = graceful_timeout

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[IngressInfo]:
        """Bind, serve in the background, and stop gracefully on exit.

        A bind failure is logged and recorded in ``info.error``; the block still runs, so
        the daemon keeps its other surfaces.
        """
        info = self.info
        try:
            sock = _bind(info.bind, info.port)
        except OSError as exc:
            info.error = (
                f"cannot listen on {info.bind}:{info.port} ({exc.strerror or exc}); set "
                f"[fermix_web] port to a free port (or stop what holds it), and check "
                f"{BIND_ENV}"
            )
            log.error("HTTP ingress disabled: %s", info.error)
            yield info
            return
        try:
            host, port = sock.getsockname()[:2]
            shown = f"[{host}]" if ":" in host else host
            info.port = port
            info.url = f"http://{shown}:{port}"
            log.info("HTTP ingress on %s (%s)", info.url, ", ".join(info.routes) or "health")
            done = anyio.Event()
            stopping = False
            server: Any = None
            if self.app is not None:
                server = _quiet_server(self.app, self.graceful_timeout)

            async def serve() -> None:
                nonlocal server
                try:
                    if server is None:
                        # Lazy: the socket already accepts (the kernel queues connections),
                        # the web stack is imported when the first one arrives, off the loop.
                        await anyio.wait_readable(sock)
                        server = await anyio.to_thread.run_sync(self._lazy_server)
                        server.should_exit = stopping
                    await server.serve(sockets=[sock])
                finally:
                    done.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(serve)
                try:
                    yield info
                finally:
                    stopping = True
                    if server is None:
                        tg.cancel_scope.cancel()  # nobody connected: nothing to drain
                    else:
                        server.should_exit = True
                        with (
                            anyio.CancelScope(shield=True),
                            anyio.move_on_after(self.graceful_timeout + 2),
                        ):
                            await done.wait()
                    tg.cancel_scope.cancel()
        finally:
            sock.close()

    def _lazy_server(self) -> Any:
        assert self.make_app is not None
        return _quiet_server(self.make_app(), self.graceful_timeout)


def http_implementation() -> str:
    """uvicorn's HTTP/1.1 protocol: ``"httptools"`` when it is installed, else ``"h11"``."""
    from importlib.util import find_spec

    return "httptools" if find_spec("httptools") is not None else "h11"


def _quiet_server(app: Any, graceful_timeout: float) -> Any:
    """uvicorn's server without its signal handling: the daemon owns SIGTERM/SIGINT
    (uvicorn would replace the handlers and re-raise the signal when it stops)."""
    import uvicorn

    class QuietServer(uvicorn.Server):
        @contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    config = uvicorn.Config(
        app,
        # httptools (llhttp, in C) parses a request in a fraction of h11's time; h11 stays
        # the fallback where the wheel is missing. Both are imported here, with the first
        # connection, so an idle daemon holds neither.
        http=http_implementation(),
        # Longer than any webhook sender's or proxy's idle timeout (nginx 75 s, load
        # balancers 60 s, httpx 5 s): the client always closes an idle connection first.
        # With uvicorn's 5 s a sender idle for 5 s could reuse the connection just as the
        # server closed it, and its request was reset (ReadError) without being read.
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        lifespan="off",
        # Webhooks are plain HTTP: no WebSocket protocol is loaded (an upgrade request is
        # answered as HTTP, and no route accepts one anyway).
        ws="none",
        log_config=None,
        access_log=False,
        server_header=False,
        timeout_graceful_shutdown=max(1, int(graceful_timeout)),
    )
    return QuietServer(config)
