"""Registers the ``openai_codex`` provider.

Codex reaches GPT models through the operator's ChatGPT subscription, so there is no API
key: the credential is the OAuth login made with ``fermix auth login``. It is first in the
fallback order because a subscription costs nothing per call. ``fast`` exists only here: it
selects the Codex backend's faster service tier.
"""

from __future__ import annotations

from collections.abc import Iterable

from fermix_core.hookspecs import hookimpl
from fermix_core.specs import ProviderSpec

from fermix_providers import catalog

SPEC = ProviderSpec(
    name="openai_codex",
    label="OpenAI Codex (ChatGPT subscription)",
    factory="fermix_providers.openai_codex.adapter:CodexProvider",
    wire="responses",
    auth_modes=("oauth",),
    oauth_profile="codex",
    env_var=None,
    config_keys=catalog.config_keys(api_key=False, effort=True, fast=True),
    reasoning_efforts=catalog.EFFORTS_OPENAI,
    default_model="gpt-5.6-codex",
    default_base_url="https://chatgpt.com/backend-api/codex",
    models=catalog.CODEX_MODELS,
    setup_fields=(catalog.model_field("gpt-5.6-codex"),),
    order=catalog.order_of("openai_codex"),
)


@hookimpl
def fermix_providers() -> Iterable[ProviderSpec]:
    return (SPEC,)
