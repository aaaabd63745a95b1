"""What every ``web_search`` backend shares: the hit record, the error taxonomy, HTTP plumbing.

The error taxonomy exists for one decision: when a configured backend fails, does
``web_search`` fall back to DuckDuckGo? A backend that is *broken* (bad key, no credits,
unreachable, erroring) degrades — loudly — so the turn still gets results and the broken
backend stays visible; a request the backend rejected on its merits (``request``) does not,
because the same query would fail anywhere. Empty results are not an error at all.

A backend factory is called as ``factory(api_key=..., base_url=..., timeout=...)`` and
returns an object with ``async search(query, *, max_results) -> list[SearchHit]``. The
``base_url`` override is how tests point a backend at a loopback server. Error messages
carry the HTTP status, never the response body or the key.
"""

from __future__ import annotations

import html
import re
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

if TYPE_CHECKING:  # pragma: no cover - typing only
    import httpx

__all__ = [
    "DEGRADING_KINDS",
    "ErrorKind",
    "HttpBackend",
    "SearchBackendError",
    "SearchHit",
    "clean_text",
]

ErrorKind = Literal[
    "auth",
    "credits",
    "missing_key",
    "rate_limit",
    "transport",
    "server",
    "bad_response",
    "unavailable",
    "request",
]

#: Failures that mean "this backend is broken right now", so web_search degrades once.
DEGRADING_KINDS: frozenset[str] = frozenset(
    {
        "auth",
        "credits",
        "missing_key",
        "rate_limit",
        "transport",
        "server",
        "bad_response",
        "unavailable",
    }
)

DEFAULT_TIMEOUT = 15.0
_TAGS = re.compile(r"<[^>]+>")
_SPACES = re.compile(r"\s+")


def clean_text(value: Any, limit: int = 500) -> str:
    """Plain text from an API field that may hold HTML highlights (``<strong>``) or entities."""
    if not isinstance(value, str):
        return ""
    text = _SPACES.sub(" ", html.unescape(_TAGS.sub("", value))).strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


@dataclass(frozen=True)
class SearchHit:
    title: str
    url: str
    snippet: str = ""

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


class SearchBackendError(Exception):
    """A backend failed; ``kind`` decides whether web_search degrades to DuckDuckGo."""

    def __init__(
        self, backend: str, kind: ErrorKind, message: str, *, status: int | None = None
    ) -> None:
        super().__init__(f"{backend}: {message}")
        self.backend = backend
        self.kind = kind
        self.status = status
        self.detail = message

    @property
    def degrades(self) -> bool:
        return self.kind in DEGRADING_KINDS

    @property
    def reason(self) -> str:
        """A short, secret-free phrase for logs, traces and ``fallback_reason``."""
        return f"{self.kind}: {self.detail}"


def _status_kind(status: int) -> ErrorKind:
    if status in (401, 403):
        return "auth"
    if status == 402:
        return "credits"
    if status == 429:
        return "rate_limit"
    if status >= 500:
        return "server"
    return "request"


class HttpBackend:
    """Base for backends that speak JSON or HTML over one HTTPS endpoint."""

    name: ClassVar[str] = ""
    default_base_url: ClassVar[str] = ""
    requires_key: ClassVar[bool] = True

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.api_key = api_key
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        self.timeout = timeout

    def __repr__(self) -> str:  # the key never appears in a repr
        return f"{type(self).__name__}(base_url={self.base_url!r})"

    def _key(self) -> str:
        if not self.api_key:
            raise SearchBackendError(
                self.name,
                "missing_key",
                "no API key is configured (set [fermix_core.tools.web_search] api_key "
                "or the backend's environment variable)",
            )
        return self.api_key

    async def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request; every failure becomes a :class:`SearchBackendError`."""
        import httpx

        try:
            async with httpx.AsyncClient(timeout=self.timeout, trust_env=False) as client:
                response = await client.request(method, self.base_url + path, **kwargs)
        except httpx.TimeoutException:
            raise SearchBackendError(self.name, "transport", "timed out") from None
        except httpx.HTTPError as exc:
            raise SearchBackendError(self.name, "transport", type(exc).__name__) from None
        if response.status_code >= 400:
            status = response.status_code
            raise SearchBackendError(
                self.name, _status_kind(status), f"HTTP {status}", status=status
            )
        return response

    def _json(self, response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError:
            raise SearchBackendError(
                self.name, "bad_response", "the response was not JSON"
            ) from None

    def _shape_error(self, what: str) -> SearchBackendError:
        return SearchBackendError(self.name, "bad_response", f"unexpected response shape ({what})")

    def _hits(
        self, items: Any, *, title: str, url: str, snippet: tuple[str, ...]
    ) -> list[SearchHit]:
        """Hits from a JSON list of objects; items without a URL are skipped, not fatal."""
        if items is None:
            return []
        if not isinstance(items, list):
            raise self._shape_error("results is not a list")
        hits = []
        for item in items:
            if not isinstance(item, dict) or not isinstance(item.get(url), str):
                continue
            text = ""
            for key in snippet:
                value = item.get(key)
                if isinstance(value, list):
                    value = " … ".join(v for v in value if isinstance(v, str))
                text = clean_text(value)
                if text:
                    break
            hits.append(
                SearchHit(
                    title=clean_text(item.get(title), 200) or item[url],
                    url=item[url],
                    snippet=text,
                )
            )
        return hits

    async def search(self, query: str, *, max_results: int) -> list[SearchHit]:
        raise NotImplementedError
