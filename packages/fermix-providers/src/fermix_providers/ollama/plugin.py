"""Registers the ``ollama`` provider.

Ollama is keyless: no Authorization header and no secret, so there is no ``api_key`` key
and no key environment variable. A ``base_url`` is what marks it configured, and
``OLLAMA_BASE_URL`` overrides it (remote or Tailscale hosts work). It is last in the fallback
order on purpose: a local model is the last-resort hop.
"""

from __future__ import annotations

from collections.abc import Iterable

from fermix_core.hookspecs import hookimpl
from fermix_core.specs import ProviderSpec, SetupField

from fermix_providers import catalog

DEFAULT_BASE_URL = "http://localhost:11434/v1"

SPEC = ProviderSpec(
    name="ollama",
    label="Ollama (local)",
    factory="fermix_providers.ollama.adapter:OllamaProvider",
    wire="chat_completions",
    auth_modes=("none",),
    env_var=None,
    keyless=True,
    base_url_env="OLLAMA_BASE_URL",
    config_keys=catalog.config_keys(api_key=False),
    reasoning_efforts=(),
    default_model="qwen3",
    default_base_url=DEFAULT_BASE_URL,
    models=catalog.OLLAMA_MODELS,
    setup_fields=(
        SetupField(key="base_url", prompt="Ollama server URL", default=DEFAULT_BASE_URL),
        catalog.model_field("qwen3"),
    ),
    order=catalog.order_of("ollama"),
)


@hookimpl
def fermix_providers() -> Iterable[ProviderSpec]:
    return (SPEC,)
