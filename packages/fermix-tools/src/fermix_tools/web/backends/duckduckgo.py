"""The keyless default: DuckDuckGo's HTML results page, parsed.

The HTML endpoint (``html.duckduckgo.com/html/``) renders results server-side, one
``div.result`` per hit: the title link ``a.result__a`` (whose ``href`` is a
``//duckduckgo.com/l/?uddg=<target>`` redirect, decoded here to the real URL) and the
snippet ``.result__snippet``. Ads carry ``result--ad`` and are dropped. A page with
neither results nor the "no results" marker is reported as an unrecognised format rather
than as an empty answer, so a layout change or a bot challenge never reads as "nothing
found".
"""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import parse_qs, urljoin, urlsplit

from fermix_tools.web.backends.base import HttpBackend, SearchBackendError, SearchHit, clean_text

__all__ = ["DuckDuckGoSearch", "parse_results"]

BROWSER_UA = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
_CHALLENGE_MARKERS = ("anomaly-modal", "challenge-form", "Unfortunately, bots use DuckDuckGo")


def _classes(attrs: list[tuple[str, str | None]]) -> set[str]:
    for key, value in attrs:
        if key == "class" and value:
            return set(value.split())
    return set()


def real_url(href: str, base: str = "https://duckduckgo.com/") -> str | None:
    """The destination of a result link: the ``uddg`` target of a redirect, or the link."""
    url = urljoin(base, href.strip())
    parts = urlsplit(url)
    host = parts.hostname or ""
    on_ddg = host == "duckduckgo.com" or host.endswith(".duckduckgo.com")
    if on_ddg and parts.path.startswith("/l/"):
        target = parse_qs(parts.query).get("uddg")
        if not target:
            return None
        url = target[0]
        parts = urlsplit(url)
        host = parts.hostname or ""
        on_ddg = host == "duckduckgo.com" or host.endswith(".duckduckgo.com")
    if on_ddg and parts.path.startswith("/y.js"):  # an ad click-through
        return None
    return url if parts.scheme in ("http", "https") and host else None


class _ResultParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hits: list[dict[str, str]] = []
        self.no_results = False
        self.saw_results_container = False
        self.organic = 0  # non-ad result blocks seen, with or without a usable link
        self._depth = 0  # open elements inside the current result div
        self._current: dict[str, str] | None = None
        self._ad = False
        self._field: str | None = None
        self._field_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = _classes(attrs)
        if "no-results" in classes:
            self.no_results = True
        if {"results", "serp__results"} & classes or ("id", "links") in attrs:
            self.saw_results_container = True
        if self._current is None:
            if tag == "div" and "result" in classes:
                self._current = {"title": "", "url": "", "snippet": ""}
                self._ad = "result--ad" in classes
                self.organic += not self._ad
                self._depth = 1
            return
        self._depth += 1
        if tag == "a" and "result__a" in classes:
            self._current["url"] = dict(attrs).get("href") or ""
            self._field, self._field_depth = "title", self._depth
        elif "result__snippet" in classes:
            self._field, self._field_depth = "snippet", self._depth

    def handle_endtag(self, tag: str) -> None:
        if self._current is None:
            return
        if self._field is not None and self._depth == self._field_depth:
            self._field = None
        self._depth -= 1
        if self._depth == 0:
            if not self._ad and self._current["url"]:
                self.hits.append(self._current)
            self._current = None

    def handle_data(self, data: str) -> None:
        if self._current is not None and self._field is not None:
            self._current[self._field] += data


def parse_results(page: str, max_results: int) -> list[SearchHit] | None:
    """Hits from a results page; ``None`` when the page is not a results page at all."""
    parser = _ResultParser()
    parser.feed(page)
    parser.close()
    hits: list[SearchHit] = []
    seen: set[str] = set()
    for raw in parser.hits:
        url = real_url(raw["url"])
        if url is None or url in seen:
            continue
        seen.add(url)
        title = clean_text(raw["title"], 200) or url
        hits.append(SearchHit(title=title, url=url, snippet=clean_text(raw["snippet"])))
        if len(hits) >= max_results:
            break
    if hits or parser.no_results:
        return hits
    if parser.saw_results_container and parser.organic == 0:
        return hits  # a results list holding nothing (or only ads)
    return None  # result blocks we could not read, or not a results page at all


class DuckDuckGoSearch(HttpBackend):
    """Keyless search through DuckDuckGo's HTML endpoint (a form POST, as a browser sends)."""

    name = "duckduckgo"
    default_base_url = "https://html.duckduckgo.com"
    requires_key = False

    async def search(self, query: str, *, max_results: int) -> list[SearchHit]:
        response = await self._request(
            "POST",
            "/html/",
            data={"q": query, "b": ""},
            headers={
                "User-Agent": BROWSER_UA,
                "Accept": "text/html",
                "Referer": self.base_url + "/",
            },
        )
        page = response.text
        if response.status_code == 202 or any(m in page for m in _CHALLENGE_MARKERS):
            raise SearchBackendError(
                self.name,
                "rate_limit",
                "DuckDuckGo is challenging automated requests right now; wait a minute or "
                "configure a keyed backend ([fermix_core.tools.web_search] backend)",
                status=response.status_code,
            )
        hits = parse_results(page, max_results)
        if hits is None:
            raise SearchBackendError(
                self.name, "bad_response", "the results page was not in the expected format"
            )
        return hits
