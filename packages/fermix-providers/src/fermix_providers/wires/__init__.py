"""Wire adapters: one per request/response shape, shared by the providers that speak it.

The package imports none of them itself: a provider imports the module of the wire it
speaks (``fermix_providers.wires.chat_completions``), so a turn against an
OpenAI-compatible server never loads the Responses or Anthropic wire code. The two
re-exports below resolve on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fermix_core.lazyexports import lazy_exports

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_providers.wires.chat_completions import ChatCompletionsProvider
    from fermix_providers.wires.responses import ResponsesProvider

__all__ = ["ChatCompletionsProvider", "ResponsesProvider"]

_LAZY = {
    "ChatCompletionsProvider": "chat_completions",
    "ResponsesProvider": "responses",
}


__getattr__ = lazy_exports(__name__, _LAZY, globals())
