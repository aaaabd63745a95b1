"""Registers the ``xai`` provider.

Grok rides the Responses wire shape. Two auth modes: an API key, or a Grok subscription
OAuth login (``fermix auth login --provider xai``); as with Anthropic the token is inert until
``auth_mode = "oauth"``. Efforts stop at ``high``.
"""

from __future__ import annotations

from collections.abc import Iterable

from fermix_core.hookspecs import hookimpl
from fermix_core.specs import ProviderSpec, SetupField

from fermix_providers import catalog

SPEC = ProviderSpec(
    name="xai",
    label="xAI Grok",
    factory="fermix_providers.xai.adapter:XAIProvider",
    wire="responses",
    auth_modes=("api_key", "oauth"),
    oauth_profile="xai_oauth",
    env_var="XAI_API_KEY",
    config_keys=catalog.config_keys(api_key=True, effort=True, auth_mode=True),
    reasoning_efforts=catalog.EFFORTS_XAI,
    default_model="grok-4",
    default_base_url="https://api.x.ai/v1",
    models=catalog.XAI_MODELS,
    setup_fields=(
        SetupField(
            key="auth_mode",
            prompt="Authenticate with an API key or a Grok subscription (api_key/oauth)",
            required=False,
            default="api_key",
        ),
        catalog.api_key_field("xAI", required=False),
        catalog.model_field("grok-4"),
    ),
    order=catalog.order_of("xai"),
)


@hookimpl
def fermix_providers() -> Iterable[ProviderSpec]:
    return (SPEC,)
