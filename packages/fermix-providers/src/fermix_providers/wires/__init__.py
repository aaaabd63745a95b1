"""Wire adapters: one per request/response shape, shared by the providers that speak it."""

from __future__ import annotations

from fermix_providers.wires.chat_completions import ChatCompletionsProvider
from fermix_providers.wires.responses import ResponsesProvider

__all__ = ["ChatCompletionsProvider", "ResponsesProvider"]
