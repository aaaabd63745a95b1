"""Registers the ``mistral`` provider.

Mistral rides the Chat Completions wire with a plain bearer key and sends no reasoning
effort, so ``reasoning_effort`` is not an accepted key.
"""

from __future__ import annotations

from collections.abc import Iterable

from fermix_core.hookspecs import hookimpl
from fermix_core.specs import ProviderSpec

from fermix_providers import catalog

SPEC = ProviderSpec(
    name="mistral",
    label="Mistral",
    factory="fermix_providers.mistral.adapter:MistralProvider",
    wire="chat_completions",
    auth_modes=("api_key",),
    env_var="MISTRAL_API_KEY",
    config_keys=catalog.config_keys(api_key=True),
    reasoning_efforts=(),
    default_model="mistral-large-latest",
    default_base_url="https://api.mistral.ai/v1",
    models=catalog.MISTRAL_MODELS,
    setup_fields=(
        catalog.api_key_field("Mistral"),
        catalog.model_field("mistral-large-latest"),
    ),
    order=catalog.order_of("mistral"),
)


@hookimpl
def fermix_providers() -> Iterable[ProviderSpec]:
    return (SPEC,)
