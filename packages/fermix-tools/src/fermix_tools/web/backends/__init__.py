"""``web_search`` backends: keyless DuckDuckGo and the keyed Brave, Exa, Tavily, Firecrawl.

Each is registered as a :class:`~fermix_core.specs.WebSearchBackendSpec` by
:mod:`fermix_tools.web.plugin`; third-party plugins add more through the same hook and the
same factory convention (see :mod:`fermix_tools.web.backends.base`).
"""

from __future__ import annotations

from fermix_tools.web.backends.base import (
    DEGRADING_KINDS,
    HttpBackend,
    SearchBackendError,
    SearchHit,
)

__all__ = ["DEGRADING_KINDS", "HttpBackend", "SearchBackendError", "SearchHit"]
