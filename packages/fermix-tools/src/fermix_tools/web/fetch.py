"""``web_fetch``: one known, server-rendered URL to readable text (or its JSON, verbatim).

Every hop goes through the :class:`~fermix_tools.web.ssrf.SSRFGuard` and connects to the
address the guard vetted, with the original ``Host`` header and TLS server name: the request
URL carries the IP, so nothing resolves the name a second time. Redirects are followed by
hand — each ``Location`` is vetted like the first URL — and bounded.

Sizes are capped twice: the body is read (and decompressed, by this module, so a small gzip
bomb cannot inflate past the cap) up to ``max_bytes``, and the text handed to the model is
cut at the caller's ``max_chars``. A whole fetch has one deadline, so a server that trickles
bytes cannot hold a turn hostage.
"""

from __future__ import annotations

import codecs
import ipaddress
import json
import re
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fermix_core.specs import ToolSpec
from fermix_core.tool import Tool, ToolContext, ToolError, ToolOutput
from pydantic import BaseModel, ConfigDict, Field

from fermix_tools.web.ssrf import SSRFGuard, Target, parse_ip_literal

if TYPE_CHECKING:  # pragma: no cover - typing only
    import ssl

    import httpx

__all__ = [
    "DEFAULT_MAX_BYTES",
    "FetchedPage",
    "WebFetch",
    "WebFetchArgs",
    "WebFetcher",
    "render_page",
]

DEFAULT_MAX_BYTES = 3_000_000
DEFAULT_MAX_CHARS = 20_000
MAX_REDIRECTS = 5
CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 20.0
TOTAL_TIMEOUT = 45.0
USER_AGENT = "Mozilla/5.0 (compatible; Fermix/0.1; +https://fermix.sh)"
ACCEPT = "text/html,application/xhtml+xml,application/json;q=0.9,text/plain;q=0.8,*/*;q=0.1"
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)


class WebFetchArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(
        min_length=1,
        max_length=4096,
        description="The absolute http(s) URL of one server-rendered page or JSON endpoint.",
    )
    max_chars: int = Field(
        default=DEFAULT_MAX_CHARS,
        ge=500,
        le=100_000,
        description="Most characters of text to return; longer pages are cut with a note.",
    )


@dataclass
class FetchedPage:
    """What one fetch brought back, before it is turned into text."""

    url: str
    final_url: str
    status: int
    content_type: str
    charset: str | None
    body: bytes
    truncated: bool
    redirects: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- decoding


class _Inflater:
    """Content-Encoding decoding with an output cap (``zlib``'s ``max_length``)."""

    def __init__(self, encoding: str) -> None:
        codings = [c.strip().lower() for c in encoding.split(",") if c.strip()]
        codings = [c for c in codings if c != "identity"]
        if len(codings) > 1:
            raise ToolError(f"The server used stacked encodings ({encoding}); cannot read it.")
        self.kind = codings[0] if codings else "identity"
        if self.kind in ("gzip", "x-gzip"):
            self._z: Any = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif self.kind == "deflate":
            self._z = zlib.decompressobj(zlib.MAX_WBITS)
        elif self.kind == "identity":
            self._z = None
        else:
            raise ToolError(
                f"The server sent {self.kind}-encoded content, which web_fetch cannot read."
            )
        self._started = False

    def feed(self, data: bytes, room: int) -> tuple[bytes, bool]:
        """Up to *room* decoded bytes from *data*; the flag says output was cut at *room*."""
        if self._z is None:
            return data[:room], len(data) > room
        try:
            out = self._z.decompress(data, room)
        except zlib.error:
            if self.kind == "deflate" and not self._started:
                # Some servers send raw deflate without the zlib header the RFC asks for.
                self._z = zlib.decompressobj(-zlib.MAX_WBITS)
                self._started = True
                return self.feed(data, room)
            raise ToolError("The server sent a corrupt compressed body.") from None
        self._started = True
        return out, bool(self._z.unconsumed_tail)


def _content_type(response: httpx.Response) -> tuple[str, str | None]:
    raw = response.headers.get("content-type", "")
    media, _, params = raw.partition(";")
    charset = None
    for param in params.split(";"):
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            charset = value.strip().strip("\"'")
    return media.strip().lower(), charset


def _known_codec(name: str | None) -> str | None:
    if not name:
        return None
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


def _decode(page: FetchedPage, kind: str) -> str:
    codec = _known_codec(page.charset)
    if codec is None and kind == "html":
        match = _META_CHARSET.search(page.body[:4096])
        codec = _known_codec(match.group(1).decode("ascii", "ignore")) if match else None
    return page.body.decode(codec or "utf-8", errors="replace")


def _kind(content_type: str, body: bytes) -> str | None:
    """``html``, ``json``, ``text``, or ``None`` for content web_fetch does not read."""
    if content_type in ("text/html", "application/xhtml+xml"):
        return "html"
    if content_type.endswith(("/json", "+json")) or content_type == "text/json":
        return "json"
    if content_type.startswith("text/") or content_type.endswith(("/xml", "+xml")):
        return "text"
    if content_type in ("", "application/octet-stream", "binary/octet-stream"):
        head = body[:512].lstrip()
        if head[:1] in (b"{", b"["):
            return "json"
        if head[:1] == b"<":
            return "html"
        if head and b"\x00" not in head:
            try:
                head.decode("utf-8")
            except UnicodeDecodeError:
                return None
            return "text"
    return None


# --------------------------------------------------------------------------- fetching


def _same_host(logical: httpx.URL, target: Target) -> bool:
    """Whether httpx reads the same host from the URL as the guard vetted."""
    seen = logical.raw_host.decode("ascii", "replace").strip("[]").rstrip(".").lower()
    if not target.literal:
        return seen == target.host
    try:
        return parse_ip_literal(seen) == ipaddress.ip_address(target.host)
    except (ToolError, ValueError):
        return False


def _host_header(target: Target) -> str:
    host = f"[{target.host}]" if ":" in target.host else target.host
    default = 443 if target.scheme == "https" else 80
    return host if target.port == default else f"{host}:{target.port}"


class WebFetcher:
    """Fetches one URL through an :class:`SSRFGuard`, redirects included, within caps."""

    def __init__(
        self,
        guard: SSRFGuard | None = None,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_redirects: int = MAX_REDIRECTS,
        total_timeout: float = TOTAL_TIMEOUT,
        connect_timeout: float = CONNECT_TIMEOUT,
        read_timeout: float = READ_TIMEOUT,
        user_agent: str = USER_AGENT,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.guard = guard or SSRFGuard()
        #: Trust store override (tests trust their own CA); ``None`` is the system default.
        self.ssl_context = ssl_context
        self.max_bytes = max_bytes
        self.max_redirects = max_redirects
        self.total_timeout = total_timeout
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.user_agent = user_agent

    async def fetch(self, url: str) -> FetchedPage:
        import anyio
        import httpx

        timeout = httpx.Timeout(self.read_timeout, connect=self.connect_timeout)
        try:
            with anyio.fail_after(self.total_timeout):
                # One client per fetch, no pooling: connections are keyed by the pinned IP,
                # and a pooled TLS connection must never serve another host name.
                async with httpx.AsyncClient(
                    verify=self.ssl_context if self.ssl_context is not None else True,
                    timeout=timeout,
                    follow_redirects=False,
                    trust_env=False,
                    limits=httpx.Limits(max_keepalive_connections=0),
                ) as client:
                    return await self._follow(client, url)
        except TimeoutError:
            raise ToolError(
                f"Fetching {url} took longer than {self.total_timeout:.0f} s and was stopped; "
                "the site is slow or stalled — try again later or use another source."
            ) from None

    async def _follow(self, client: httpx.AsyncClient, url: str) -> FetchedPage:
        import httpx

        current = url
        redirects: list[str] = []
        while True:
            target = await self.guard.vet(current)
            response = await self._send(client, target, current)
            try:
                if response.status_code in _REDIRECTS and response.headers.get("location"):
                    if len(redirects) >= self.max_redirects:
                        raise ToolError(
                            f"{url} redirected more than {self.max_redirects} times; "
                            "fetch the final address directly if you know it."
                        )
                    location = response.headers["location"]
                    try:
                        current = str(httpx.URL(current).join(location))
                    except httpx.InvalidURL:
                        raise ToolError(
                            f"{current} redirected to an invalid address {location!r}."
                        ) from None
                    redirects.append(current)
                    continue
                body, truncated = await self._read(response, current)
                media, charset = _content_type(response)
                return FetchedPage(
                    url=url,
                    final_url=current,
                    status=response.status_code,
                    content_type=media,
                    charset=charset,
                    body=body,
                    truncated=truncated,
                    redirects=redirects,
                )
            finally:
                await response.aclose()

    async def _send(self, client: httpx.AsyncClient, target: Target, url: str) -> httpx.Response:
        import httpx

        try:
            logical = httpx.URL(url)
        except httpx.InvalidURL as exc:
            raise ToolError(f"Not a valid URL: {url!r} ({exc}).") from None
        if not _same_host(logical, target):
            # Two URL parsers disagreeing about the host is how guards get bypassed.
            raise ToolError(f"Refused to fetch {url}: its host is ambiguous; write it plainly.")
        headers = {
            "Host": _host_header(target),
            "User-Agent": self.user_agent,
            "Accept": ACCEPT,
            "Accept-Encoding": "gzip, deflate",
            "Accept-Language": "en;q=0.9, *;q=0.5",
        }
        extensions: dict[str, Any] = {}
        if target.scheme == "https" and not target.literal:
            extensions["sni_hostname"] = target.host
        failure: Exception | None = None
        for address in target.addresses:
            pinned = logical.copy_with(host=address)
            request = client.build_request("GET", pinned, headers=headers, extensions=extensions)
            try:
                return await client.send(request, stream=True)
            except httpx.ConnectError as exc:
                if "CERTIFICATE_VERIFY_FAILED" in str(exc):
                    raise ToolError(
                        f"{target.host} presented a TLS certificate that is not valid for it; "
                        "not fetching. Check the address."
                    ) from None
                failure = exc  # try the next vetted address
            except httpx.TimeoutException:
                raise ToolError(f"{url} did not answer in time; try again later.") from None
            except httpx.HTTPError as exc:
                raise ToolError(
                    f"Fetching {url} failed: {type(exc).__name__}; the site may be down."
                ) from None
        detail = type(failure).__name__ if failure else "no address"
        raise ToolError(f"Could not connect to {target.host} ({detail}); the site may be down.")

    async def _read(self, response: httpx.Response, url: str) -> tuple[bytes, bool]:
        import httpx

        inflater = _Inflater(response.headers.get("content-encoding", ""))
        chunks: list[bytes] = []
        size = 0
        raw_budget = self.max_bytes * 4  # bounds work on bodies that decode to little
        try:
            async for raw in response.aiter_raw():
                raw_budget -= len(raw)
                out, cut = inflater.feed(raw, self.max_bytes - size)
                chunks.append(out)
                size += len(out)
                if cut or size >= self.max_bytes or raw_budget <= 0:
                    return b"".join(chunks), True
        except httpx.TimeoutException:
            raise ToolError(f"{url} stopped sending; try again later.") from None
        except httpx.HTTPError as exc:
            raise ToolError(
                f"The connection to {url} broke while reading ({type(exc).__name__}); try again."
            ) from None
        return b"".join(chunks), False


# --------------------------------------------------------------------------- rendering


def _status_error(page: FetchedPage) -> ToolError:
    status = page.status
    if status in (401, 403):
        hint = "the site refused access (login or bot protection); try the browser tool"
    elif status == 404:
        hint = "the page does not exist; check the URL or search for it"
    elif status == 410:
        hint = "the page was removed"
    elif status == 429:
        hint = "the site is rate-limiting; wait before trying again"
    elif status >= 500:
        hint = "the site has a server error; try again later"
    else:
        hint = "the request was not accepted"
    return ToolError(f"HTTP {status} from {page.final_url}: {hint}.")


def render_page(page: FetchedPage, max_chars: int) -> ToolOutput:
    """Turn a fetched page into what the model reads, or raise the error it should see."""
    from fermix_tools.web.readable import html_to_text

    if page.status >= 400:
        raise _status_error(page)
    if page.status >= 300:
        raise ToolError(f"{page.final_url} answered {page.status} without a usable redirect.")
    kind = _kind(page.content_type, page.body)
    if kind is None:
        raise ToolError(
            f"{page.final_url} is {page.content_type or 'binary data'}, not a readable page; "
            "web_fetch reads HTML, JSON and text only."
        )
    text = _decode(page, kind)
    title = ""
    if kind == "html":
        readable = html_to_text(text, page.final_url)
        title, text = readable.title, readable.text
    elif kind == "json" and page.truncated:
        text += "\n[the JSON is incomplete: the response exceeded the size cap]"
    cut = len(text) > max_chars
    if cut:
        rest = len(text) - max_chars
        text = text[:max_chars].rstrip() + f"\n\n[truncated: {rest} more characters not shown]"
    header = [f"# {title}"] if title else []
    header.append(f"URL: {page.final_url}")
    if page.redirects:
        header.append(f"(redirected from {page.url})")
    body = text or "(the page has no readable text; it may need JavaScript — use the browser tool)"
    return ToolOutput(
        content="\n".join(header) + "\n\n" + body,
        data={
            "url": page.url,
            "final_url": page.final_url,
            "status": page.status,
            "content_type": page.content_type,
            "format": kind,
            "title": title,
            "truncated": cut or page.truncated,
            "redirects": list(page.redirects),
        },
    )


class WebFetch(Tool[WebFetchArgs]):
    """The ``web_fetch`` tool. *fetcher* is injectable so tests can hand it a loopback guard."""

    def __init__(self, spec: ToolSpec, *, fetcher: WebFetcher | None = None) -> None:
        super().__init__(spec)
        self.fetcher = fetcher or WebFetcher()

    async def run(self, args: WebFetchArgs, ctx: ToolContext) -> ToolOutput:
        page = await self.fetcher.fetch(args.url.strip())
        output = render_page(page, args.max_chars)
        if output.data.get("format") == "json":
            # Valid JSON stays byte-for-byte what the endpoint served; only flag bad JSON.
            try:
                json.loads(_decode(page, "json"))
            except ValueError:
                data = {**output.data, "json_valid": False}
                output = output.model_copy(update={"data": data})
        return output
