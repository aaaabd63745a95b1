"""Registers the ``anthropic`` provider.

Two auth modes: an API key, or a Claude subscription OAuth token (``fermix auth login
--provider anthropic``). A stored token is inert until ``auth_mode = "oauth"``, which is why
``auth_mode`` is a config key and the API key is optional in setup. Anthropic has no
``none`` effort: its floor is ``low``.
"""

from __future__ import annotations

from collections.abc import Iterable

from fermix_core.hookspecs import hookimpl
from fermix_core.specs import ProviderSpec, SetupField

from fermix_providers import catalog

SPEC = ProviderSpec(
    name="anthropic",
    label="Anthropic",
    factory="fermix_providers.anthropic.adapter:AnthropicProvider",
    wire="anthropic_messages",
    auth_modes=("api_key", "oauth"),
    oauth_profile="anthropic_oauth",
    env_var="ANTHROPIC_API_KEY",
    config_keys=catalog.config_keys(api_key=True, effort=True, auth_mode=True),
    reasoning_efforts=catalog.EFFORTS_ANTHROPIC,
    default_model="claude-sonnet-4-6",
    default_base_url="https://api.anthropic.com/v1",
    models=catalog.ANTHROPIC_MODELS,
    setup_fields=(
        SetupField(
            key="auth_mode",
            prompt="Authenticate with an API key or a Claude subscription (api_key/oauth)",
            required=False,
            default="api_key",
        ),
        catalog.api_key_field("Anthropic", required=False),
        catalog.model_field("claude-sonnet-4-6"),
    ),
    order=catalog.order_of("anthropic"),
)


@hookimpl
def fermix_providers() -> Iterable[ProviderSpec]:
    return (SPEC,)
