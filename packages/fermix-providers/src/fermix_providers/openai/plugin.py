"""Registers the ``openai`` provider.

The Platform API speaks the Responses wire by default. The provider is *routed*: its
``wire`` key can move it onto Chat Completions, which is what lets ``base_url`` point at an
OpenAI-compatible gateway that only implements the older wire.
"""

from __future__ import annotations

from collections.abc import Iterable

from fermix_core.hookspecs import hookimpl
from fermix_core.specs import ProviderSpec, SetupField

from fermix_providers import catalog

SPEC = ProviderSpec(
    name="openai",
    label="OpenAI",
    factory="fermix_providers.openai.adapter:OpenAIProvider",
    wire=catalog.OPENAI_WIRES[0],
    auth_modes=("api_key",),
    env_var="OPENAI_API_KEY",
    config_keys=catalog.config_keys(api_key=True, effort=True, wire=True),
    reasoning_efforts=catalog.EFFORTS_OPENAI,
    default_model="gpt-5.6",
    default_base_url="https://api.openai.com/v1",
    models=catalog.OPENAI_MODELS,
    setup_fields=(
        catalog.api_key_field("OpenAI"),
        catalog.model_field("gpt-5.6"),
        SetupField(
            key="base_url",
            prompt="Base URL (leave empty for api.openai.com)",
            required=False,
            default="https://api.openai.com/v1",
        ),
    ),
    order=catalog.order_of("openai"),
)


@hookimpl
def fermix_providers() -> Iterable[ProviderSpec]:
    return (SPEC,)
