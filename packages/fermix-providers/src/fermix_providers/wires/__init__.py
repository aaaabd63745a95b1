"""Wire adapters: one per request/response shape, shared by the providers that speak it.

The package imports none of them itself: a provider imports the module of the wire it
speaks (``fermix_providers.wires.chat_completions``), so a turn against an
OpenAI-compatible server never loads the Responses or Anthropic wire code. The two
re-exports below resolve on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_providers.wires.chat_completions import ChatCompletionsProvider
    from fermix_providers.wires.responses import ResponsesProvider

__all__ = ["ChatCompletionsProvider", "ResponsesProvider"]

_LAZY = {
    "ChatCompletionsProvider": "fermix_providers.wires.chat_completions",
    "ResponsesProvider": "fermix_providers.wires.responses",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
