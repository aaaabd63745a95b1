"""The providers' HTTP client of a service: their requests straight onto the HTTP/1.1 pool.

A provider adapter makes one kind of call — a ``POST`` of a JSON body to a fixed endpoint,
read whole or streamed as server-sent events — through four methods of
``httpx.AsyncClient`` (``build_request``, ``send``, ``aclose``, ``is_closed``) and five
of ``httpx.Response`` (``status_code``, ``headers``, ``aread``/``text``/``json``,
``aiter_raw``, ``aclose``). :class:`DirectClient` serves exactly those calls on
:class:`fermix_core.http1wire.Http1Pool`, without httpx: importing httpx and the standard
library modules it brings (``email``, ``http.client``, ``urllib.request``,
``http.cookiejar``, ``mimetypes`` …) was about a twelfth of a one-off ``fermix ask``, and
its request and response models a good part of the per-call cost.

Everything else is httpx's, unchanged: any other method or attribute (``post`` for speech
to text, ``get``, ``stream`` …), a request with anything but bytes content and headers
(``json=``, ``params=``, ``files=``, cookies, auth), a URL that is not plain ASCII
``http``/``https`` without credentials, and any event loop but asyncio's go to the full
client (:func:`fermix_core.httpclient.runtime_client` with the lean transport), built on
first use. Errors are httpx's exceptions (see :mod:`fermix_core.http1wire`), so a
provider's handling does not depend on which client served the call.

What goes on the wire is what httpx sends for the same call: ``Host``, ``Accept: */*``,
``Accept-Encoding: gzip, deflate``, ``Connection: keep-alive``, the user agent, the
request's headers, ``Content-Length``; a ``gzip``/``deflate`` answer read whole is decoded
as httpx decodes it (``aiter_raw`` gives the bytes as they came, as httpx's does). No
redirects are followed, no proxy is read from the environment and no cookies are kept,
as with the runtime client this replaces for providers.
"""

from __future__ import annotations

import codecs
import json
import re
import zlib
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from fermix_core.http1wire import DEFAULT_PORTS, Body, Http1Pool, asyncio_loop, head, http_error

__all__ = ["DirectClient", "DirectRequest", "DirectResponse", "Headers"]

#: httpx's default when a call gives no timeout: five seconds for each phase.
DEFAULT_TIMEOUT = 5.0
#: The characters a request target may hold as written (RFC 3986's unreserved, reserved
#: and ``%``); anything else is left to httpx, which percent-encodes it.
_PLAIN_TARGET = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@/%?]*")
_PLAIN_HOST = re.compile(r"[A-Za-z0-9\-._]+|\[[0-9A-Fa-f:.]+\]")
_CHARSET = re.compile(r"charset=[\"']?([\w.:-]+)", re.IGNORECASE)
_PHASES = ("connect", "read", "write", "pool")
#: ``timeout=`` not given: the client's default, as in httpx.
_UNSET: Any = object()


class Headers(Mapping[str, str]):
    """Response headers as httpx shows them: names case-insensitive, listed in lower case,
    and a header sent more than once read as its values joined by ``", "``."""

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        self.raw = raw
        merged: dict[str, str] = {}
        for name, value in raw:
            key = name.decode("latin-1").lower()
            text = value.decode("latin-1")
            merged[key] = f"{merged[key]}, {text}" if key in merged else text
        self._merged = merged

    def __getitem__(self, name: str) -> str:
        return self._merged[name.lower()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._merged

    def __iter__(self) -> Iterator[str]:
        return iter(self._merged)

    def __len__(self) -> int:
        return len(self._merged)

    def get_list(self, name: str) -> list[str]:
        """Every value of *name*, in the order received."""
        wanted = name.lower().encode("latin-1")
        return [v.decode("latin-1") for n, v in self.raw if n.lower() == wanted]

    def __repr__(self) -> str:
        return f"Headers({list(self._merged)!r})"


class DirectRequest:
    """A request :class:`DirectClient` sends itself (``method`` and ``url`` as httpx's)."""

    __slots__ = ("blob", "content", "method", "origin", "timeouts", "url")

    def __init__(
        self,
        method: str,
        url: str,
        origin: tuple[str, str, int],
        blob: tuple[bytes, bool, bool],
        content: bytes,
        timeouts: dict[str, float | None],
    ) -> None:
        self.method = method
        self.url = url
        self.origin = origin
        self.blob = blob
        self.content = content
        self.timeouts = timeouts

    def __repr__(self) -> str:
        return f"<DirectRequest({self.method!r}, {self.url!r})>"


class DirectResponse:
    """An answer: its head at once, its body streamed (:meth:`aiter_raw`) or read whole."""

    def __init__(self, request: DirectRequest, connection: Any, body: Any) -> None:
        self.request = request
        self.status_code: int = connection.status
        self.reason_phrase = connection.reason.strip().decode("latin-1")
        self.headers = Headers(connection.headers)
        self._body = body
        self._content: bytes | None = None
        self.is_closed = False

    def __repr__(self) -> str:
        return f"<DirectResponse [{self.status_code} {self.reason_phrase}]>"

    @property
    def content(self) -> bytes:
        if self._content is None:
            raise RuntimeError("the response body has not been read (await response.aread())")
        return self._content

    @property
    def encoding(self) -> str:
        found = _CHARSET.search(self.headers.get("content-type", ""))
        if found:
            try:
                return codecs.lookup(found.group(1)).name
            except LookupError:
                pass
        return "utf-8"

    @property
    def text(self) -> str:
        return self.content.decode(self.encoding, errors="replace")

    def json(self, **kwargs: Any) -> Any:
        return json.loads(self.content, **kwargs)

    async def aread(self) -> bytes:
        """The whole body, decoded from ``gzip``/``deflate``; the connection goes back to the
        pool."""
        if self._content is None:
            pieces = [piece async for piece in self.aiter_raw()]
            self._content = _decoded(b"".join(pieces), self.headers.get("content-encoding", ""))
        return self._content

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive (not decoded), then the response closes."""
        if self.is_closed:
            raise RuntimeError("the response is closed; its body can no longer be read")
        try:
            async for piece in self._body:
                yield piece
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        if not self.is_closed:
            self.is_closed = True
            await self._body.aclose()


def _decoded(data: bytes, encoding: str) -> bytes:
    """*data* without the content codings httpx decodes (``identity`` and unknown ones are
    left as they are, as httpx does)."""
    for coding in reversed([c.strip().lower() for c in encoding.split(",") if c.strip()]):
        try:
            if coding in ("gzip", "x-gzip"):
                data = zlib.decompress(data, zlib.MAX_WBITS | 16)
            elif coding == "deflate":
                try:
                    data = zlib.decompress(data)
                except zlib.error:
                    data = zlib.decompress(data, -zlib.MAX_WBITS)  # raw deflate, no header
        except zlib.error as exc:
            raise http_error(
                "DecodingError", f"{coding} body could not be decoded: {exc}"
            ) from None
    return data


def _timeouts(timeout: Any) -> dict[str, float | None] | None:
    """httpx's ``timeout=`` forms as the wire's per-phase dict (``None`` for one it does
    not know: the full client then reads it)."""
    if timeout is _UNSET:
        return dict.fromkeys(_PHASES, DEFAULT_TIMEOUT)
    if timeout is None:
        return dict.fromkeys(_PHASES)
    if isinstance(timeout, int | float) and not isinstance(timeout, bool):
        return dict.fromkeys(_PHASES, float(timeout))
    if isinstance(timeout, tuple) and len(timeout) == 4:
        return dict(zip(_PHASES, timeout, strict=True))
    if all(hasattr(timeout, phase) for phase in _PHASES):  # an httpx.Timeout
        return {phase: getattr(timeout, phase) for phase in _PHASES}
    return None


class DirectClient:
    """Provider calls on the HTTP/1.1 pool; every other use goes to the full httpx client
    *full* builds (see the module)."""

    def __init__(
        self,
        full: Callable[[], Any],
        *,
        ssl_context: Any,
        user_agent: str,
        max_connections: int = 100,
        keepalive_expiry: float | None = 15.0,
    ) -> None:
        self._build_full = full
        self._full: Any = None
        self.user_agent = user_agent.encode("ascii")
        self.pool = Http1Pool(
            ssl_context=ssl_context,
            max_connections=max_connections,
            keepalive_expiry=keepalive_expiry,
        )
        self._closed = False

    @property
    def full(self) -> Any:
        """The httpx client for what this one does not send itself (built on first use)."""
        if self._full is None:
            if self._closed:
                raise RuntimeError("the HTTP client is closed")
            self._full = self._build_full()
        return self._full

    @property
    def full_built(self) -> bool:
        return self._full is not None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.full, name)

    @property
    def is_closed(self) -> bool:
        return self._closed

    def build_request(
        self,
        method: str,
        url: Any,
        *,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: Any = _UNSET,
        **other: Any,
    ) -> Any:
        """A :class:`DirectRequest` for a plain call; an ``httpx.Request`` from the full
        client for anything else."""
        request = None
        timeouts = _timeouts(timeout)
        if not other and timeouts is not None and type(url) is str and asyncio_loop() is not None:
            request = self._direct(method, url, content or b"", headers or {}, timeouts)
        if request is None:
            if timeout is not _UNSET:
                other["timeout"] = timeout
            return self.full.build_request(method, url, content=content, headers=headers, **other)
        return request

    def _direct(
        self,
        method: str,
        url: str,
        content: bytes,
        headers: Mapping[str, str],
        timeouts: dict[str, float | None],
    ) -> DirectRequest | None:
        if not url.isascii() or method.upper() in ("HEAD", "CONNECT"):
            return None
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            return None  # httpx says what is wrong with it
        scheme = parts.scheme.lower()
        netloc = parts.netloc
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        if (
            scheme not in DEFAULT_PORTS
            or "@" in netloc
            or not parts.hostname
            or not _PLAIN_HOST.fullmatch(netloc.rsplit(":", 1)[0] if port else netloc)
            or not _PLAIN_TARGET.fullmatch(target)
            or not target.startswith("/")
        ):
            return None
        host = parts.hostname
        default = DEFAULT_PORTS[scheme]
        shown = f"[{host}]" if ":" in host else host
        if port is not None and port != default:
            shown += f":{port}"
        lines: list[tuple[bytes, bytes]] = [
            (b"Host", shown.encode("ascii")),
            (b"Accept", b"*/*"),
            (b"Accept-Encoding", b"gzip, deflate"),
            (b"Connection", b"keep-alive"),
            (b"User-Agent", self.user_agent),
        ]
        replaced = {name.lower() for name in headers}
        lines = [line for line in lines if line[0].decode().lower() not in replaced]
        for name, value in headers.items():
            if not (name.isascii() and value.isascii()):
                return None  # httpx's error (it sends ASCII headers only)
            lines.append((name.encode("ascii"), value.encode("ascii")))
        method = method.upper()
        if "content-length" not in replaced and (content or method in ("POST", "PUT", "PATCH")):
            lines.append((b"Content-Length", str(len(content)).encode("ascii")))
        blob = head(method, target.encode("ascii"), lines)
        return DirectRequest(method, url, (scheme, host, port or default), blob, content, timeouts)

    async def send(self, request: Any, *, stream: bool = False, **other: Any) -> Any:
        """Send *request*; with ``stream=False`` the body is read before this returns."""
        if type(request) is not DirectRequest or other:
            return await self.full.send(request, stream=stream, **other)
        if self._closed:
            raise RuntimeError("the HTTP client is closed")
        loop = asyncio_loop()
        if loop is None:
            raise RuntimeError("a direct request is sent from the asyncio loop it was built on")
        connection = await self.pool.exchange(
            loop,
            request.origin,
            request.blob,
            request.content,
            None,
            request.timeouts,
            request,
        )
        body = Body(connection, request, request.timeouts["read"])
        response = DirectResponse(request, connection, body)
        if not stream:
            try:
                await response.aread()
            except BaseException:
                await response.aclose()
                raise
        return response

    async def aclose(self) -> None:
        self._closed = True
        await self.pool.aclose()
        if self._full is not None:
            await self._full.aclose()

    async def __aenter__(self) -> DirectClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
