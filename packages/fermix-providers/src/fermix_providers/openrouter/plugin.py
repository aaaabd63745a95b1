"""Registers the ``openrouter`` provider.

OpenRouter fronts many vendors on the Chat Completions wire with vendor-prefixed model ids
(``anthropic/claude-sonnet-4.6`` — dots, not dashes). It takes no reasoning effort: the
server default applies, so ``reasoning_effort`` is not an accepted key.
"""

from __future__ import annotations

from collections.abc import Iterable

from fermix_core.hookspecs import hookimpl
from fermix_core.specs import ProviderSpec

from fermix_providers import catalog

SPEC = ProviderSpec(
    name="openrouter",
    label="OpenRouter",
    factory="fermix_providers.openrouter.adapter:OpenRouterProvider",
    wire="chat_completions",
    auth_modes=("api_key",),
    env_var="OPENROUTER_API_KEY",
    config_keys=catalog.config_keys(api_key=True),
    reasoning_efforts=(),
    default_model="anthropic/claude-sonnet-4.6",
    default_base_url="https://openrouter.ai/api/v1",
    models=catalog.OPENROUTER_MODELS,
    setup_fields=(
        catalog.api_key_field("OpenRouter"),
        catalog.model_field("anthropic/claude-sonnet-4.6"),
    ),
    order=catalog.order_of("openrouter"),
)


@hookimpl
def fermix_providers() -> Iterable[ProviderSpec]:
    return (SPEC,)
