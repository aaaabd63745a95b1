"""Routing over the seven real provider specs, from real config files and a real auth.json."""

from __future__ import annotations

import importlib
from collections.abc import Callable

import pytest
from fermix_core.authfile import AuthStore
from fermix_core.config import LoadedConfig, load_config
from fermix_core.plugins import PluginHost, SpecRegistry
from fermix_core.routing import RouteConfigError, RouteOverride
from fermix_core.routing.routes import resolve_routes
from fermix_core.routing.survey import oauth_profile
from fermix_core.specs import ProviderSpec
from fermix_providers import catalog

ALL_KEYS = {
    "OPENAI_API_KEY": "sk-openai",
    "ANTHROPIC_API_KEY": "sk-ant",
    "XAI_API_KEY": "xai-key",
    "OPENROUTER_API_KEY": "sk-or",
    "MISTRAL_API_KEY": "mistral-key",
    "OLLAMA_BASE_URL": "http://gpu.tailnet.example:11434/v1",
}


@pytest.fixture
def registry() -> SpecRegistry:
    host = PluginHost()
    for name, module in catalog.PLUGIN_MODULES.items():
        host.register(importlib.import_module(module), name=f"providers.{name}")
    registry = host.collect()
    assert registry.errors == []
    return registry


@pytest.fixture
def load(fermix_home, registry) -> Callable[..., LoadedConfig]:
    def run(text: str, environ: dict[str, str] | None = None) -> LoadedConfig:
        fermix_home.config_file.write_text(text)
        return load_config(fermix_home, registry, environ=environ or {})

    return run


@pytest.fixture
def logged_in(fermix_home, registry) -> Callable[[str], AuthStore]:
    """Store an OAuth login for a provider under the profile routing looks for."""

    def login(name: str) -> AuthStore:
        store = AuthStore(fermix_home.auth_file)
        spec = registry.typed(ProviderSpec)[name]
        store.put(oauth_profile(spec), {"access_token": "tok", "refresh_token": "ref"})
        return store

    return login


def test_every_configured_provider_falls_back_in_catalog_order(load, registry, logged_in) -> None:
    store = logged_in("openai_codex")
    text = "[fermix_core.providers.mistral]\nprimary = true\n"
    plan = resolve_routes(load(text, ALL_KEYS), registry, ALL_KEYS, auth_store=store)
    assert plan.primary_provider == "mistral"
    # Ollama deliberately last: a local model is the last-resort hop.
    assert plan.fallback_providers == [
        "openai_codex",
        "openai",
        "anthropic",
        "xai",
        "openrouter",
        "ollama",
    ]
    codex = plan.get("openai_codex")
    assert codex.auth_mode == "oauth" and codex.settings.api_key is None
    ollama = plan.get("ollama")
    assert ollama.settings.base_url == ALL_KEYS["OLLAMA_BASE_URL"]
    assert ollama.auth_mode == "none" and ollama.settings.api_key is None


def test_auto_primary_follows_catalog_order_over_written_blocks(load, registry) -> None:
    text = """
[fermix_core.providers.ollama]
base_url = "http://127.0.0.1:11434/v1"

[fermix_core.providers.anthropic]
api_key = "sk-ant"
"""
    plan = resolve_routes(load(text), registry, {})
    assert (plan.primary_provider, plan.chosen_by) == ("anthropic", "auto")
    assert plan.fallback_providers == ["ollama"]


def test_the_realtime_key_does_not_promote_openai(load, registry) -> None:
    text = """
[fermix_core.realtime]
enabled = true

[fermix_core.providers.openai]
api_key = "sk-realtime"

[fermix_core.providers.xai]
api_key = "xai-key"
"""
    plan = resolve_routes(load(text), registry, {})
    assert plan.primary_provider == "xai"
    assert plan.fallback_providers == ["openai"]


def test_ollama_default_url_alone_is_not_configuration(load, registry) -> None:
    text = '[fermix_core.providers.ollama]\ndefault_model = "llama3.2"\n'
    assert resolve_routes(load(text), registry, {}).empty
    env = {"OLLAMA_BASE_URL": "http://10.1.2.3:11434/v1"}
    plan = resolve_routes(load(text, env), registry, env)
    assert plan.primary_provider == "ollama"
    assert plan.primary.settings.base_url == "http://10.1.2.3:11434/v1"
    assert plan.primary.effort is None


@pytest.mark.parametrize("name", ["anthropic", "xai"])
def test_oauth_modes_need_the_login_and_ignore_a_stored_token_otherwise(
    load, registry, logged_in, name: str
) -> None:
    store = logged_in(name)
    api_key_mode = f"[fermix_core.providers.{name}]\nprimary = true\n"
    plan = resolve_routes(load(api_key_mode), registry, {}, auth_store=store)
    assert plan.primary.configured is False  # a stored token is inert until auth_mode = oauth
    oauth_mode = api_key_mode + 'auth_mode = "oauth"\n'
    plan = resolve_routes(load(oauth_mode), registry, {}, auth_store=store)
    assert plan.primary.configured and plan.primary.auth_mode == "oauth"
    assert plan.primary.key_source.startswith("oauth:")


def test_older_codex_models_self_heal_from_max_to_xhigh(load, registry, logged_in) -> None:
    store = logged_in("openai_codex")
    text = """
[fermix_core.providers.openai_codex]
primary = true
default_model = "gpt-5.5"
reasoning_effort = "max"
fast = true
"""
    plan = resolve_routes(load(text), registry, {}, auth_store=store)
    assert plan.primary.effort == "xhigh"
    assert plan.primary.settings.fast is True
    newest = text.replace('"gpt-5.5"', '"gpt-5.6-codex"')
    assert resolve_routes(load(newest), registry, {}, auth_store=store).primary.effort == "max"


def test_effort_overlays_floor_on_anthropic_and_skip_effortless_routes(load, registry) -> None:
    text = """
[fermix_core.providers.anthropic]
primary = true
api_key = "sk-ant"
reasoning_effort = "high"

[fermix_core.providers.openrouter]
api_key = "sk-or"

[fermix_core.routing]
cron_reasoning_effort = "none"
"""
    plan = resolve_routes(load(text), registry, {}, purpose="cron")
    assert plan.primary.effort == "low"  # Anthropic has no "none"
    assert plan.get("openrouter").effort is None
    assert plan.get("openrouter").telemetry()["reasoning_effort"] is None


def test_an_ollama_slug_under_openrouter_is_a_mispairing(load, registry) -> None:
    text = """
[fermix_core.providers.openrouter]
primary = true
api_key = "sk-or"

[fermix_core.routing]
subagent_provider = "openrouter"
subagent_model = "qwen3"
"""
    with pytest.raises(RouteConfigError) as info:
        resolve_routes(load(text), registry, {}, purpose="subagent")
    assert "ollama" in str(info.value) and "openrouter" in str(info.value)
    # A vendor-prefixed id OpenRouter's catalog knows is fine.
    ok = text.replace('"qwen3"', '"anthropic/claude-haiku-4.5"')
    plan = resolve_routes(load(ok), registry, {}, purpose="subagent")
    assert plan.primary.model == "anthropic/claude-haiku-4.5"


def test_a_model_both_openai_families_list_pairs_with_either(load, registry, logged_in) -> None:
    store = logged_in("openai_codex")
    text = '[fermix_core.providers.openai]\nprimary = true\napi_key = "sk-o"\n'
    for provider in ("openai", "openai_codex"):
        pin = RouteOverride(provider=provider, model="gpt-5.4-mini", origin="job")
        plan = resolve_routes(load(text), registry, {}, override=pin, auth_store=store)
        assert (plan.primary_provider, plan.primary.model) == (provider, "gpt-5.4-mini")


def test_an_effort_beyond_the_range_clamps_at_route_resolution_and_logs_once(
    load, registry, caplog
) -> None:
    text = """
[fermix_core.providers.xai]
primary = true
api_key = "xai-key"
reasoning_effort = "xhigh"

[fermix_core.providers.anthropic]
api_key = "sk-ant"
reasoning_effort = "none"
"""
    config = load(text)
    with caplog.at_level("INFO", logger="fermix.routing"):
        for _ in range(3):
            plan = resolve_routes(config, registry, {})
    assert plan.primary.effort == "high"
    assert plan.get("anthropic").effort == "low"
    clamps = [r.getMessage() for r in caplog.records if "reasoning_effort" in r.getMessage()]
    assert len(clamps) == 2, clamps  # one line per route, not one per resolution
    assert any("xai" in line and "'high'" in line for line in clamps)
