"""The keyed backends: Brave, Exa, Tavily and Firecrawl.

Each is a thin mapping from one documented search endpoint to :class:`SearchHit` records.
They differ only in where the key goes and what the response calls its fields, so they
share everything else with :class:`~fermix_tools.web.backends.base.HttpBackend`.
"""

from __future__ import annotations

from fermix_tools.web.backends.base import HttpBackend, SearchHit

__all__ = ["BraveSearch", "ExaSearch", "FirecrawlSearch", "TavilySearch"]


class BraveSearch(HttpBackend):
    """Brave Search web results (``X-Subscription-Token``; at most 20 per request)."""

    name = "brave"
    default_base_url = "https://api.search.brave.com"

    async def search(self, query: str, *, max_results: int) -> list[SearchHit]:
        response = await self._request(
            "GET",
            "/res/v1/web/search",
            params={"q": query, "count": min(max_results, 20)},
            headers={"X-Subscription-Token": self._key(), "Accept": "application/json"},
        )
        body = self._json(response)
        if not isinstance(body, dict):
            raise self._shape_error("not an object")
        web = body.get("web") or {}
        if not isinstance(web, dict):
            raise self._shape_error("web is not an object")
        items = web.get("results")
        return self._hits(items, title="title", url="url", snippet=("description",))[:max_results]


class ExaSearch(HttpBackend):
    """Exa search with short highlights as snippets (``x-api-key``)."""

    name = "exa"
    default_base_url = "https://api.exa.ai"

    async def search(self, query: str, *, max_results: int) -> list[SearchHit]:
        response = await self._request(
            "POST",
            "/search",
            json={
                "query": query,
                "numResults": max_results,
                "contents": {"highlights": {"numSentences": 2, "highlightsPerUrl": 1}},
            },
            headers={"x-api-key": self._key(), "Accept": "application/json"},
        )
        body = self._json(response)
        if not isinstance(body, dict):
            raise self._shape_error("not an object")
        hits = self._hits(
            body.get("results"),
            title="title",
            url="url",
            snippet=("highlights", "summary", "text"),
        )
        return hits[:max_results]


class TavilySearch(HttpBackend):
    """Tavily search (``Authorization: Bearer``)."""

    name = "tavily"
    default_base_url = "https://api.tavily.com"

    async def search(self, query: str, *, max_results: int) -> list[SearchHit]:
        response = await self._request(
            "POST",
            "/search",
            json={"query": query, "max_results": max_results, "search_depth": "basic"},
            headers={"Authorization": f"Bearer {self._key()}", "Accept": "application/json"},
        )
        body = self._json(response)
        if not isinstance(body, dict):
            raise self._shape_error("not an object")
        hits = self._hits(body.get("results"), title="title", url="url", snippet=("content",))
        return hits[:max_results]


class FirecrawlSearch(HttpBackend):
    """Firecrawl search (v2; ``data.web``, with the older flat ``data`` list also read)."""

    name = "firecrawl"
    default_base_url = "https://api.firecrawl.dev"

    async def search(self, query: str, *, max_results: int) -> list[SearchHit]:
        response = await self._request(
            "POST",
            "/v2/search",
            json={"query": query, "limit": max_results},
            headers={"Authorization": f"Bearer {self._key()}", "Accept": "application/json"},
        )
        body = self._json(response)
        if not isinstance(body, dict):
            raise self._shape_error("not an object")
        if body.get("success") is False:
            raise self._shape_error("success is false")
        data = body.get("data")
        items = data.get("web") if isinstance(data, dict) else data
        hits = self._hits(items, title="title", url="url", snippet=("description", "markdown"))
        return hits[:max_results]
