"""OpenRouter on the Chat Completions wire.

What differs from the plain wire: two static attribution headers on every request (they
credit the app on OpenRouter's side and carry no user data), and never a reasoning-effort
field — OpenRouter fronts many vendors whose effort vocabularies disagree, so the server
default applies. Model ids are vendor-prefixed (``anthropic/claude-sonnet-4.6``) and may
carry a routing variant (``:free``, ``:nitro``) that does not change what the model can see.
"""

from __future__ import annotations

from typing import ClassVar

from fermix_core.specs import ModelInfo

from fermix_providers.wires.chat_completions import ChatCompletionsProvider

__all__ = ["ATTRIBUTION_HEADERS", "OpenRouterProvider"]

ATTRIBUTION_HEADERS: dict[str, str] = {"HTTP-Referer": "https://fermix.sh", "X-Title": "Fermix"}


class OpenRouterProvider(ChatCompletionsProvider):
    sends_effort: ClassVar[bool] = False

    def headers(self) -> dict[str, str]:
        headers = super().headers()
        headers.update(ATTRIBUTION_HEADERS)
        return headers

    def model_info(self, model: str | None) -> ModelInfo | None:
        wanted = self.model_id(model)
        exact = next((m for m in self.spec.models if m.id == wanted), None)
        if exact is not None or ":" not in wanted:
            return exact
        base = wanted.rsplit(":", 1)[0]
        return next((m for m in self.spec.models if m.id == base), None)
