"""The base every HTTP adapter builds on: one client, explicit timeouts, uniform errors.

Connection policy from the spec: idle keep-alive connections older than 15 s are discarded
at checkout (``keepalive_expiry``); a connection found closed is retried once, and only
when no response data had arrived; timeouts are never retried here — the agent loop owns
that decision, with the chunk count this layer measured.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from fermix_core.provider import ErrorKind, Provider, ProviderError, ProviderSettings
from fermix_core.specs import ModelInfo, ProviderSpec

from fermix_providers.http.errors import error_from_exception, error_from_response
from fermix_providers.http.sse import SSEEvent, StreamStats, iter_sse

if TYPE_CHECKING:  # pragma: no cover - typing only
    import httpx

KEEPALIVE_EXPIRY_SECONDS = 15.0
USER_AGENT = "fermix/0.1"


def _httpx() -> Any:
    """httpx, for the ``except`` clauses: evaluated only when a call raised, so the
    service's providers' client (:class:`fermix_core.directclient.DirectClient`, which
    raises httpx's exceptions) never makes a one-off ask import it."""
    import httpx

    return httpx


@dataclass(frozen=True)
class Timeouts:
    """An adapter's HTTP timeouts in seconds."""

    connect: float = 10.0
    #: Longest silence between two received chunks (or before the first one).
    read: float = 120.0
    write: float = 30.0
    pool: float = 10.0

    def httpx(self) -> httpx.Timeout:
        return _httpx().Timeout(self.phases())

    def phases(self) -> tuple[float, float, float, float]:
        """``(connect, read, write, pool)``: a ``timeout=`` both httpx and the direct client
        read."""
        return (self.connect, self.read, self.write, self.pool)


_VERSION = re.compile(r"/v\d+$")


def normalize_base_url(url: str, default: str | None) -> str:
    """Accept a base URL with or without its API version segment (what can be decided
    without asking the server).

    Vendors document both forms (``ANTHROPIC_BASE_URL=https://api.anthropic.com``) while
    the wires append paths after the version (``/messages``, ``/chat/completions``). The
    default's own host given bare gets the default's path (``https://openrouter.ai`` →
    ``…/api/v1``); a doubled version segment (``…/v1/v1``) is collapsed. Any other URL is
    kept as written: see :func:`versioned_fallback` for a bare host elsewhere.
    """
    base = url.strip().rstrip("/")
    version = _VERSION.search(urlsplit(default).path) if default else None
    if version is None or default is None:
        return base
    parts, own = urlsplit(base), urlsplit(default)
    if parts.path in ("", "/") and (parts.hostname, parts.port) == (own.hostname, own.port):
        return base + own.path.rstrip("/")
    segment = version.group(0)
    while base.endswith(segment + segment):
        base = base[: -len(segment)]
    return base


def versioned_fallback(base: str, default: str | None) -> str | None:
    """For a base URL that is only a host (``http://gpu-box:11434``): the same host with the
    default's version segment, tried once if the bare form answers 404. Servers that serve
    the API at the root keep working; ones that serve it under ``/v1`` work too."""
    version = _VERSION.search(urlsplit(default).path) if default else None
    if version is None or urlsplit(base).path not in ("", "/"):
        return None
    return base.rstrip("/") + version.group(0)


def new_client() -> httpx.AsyncClient:
    """A client with the spec's keep-alive policy; the runtime shares one across adapters."""
    httpx = _httpx()
    return httpx.AsyncClient(
        limits=httpx.Limits(keepalive_expiry=KEEPALIVE_EXPIRY_SECONDS),
        headers={"user-agent": USER_AGENT},
        follow_redirects=False,
    )


def _retryable() -> tuple[type[BaseException], ...]:
    """Failures of a connection found closed: sent once more if no response byte came."""
    httpx = _httpx()
    return (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)


class HttpProvider(Provider):
    """Shared state and request helpers; subclasses implement ``chat`` for their wire."""

    counts_chunks = True
    timeouts = Timeouts()

    def __init__(self, spec: ProviderSpec, settings: ProviderSettings) -> None:
        self.spec = spec
        self.settings = settings
        self.name = spec.name
        base = settings.base_url or spec.default_base_url
        if not base:
            raise ProviderError(
                ErrorKind.INVALID_REQUEST,
                f"{spec.name} has no base_url; set [fermix_core.providers.{spec.name}] base_url",
                provider=spec.name,
            )
        self.base_url = normalize_base_url(base, spec.default_base_url)
        #: Tried once when the bare host answers 404 (then kept when it works).
        self._fallback_base = versioned_fallback(self.base_url, spec.default_base_url)
        self._owns_client = settings.http is None
        self.client: httpx.AsyncClient = settings.http or new_client()

    # ------------------------------------------------------------------ catalog

    def model_id(self, requested: str | None) -> str:
        model = requested or self.settings.default_model or self.spec.default_model
        if not model:
            raise ProviderError(
                ErrorKind.INVALID_REQUEST,
                f"no model chosen for {self.name}; set default_model",
                provider=self.name,
            )
        return model

    def model_info(self, model: str | None) -> ModelInfo | None:
        wanted = self.model_id(model)
        return next((m for m in self.spec.models if m.id == wanted), None)

    def vision(self, model: str | None = None) -> bool:
        if self.model_id(model) in self.settings.vision_models:
            return True  # the operator's vision_models: beyond what the catalog knows
        info = self.model_info(model)
        return bool(info and info.vision)

    # ------------------------------------------------------------------ requests

    def headers(self) -> dict[str, str]:
        """Per-request headers (auth); subclasses extend."""
        headers = {"content-type": "application/json"}
        if self.settings.api_key:
            headers["authorization"] = f"Bearer {self.settings.api_key}"
        return headers

    async def post_json(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """A buffered POST. Buffered calls cannot prove a timeout was pre-response."""
        response = await self._send("POST", path, body, stream=False, stats=StreamStats())
        if response.status_code >= 400:
            raise error_from_response(
                self.name,
                response.status_code,
                response.headers,
                response.text,
                url=self._shown_url(path),
            )
        try:
            return response.json()
        except ValueError as exc:
            raise ProviderError(
                ErrorKind.SERVER_ERROR,
                f"{self.name} answered with a body that is not JSON",
                provider=self.name,
                status=response.status_code,
            ) from exc

    @asynccontextmanager
    async def stream_sse(
        self, path: str, body: Mapping[str, Any], stats: StreamStats
    ) -> AsyncIterator[AsyncIterator[SSEEvent]]:
        """POST and iterate SSE events; transport failures become classified errors."""
        response: httpx.Response | None = None
        try:
            response = await self._send("POST", path, body, stream=True, stats=stats)
            if response.status_code >= 400:
                text = (await response.aread()).decode("utf-8", "replace")
                raise error_from_response(
                    self.name,
                    response.status_code,
                    response.headers,
                    text,
                    url=self._shown_url(path),
                )
            yield self._events(response, stats)
        finally:
            if response is not None:
                await response.aclose()

    async def _events(
        self, response: httpx.Response, stats: StreamStats
    ) -> AsyncIterator[SSEEvent]:
        try:
            async for event in iter_sse(response.aiter_raw(), stats):
                yield event
        except _httpx().HTTPError as exc:
            raise error_from_exception(
                self.name,
                exc,
                chunks_seen=stats.chunks,
                counts_chunks=self.counts_chunks,
                visible_output=stats.visible,
            ) from exc

    async def _send(
        self, method: str, path: str, body: Mapping[str, Any], *, stream: bool, stats: StreamStats
    ) -> httpx.Response:
        response = await self._send_once(method, path, body, stream=stream, stats=stats)
        fallback = self._fallback_base
        if response.status_code != 404 or fallback is None or path.startswith("http"):
            return response
        # A bare host that is not the API root: try the version segment once, and keep
        # whichever form the server answered (the error then names the URL as written).
        self._fallback_base = None
        configured, self.base_url = self.base_url, fallback
        retried = await self._send_once(method, path, body, stream=stream, stats=stats)
        if retried.status_code == 404:
            await retried.aclose()
            self.base_url = configured
            return response
        await response.aclose()
        return retried

    async def _send_once(
        self, method: str, path: str, body: Mapping[str, Any], *, stream: bool, stats: StreamStats
    ) -> httpx.Response:
        url = path if path.startswith("http") else f"{self.base_url}{path}"
        content = json.dumps(body, separators=(",", ":")).encode()
        attempts = 2  # a connection found closed before any response data: one retry
        for attempt in range(attempts):
            request = self.client.build_request(
                method, url, content=content, headers=self.headers(), timeout=self.timeouts.phases()
            )
            try:
                return await self.client.send(request, stream=stream)
            except _retryable() as exc:
                if attempt + 1 < attempts and stats.chunks == 0:
                    continue
                raise error_from_exception(
                    self.name,
                    exc,
                    chunks_seen=stats.chunks,
                    counts_chunks=self.counts_chunks and stream,
                    url=self._shown_url(path),
                ) from exc
            except _httpx().HTTPError as exc:
                raise error_from_exception(
                    self.name,
                    exc,
                    chunks_seen=stats.chunks,
                    counts_chunks=self.counts_chunks and stream,
                    url=self._shown_url(path),
                ) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _shown_url(self, path: str) -> str:
        """The endpoint of *path* as it may appear in a message: no query, no credentials."""
        url = path if path.startswith("http") else f"{self.base_url}{path}"
        parts = urlsplit(url)
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))

    async def aclose(self) -> None:
        if self._owns_client and not self.client.is_closed:
            await self.client.aclose()
