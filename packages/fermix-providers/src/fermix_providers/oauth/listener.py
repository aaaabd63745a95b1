"""The loopback redirect listener: where the browser lands after the user approves a login.

It binds ``127.0.0.1`` only (RFC 8252 §7.3), so nothing off the machine can reach it, and it
answers exactly one thing usefully: ``GET <path>?code=…&state=<ours>``. Anything else — a
wrong path, a missing or foreign ``state``, a second callback — gets an error page and the
login keeps waiting, because another local process poking the port must not be able to end
(or hijack) the login. Only a callback carrying our ``state`` settles it, with the code or
with the issuer's refusal.
"""

from __future__ import annotations

import errno
import html
import secrets
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
from anyio.abc import SocketAttribute, SocketStream, TaskGroup

from fermix_providers.oauth.errors import LoginError

__all__ = ["RedirectListener"]

LOOPBACK_HOST = "127.0.0.1"
#: A browser sends a small GET; anything bigger is not a redirect.
_MAX_HEAD_BYTES = 16 * 1024
#: A connection that does not finish its request line and headers in this long is dropped.
_HEAD_TIMEOUT_SECONDS = 10.0

_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>Fermix</title></head>
<body style="font-family: sans-serif; margin: 3em"><h2>{title}</h2><p>{body}</p></body></html>"""


class RedirectListener:
    """Serve the redirect URI on ``127.0.0.1:<port>`` (``0`` picks a free port) until settled."""

    def __init__(self, *, path: str, state: str, port: int = 0, host: str = LOOPBACK_HOST) -> None:
        if not path.startswith("/"):
            raise ValueError("the redirect path must start with '/'")
        self.path = path
        self.host = host
        self.requested_port = port
        self.port = 0
        self._state = state
        self._settled = anyio.Event()
        self._code: str | None = None
        self._error: LoginError | None = None
        self._listener: Any = None
        self._task_group: TaskGroup | None = None

    async def __aenter__(self) -> RedirectListener:
        try:
            self._listener = await anyio.create_tcp_listener(
                local_host=self.host, local_port=self.requested_port
            )
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE or "in use" in str(exc).lower():
                raise LoginError(
                    f"port {self.requested_port} on {self.host} is already in use, and the "
                    "issuer only accepts that redirect port. Close whatever holds it (an earlier "
                    "`fermix auth login` or another tool's login) and try again"
                ) from None
            raise LoginError(
                f"cannot listen on {self.host}:{self.requested_port} for the login redirect "
                f"({exc.strerror or exc})"
            ) from None
        self.port = self._listener.extra(SocketAttribute.local_port)  # noqa: S610
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        self._task_group.start_soon(self._listener.serve, self._serve)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._task_group is not None
        self._task_group.cancel_scope.cancel()
        await self._task_group.__aexit__(None, None, None)
        await self._listener.aclose()

    async def wait(self) -> str:
        """The authorization code, once a callback with our ``state`` arrives."""
        await self._settled.wait()
        if self._error is not None:
            raise self._error
        assert self._code is not None
        return self._code

    # ------------------------------------------------------------------ serving

    async def _serve(self, stream: SocketStream) -> None:
        try:
            with anyio.move_on_after(_HEAD_TIMEOUT_SECONDS):
                head = await _read_head(stream)
                if head is None:
                    return
                status, title, body = self._handle(head)
                await _respond(stream, status, title, body)
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            await stream.aclose()

    def _handle(self, head: bytes) -> tuple[int, str, str]:
        try:
            request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
            method, target, _version = request_line.split(" ", 2)
        except ValueError:
            return 400, "Bad request", "This is Fermix's login listener."
        if method != "GET":
            return 405, "Method not allowed", "This is Fermix's login listener."
        parts = urlsplit(target)
        if parts.path != self.path:
            return 404, "Not found", "This is Fermix's login listener."
        query = parse_qs(parts.query, keep_blank_values=True)

        def one(name: str) -> str | None:
            values = query.get(name)
            return values[0] if values else None

        state = one("state")
        if state is None or not secrets.compare_digest(state, self._state):
            return (
                400,
                "Login not recognised",
                "This sign-in was not started by the waiting <code>fermix auth login</code> "
                "(its state does not match). Start the login again from your terminal.",
            )
        if self._settled.is_set():
            return 409, "Already finished", "This login has already finished; close this tab."
        error = one("error")
        if error is not None:
            detail = one("error_description")
            reason = f"{error}: {detail}" if detail else error
            self._error = LoginError(
                f"the sign-in was not approved ({reason[:300]}); run the login again"
            )
            self._settled.set()
            return (
                400,
                "Sign-in not approved",
                f"The provider said: {html.escape(reason[:300])}. You can close this tab.",
            )
        code = one("code")
        if not code:
            return 400, "No code", "The redirect carried no authorization code."
        self._code = code
        self._settled.set()
        return (
            200,
            "Signed in",
            "Fermix received your login. You can close this tab and return to the terminal.",
        )


async def _read_head(stream: SocketStream) -> bytes | None:
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        try:
            chunk = await stream.receive()
        except anyio.EndOfStream:
            return None
        buffer += chunk
        if len(buffer) > _MAX_HEAD_BYTES:
            await _respond(stream, 431, "Request too large", "")
            return None
    return buffer


async def _respond(stream: SocketStream, status: int, title: str, body: str) -> None:
    page = _PAGE.format(title=html.escape(title), body=body).encode("utf-8")
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}.get(
        status, "Error"
    )
    head = (
        f"HTTP/1.1 {status} {reason}\r\n"
        "Content-Type: text/html; charset=utf-8\r\n"
        f"Content-Length: {len(page)}\r\n"
        "Cache-Control: no-store\r\n"
        "Referrer-Policy: no-referrer\r\n"
        "Connection: close\r\n\r\n"
    ).encode("latin-1")
    await stream.send(head + page)
