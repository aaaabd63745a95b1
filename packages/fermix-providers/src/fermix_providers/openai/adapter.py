"""The ``openai`` provider: the Platform API by key, on the Responses wire unless routed.

``wire = "chat_completions"`` moves the provider onto the older wire, which is what lets
``base_url`` point at an OpenAI-compatible gateway that never implemented Responses. The
routing happens here, once, at construction: the Chat Completions adapter is built as a
delegate sharing this provider's HTTP client, so a route has one connection pool whichever
wire it speaks.

Reasoning summaries are not requested on the Platform API: asking for them makes an
unverified organization's every call fail with a 400, and the stream works without them.
"""

from __future__ import annotations

import dataclasses

from fermix_core.messages import Turn
from fermix_core.provider import ChatRequest, ErrorKind, Provider, ProviderError, ProviderSettings
from fermix_core.specs import ProviderSpec

from fermix_providers.catalog import OPENAI_WIRES
from fermix_providers.wires.responses import ResponsesProvider

__all__ = ["OpenAIProvider"]


class OpenAIProvider(ResponsesProvider):
    """OpenAI Platform on the Responses wire, or a delegate on Chat Completions."""

    def __init__(self, spec: ProviderSpec, settings: ProviderSettings) -> None:
        wire = settings.wire or spec.wire or OPENAI_WIRES[0]
        if wire not in OPENAI_WIRES:
            raise ProviderError(
                ErrorKind.INVALID_REQUEST,
                f"[fermix_core.providers.{spec.name}] wire = {wire!r} is not a wire this provider "
                f"speaks; use one of: {', '.join(OPENAI_WIRES)}",
                provider=spec.name,
            )
        self.wire = wire
        self.delegate: Provider | None = None
        if wire == "chat_completions":
            from fermix_providers.wires.chat_completions import ChatCompletionsProvider

            delegate = ChatCompletionsProvider(spec, settings)
            self.delegate = delegate
            # The delegate owns the client (when anyone here does); this side only borrows it.
            settings = dataclasses.replace(settings, http=delegate.client)
        super().__init__(spec, settings)
        if self.delegate is not None:
            self.supports_streaming = self.delegate.supports_streaming
            self.counts_chunks = self.delegate.counts_chunks

    def vision(self, model: str | None = None) -> bool:
        if self.delegate is not None:
            return self.delegate.vision(model)
        return super().vision(model)

    async def chat(self, request: ChatRequest) -> Turn:
        if self.delegate is not None:
            return await self.delegate.chat(request)
        return await super().chat(request)

    async def aclose(self) -> None:
        if self.delegate is not None:
            await self.delegate.aclose()
        await super().aclose()
