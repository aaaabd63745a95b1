"""The ``xai`` provider: Grok on the Responses wire, by API key or Grok subscription OAuth.

Grok's dialect of the wire:

* Efforts are ``none|low|medium|high``, but several Grok models refuse the parameter
  outright (HTTP 400) — they choose reasoning by model variant instead. The catalog marks a
  model that takes an effort with ``max_effort``; a model without one that xAI documents as
  not reasoning-configurable (:data:`NO_EFFORT_MODELS`) gets no ``reasoning`` field at all.
* Its schema validator rejects enum values containing ``/``, so those are stripped from
  tool schemas (the model can still send such a value; it is just not enumerated).
* In OAuth mode a 403 means the Grok plan does not include API access — a fact about the
  subscription, not a stale token, so it is reported as such and never refreshed.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from fermix_core.messages import Turn
from fermix_core.provider import ChatRequest, ErrorKind, ProviderError, ProviderSettings
from fermix_core.specs import ProviderSpec

from fermix_providers.catalog import find_model
from fermix_providers.wires.responses import (
    OAuthBearer,
    ResponsesProvider,
    strip_slash_enums,
    token_source,
)

__all__ = ["NO_EFFORT_MODELS", "XAIProvider", "takes_effort"]

#: Grok models xAI documents as rejecting ``reasoning.effort``: Grok 4 (reasoning always on),
#: the fast pairs that pick reasoning by variant, Grok 4.20, the code model and Grok 3.
NO_EFFORT_MODELS = re.compile(
    r"^(grok-4(-\d{4}|-latest)?|grok-4(-1)?-fast(-non)?-reasoning.*|grok-4\.20.*|"
    r"grok-code-fast.*|grok-build.*|grok-3(-\d{4}|-latest|-fast.*)?)$"
)


def takes_effort(spec: ProviderSpec, model: str) -> bool:
    """Whether *model* may be sent a ``reasoning.effort``."""
    info = find_model(spec, model)
    if info is not None and info.max_effort is not None:
        return True
    return not NO_EFFORT_MODELS.match(model)


class XAIProvider(ResponsesProvider):
    """xAI Grok; ``auth_mode = "oauth"`` uses the ``xai_oauth`` login instead of a key."""

    system_role = "system"
    #: xAI's image-understanding docs: JPEG or PNG only, at most 20 MiB per image.
    image_types: ClassVar[frozenset[str]] = frozenset({"image/jpeg", "image/png"})

    def __init__(self, spec: ProviderSpec, settings: ProviderSettings) -> None:
        super().__init__(spec, settings)
        if settings.auth_mode == "oauth":
            self.oauth = OAuthBearer(token_source(settings, spec.name), provider=spec.name)

    def effort(self, request: ChatRequest, model: str) -> str | None:
        if not takes_effort(self.spec, model):
            return None
        return super().effort(request, model)

    def tool_parameters(self, schema: dict[str, Any]) -> dict[str, Any]:
        return strip_slash_enums(schema)

    async def chat(self, request: ChatRequest) -> Turn:
        try:
            return await super().chat(request)
        except ProviderError as exc:
            if self.oauth is None or exc.status != 403:
                raise
            said = f" (xAI said: {exc.message})" if exc.message else ""
            raise ProviderError(
                ErrorKind.AUTH,
                "your Grok subscription does not include API access, so the login cannot be "
                f"used for API calls{said}; upgrade the plan, or set "
                '[fermix_core.providers.xai] auth_mode = "api_key" and use an xAI API key',
                provider=self.name,
                status=403,
            ) from None
