"""Ollama on its OpenAI-compatible Chat Completions endpoint.

Ollama is keyless, so no Authorization header is ever sent — not even if a key were
somehow configured, because a local server has no use for it and a forwarded one would
only leak. Local inference can think for minutes before the first token, hence the 300 s
receive timeout. Images must be inline bytes (the endpoint does not fetch URLs), and
whether a model sees them follows the catalog by model family, since tags such as
``gemma3:12b`` name sizes of one family.
"""

from __future__ import annotations

from typing import ClassVar

from fermix_core.provider import ProviderSettings
from fermix_core.specs import ModelInfo, ProviderSpec

from fermix_providers.http import Timeouts
from fermix_providers.ollama.urls import ollama_compat_base
from fermix_providers.wires.chat_completions import ChatCompletionsProvider

__all__ = ["OllamaProvider"]

#: Slow local inference: a long wait for the first token is normal, not a failure.
RECEIVE_TIMEOUT_SECONDS = 300.0


class OllamaProvider(ChatCompletionsProvider):
    sends_effort: ClassVar[bool] = False
    accepts_image_urls: ClassVar[bool] = False
    timeouts = Timeouts(read=RECEIVE_TIMEOUT_SECONDS)

    def __init__(self, spec: ProviderSpec, settings: ProviderSettings) -> None:
        super().__init__(spec, settings)
        self.base_url = ollama_compat_base(self.base_url)

    def headers(self) -> dict[str, str]:
        return {"content-type": "application/json"}

    def model_info(self, model: str | None) -> ModelInfo | None:
        wanted = self.model_id(model)
        for candidate in (wanted, wanted.removesuffix(":latest"), wanted.split(":", 1)[0]):
            found = next((m for m in self.spec.models if m.id == candidate), None)
            if found is not None:
                return found
        return None
