"""Route selection from real config files, a real auth.json, an in-memory keyring and env."""

from __future__ import annotations

import logging

import pytest
from fermix_core.plugins import PluginRecord
from fermix_core.routing import NO_PROVIDER_MESSAGE, NoProviderConfigured, RoutingError
from fermix_core.routing.routes import choose_primary, resolve_routes
from fermix_core.routing.survey import oauth_profile, survey
from fermix_core.specs import ProviderSpec


def names(plan) -> list[str]:
    return [r.name for r in plan.routes]


# --------------------------------------------------------------------------- empty plans


def test_nothing_configured_is_an_empty_plan_that_says_run_setup(load, registry) -> None:
    plan = resolve_routes(load(""), registry, {})
    assert plan.empty and plan.primary is None and plan.fallbacks == ()
    assert plan.reason == NO_PROVIDER_MESSAGE
    assert "fermix setup" in plan.reason
    with pytest.raises(NoProviderConfigured) as info:
        plan.require()
    assert str(info.value) == NO_PROVIDER_MESSAGE


def test_env_keys_alone_make_fallbacks_but_never_a_primary(load, registry) -> None:
    # The environment may supply secrets; only the file promotes a primary.
    env = {"OPENAI_API_KEY": "sk-env", "LOCAL_BASE_URL": "http://gpu.lan:11434/v1"}
    plan = resolve_routes(load("", environ=env), registry, env)
    assert plan.empty
    states = survey(load("", environ=env), registry, env)
    assert states["openai"].configured and states["local"].configured


# --------------------------------------------------------------------------- primary flag


def test_flagged_primary_and_every_other_configured_provider_in_catalog_order(
    load, registry
) -> None:
    # Blocks written in reverse catalog order: the plan order must not follow the file.
    text = """
[fermix_core.providers.local]
base_url = "http://127.0.0.1:11434/v1"

[fermix_core.providers.gateway]
api_key = "gw-secret"

[fermix_core.providers.anthropic]
primary = true
api_key = "sk-ant-secret"
"""
    env = {"OPENAI_API_KEY": "sk-openai-env"}
    plan = resolve_routes(load(text, environ=env), registry, env)
    assert plan.chosen_by == "flag"
    assert plan.primary_provider == "anthropic"
    assert plan.fallback_providers == ["openai", "gateway", "local"]
    assert [r.role for r in plan.routes] == ["primary", "fallback", "fallback", "fallback"]
    assert "subscription" not in names(plan)  # no stored login: not configured
    openai = plan.get("openai")
    assert openai is not None
    assert openai.settings.api_key == "sk-openai-env"
    assert openai.key_source == "env:OPENAI_API_KEY"
    assert plan.primary.key_source == "plaintext"


def test_a_flagged_primary_without_credentials_stays_primary_and_is_marked(
    load, registry, caplog
) -> None:
    text = """
[fermix_core.providers.gateway]
primary = true

[fermix_core.providers.anthropic]
api_key = "sk-ant-secret"
"""
    with caplog.at_level(logging.WARNING, logger="fermix.routing"):
        plan = resolve_routes(load(text), registry, {})
    assert plan.primary_provider == "gateway"
    assert plan.primary.configured is False
    assert plan.primary.settings.api_key is None
    assert plan.fallback_providers == ["anthropic"]
    assert any("no usable credential" in r.getMessage() for r in caplog.records)


def test_two_flags_in_a_hand_built_state_refuse_to_pick(load, registry) -> None:
    # Config validation rejects two flags; choose_primary must not silently pick one either.
    config = load('[fermix_core.providers.openai]\nprimary = true\napi_key = "k"\n')
    states = dict(survey(config, registry, {}))
    from dataclasses import replace

    states["anthropic"] = replace(states["anthropic"], flagged_primary=True)
    with pytest.raises(RoutingError, match="more than one provider"):
        choose_primary(config, states)


# --------------------------------------------------------------------------- legacy + auto


def test_legacy_agent_provider_is_used_only_without_a_flag(load, registry) -> None:
    legacy = """
[fermix_core.agent]
provider = "gateway"

[fermix_core.providers.gateway]
api_key = "gw"

[fermix_core.providers.openai]
api_key = "sk-o"
"""
    plan = resolve_routes(load(legacy), registry, {})
    assert (plan.primary_provider, plan.chosen_by) == ("gateway", "legacy")
    assert plan.fallback_providers == ["openai"]

    flagged = legacy.replace('api_key = "sk-o"', 'api_key = "sk-o"\nprimary = true')
    plan = resolve_routes(load(flagged), registry, {})
    assert (plan.primary_provider, plan.chosen_by) == ("openai", "flag")
    assert plan.fallback_providers == ["gateway"]


def test_without_flag_or_legacy_the_first_written_credentialed_block_wins(load, registry) -> None:
    text = """
[fermix_core.providers.local]
base_url = "http://127.0.0.1:11434/v1"

[fermix_core.providers.gateway]
api_key = "gw"

[fermix_core.providers.openai]
default_model = "gpt-old"
"""
    # openai's block exists but has no credential; gateway is first with one.
    plan = resolve_routes(load(text), registry, {})
    assert (plan.primary_provider, plan.chosen_by) == ("gateway", "auto")
    assert plan.fallback_providers == ["local"]

    # An env key gives openai's written block a real credential, so catalog order picks it.
    env = {"OPENAI_API_KEY": "sk-env"}
    plan = resolve_routes(load(text, environ=env), registry, env)
    assert plan.primary_provider == "openai"
    assert plan.primary.model == "gpt-old"


# --------------------------------------------------------------------------- realtime key


REALTIME_ONLY = """
[fermix_core.realtime]
enabled = true

[fermix_core.providers.openai]
api_key = "sk-realtime"
"""


def test_a_realtime_key_alone_never_promotes_openai(load, registry) -> None:
    plan = resolve_routes(load(REALTIME_ONLY), registry, {})
    assert plan.empty and plan.reason == NO_PROVIDER_MESSAGE


def test_realtime_key_with_another_provider_stays_a_fallback(load, registry) -> None:
    text = REALTIME_ONLY + '\n[fermix_core.providers.anthropic]\napi_key = "sk-ant"\n'
    plan = resolve_routes(load(text), registry, {})
    assert plan.primary_provider == "anthropic"
    assert plan.fallback_providers == ["openai"]


def test_an_explicit_primary_false_does_not_turn_the_realtime_key_into_config(
    load, registry
) -> None:
    text = REALTIME_ONLY.replace('api_key = "sk-realtime"', 'api_key = "sk-rt"\nprimary = false')
    assert resolve_routes(load(text), registry, {}).empty


@pytest.mark.parametrize(
    "text",
    [
        # Realtime off: the key is an ordinary OpenAI key.
        REALTIME_ONLY.replace("enabled = true", "enabled = false"),
        # More than a key in the block: a real OpenAI provider configuration.
        REALTIME_ONLY + 'default_model = "gpt-mini"\n',
        # An explicit flag is an explicit choice.
        REALTIME_ONLY + "primary = true\n",
    ],
)
def test_openai_is_promoted_when_it_is_more_than_the_realtime_key(
    load, registry, text: str
) -> None:
    assert resolve_routes(load(text), registry, {}).primary_provider == "openai"


# --------------------------------------------------------------------------- credentials


def test_keyring_secret_resolves_and_a_missing_entry_is_not_configured(
    load, registry, keyring_put
) -> None:
    text = '[fermix_core.providers.gateway]\nprimary = true\napi_key = "@keyring"\n'
    states = survey(load(text), registry, {})
    assert not states["gateway"].configured
    assert "keyring" in (states["gateway"].credential.problem or "")

    keyring_put("GATEWAY_API_KEY", "gw-from-keyring")
    plan = resolve_routes(load(text), registry, {})
    assert plan.primary.configured
    assert plan.primary.key_source == "keyring"
    assert plan.primary.settings.api_key == "gw-from-keyring"


def test_env_reference_secret_names_the_variable_it_came_from(load, registry) -> None:
    text = (
        "[fermix_core.providers.gateway]\nprimary = true\n"
        'api_key = { source = "env", env = "WORK_GW_KEY" }\n'
    )
    env = {"WORK_GW_KEY": "gw-work"}
    plan = resolve_routes(load(text, environ=env), registry, env)
    assert plan.primary.key_source == "env:WORK_GW_KEY"
    assert plan.primary.settings.api_key == "gw-work"


def test_oauth_only_provider_needs_a_stored_login(load, registry, auth_store) -> None:
    text = "[fermix_core.providers.subscription]\nprimary = true\n"
    plan = resolve_routes(load(text), registry, {}, auth_store=auth_store)
    assert plan.primary.configured is False
    assert plan.primary.auth_mode == "oauth"

    profile = oauth_profile(registry.typed(ProviderSpec)["subscription"])
    assert profile == "subscription_oauth"
    auth_store.put(profile, {"access_token": "tok", "refresh_token": "ref"})
    plan = resolve_routes(load(text), registry, {}, auth_store=auth_store)
    assert plan.primary.configured
    assert plan.primary.key_source == "oauth:subscription_oauth"
    assert plan.primary.settings.api_key is None
    assert plan.primary.settings.auth_store is auth_store


def test_the_default_auth_store_is_the_homes_auth_json(load, registry, fermix_home) -> None:
    from fermix_core.authfile import AuthStore

    AuthStore(fermix_home.auth_file).put("subscription_oauth", {"access_token": "t"})
    plan = resolve_routes(load("[fermix_core.providers.subscription]\nprimary = true\n"), registry)
    assert plan.primary.configured


def test_a_stored_token_is_inert_until_auth_mode_is_oauth(load, registry, auth_store) -> None:
    auth_store.put("anthropic_oauth", {"access_token": "t"})
    api_key_mode = "[fermix_core.providers.anthropic]\nprimary = true\n"
    plan = resolve_routes(load(api_key_mode), registry, {}, auth_store=auth_store)
    assert plan.primary.configured is False  # no key, and the token is not in use

    oauth_mode = api_key_mode + 'auth_mode = "oauth"\napi_key = "sk-ant-unused"\n'
    plan = resolve_routes(load(oauth_mode), registry, {}, auth_store=auth_store)
    assert plan.primary.configured
    assert plan.primary.auth_mode == "oauth"
    assert plan.primary.settings.api_key is None  # the key is not what authenticates


def test_an_unreadable_auth_file_makes_oauth_unconfigured_not_a_crash(
    load, registry, auth_store, fermix_home
) -> None:
    fermix_home.auth_file.write_text("{not json")
    fermix_home.auth_file.chmod(0o600)
    text = "[fermix_core.providers.subscription]\nprimary = true\n"
    plan = resolve_routes(load(text), registry, {}, auth_store=auth_store)
    assert plan.primary.configured is False
    states = survey(load(text), registry, {}, auth_store=auth_store)
    assert "not valid JSON" in (states["subscription"].credential.problem or "")


def test_keyless_server_needs_a_written_or_env_base_url(load, registry) -> None:
    # The default URL alone is not configuration.
    only_model = '[fermix_core.providers.local]\ndefault_model = "llava"\n'
    assert not survey(load(only_model), registry, {})["local"].configured

    written = '[fermix_core.providers.local]\nbase_url = "http://10.0.0.5:11434/v1"\n'
    plan = resolve_routes(load(written), registry, {})
    assert plan.primary_provider == "local"
    assert plan.primary.settings.base_url == "http://10.0.0.5:11434/v1"
    assert plan.primary.auth_mode == "none"
    assert plan.primary.key_source == "keyless"

    env = {"LOCAL_BASE_URL": "http://tail.net:11434/v1"}
    plan = resolve_routes(load(only_model, environ=env), registry, env)
    assert plan.primary_provider == "local"  # written block + env URL
    assert plan.primary.settings.base_url == "http://tail.net:11434/v1"
    assert plan.primary.model == "llava"


# --------------------------------------------------------------------------- settings


def test_route_settings_come_from_config_env_and_spec(load, registry) -> None:
    text = """
[fermix_core.providers.openai]
primary = true
api_key = "sk-o"
base_url = "https://gateway.corp.example/v1"
wire = "chat_completions"
default_model = "gpt-mini"
reasoning_effort = "high"

[fermix_core.providers.anthropic]
api_key = "sk-a"
"""
    plan = resolve_routes(load(text), registry, {})
    s = plan.primary.settings
    assert (s.name, s.base_url, s.wire, s.default_model) == (
        "openai",
        "https://gateway.corp.example/v1",
        "chat_completions",
        "gpt-mini",
    )
    assert (s.reasoning_effort, s.auth_mode, s.fast) == ("high", "api_key", False)
    fallback = plan.fallbacks[0].settings
    assert fallback.base_url == "https://api.anthropic.example.test/v1"
    assert fallback.default_model == "claude-a"
    assert fallback.wire == "anthropic_messages"
    assert fallback.reasoning_effort is None  # nothing configured: the API default applies


def test_over_reaching_effort_self_heals_to_the_model_ceiling_with_a_note(
    load, registry, caplog
) -> None:
    text = """
[fermix_core.providers.openai]
primary = true
api_key = "sk-o"
default_model = "gpt-old"
reasoning_effort = "max"
"""
    with caplog.at_level(logging.INFO, logger="fermix.routing"):
        plan = resolve_routes(load(text), registry, {})
    assert plan.primary.effort == "xhigh"
    assert plan.primary.notes and "xhigh" in plan.primary.notes[0]
    assert any("using 'xhigh'" in r.getMessage() for r in caplog.records)


def test_unknown_models_pass_effort_through(load, registry) -> None:
    text = """
[fermix_core.providers.openai]
primary = true
api_key = "sk-o"
default_model = "gpt-next-preview"
reasoning_effort = "max"
"""
    plan = resolve_routes(load(text), registry, {})
    assert plan.primary.effort == "max"
    assert plan.primary.notes == ()


def test_providers_without_efforts_report_none(load, registry) -> None:
    plan = resolve_routes(
        load('[fermix_core.providers.gateway]\nprimary = true\napi_key = "g"\n'), registry, {}
    )
    assert plan.primary.effort is None
    assert plan.primary.telemetry()["reasoning_effort"] is None
    assert plan.primary.telemetry()["provider"] == "gateway"


def test_no_secret_reaches_a_repr(load, registry) -> None:
    text = '[fermix_core.providers.gateway]\nprimary = true\napi_key = "gw-SECRET-VALUE"\n'
    plan = resolve_routes(load(text), registry, {})
    states = survey(load(text), registry, {})
    assert "gw-SECRET-VALUE" not in repr(plan)
    assert "gw-SECRET-VALUE" not in repr(states)


# --------------------------------------------------------------------------- unavailable


def test_a_primary_whose_plugin_is_not_loaded_empties_the_plan_with_the_reason(
    load, registry
) -> None:
    record = PluginRecord(name="providers.xai", value="x:plugin", distribution="fermix-x")
    record.status = "disabled"  # type: ignore[assignment]
    text = """
[fermix_core.providers.xai]
primary = true
api_key = "k"

[fermix_core.providers.gateway]
api_key = "g"
"""
    config = load(text, unavailable=[record])
    plan = resolve_routes(config, registry, {})
    assert plan.empty
    assert '"xai"' in plan.reason and "not loaded" in plan.reason


# --------------------------------------------------------------------------- run-time use


@pytest.mark.anyio
async def test_jobs_resolve_off_the_event_loop_and_see_config_changes(load, registry) -> None:
    from fermix_core.routing.routes import resolve_routes_async

    first = load('[fermix_core.providers.gateway]\nprimary = true\napi_key = "g"\n')
    plan = await resolve_routes_async(first, registry, {}, purpose="cron")
    assert plan.primary_provider == "gateway" and plan.purpose == "cron"
    # A scheduled job resolves at every run, so an edit made since boot applies.
    second = load('[fermix_core.providers.anthropic]\nprimary = true\napi_key = "a"\n')
    plan = await resolve_routes_async(second, registry, {}, purpose="cron")
    assert plan.primary_provider == "anthropic"


def test_routes_can_key_a_dict(load, registry) -> None:
    text = '[fermix_core.providers.gateway]\nprimary = true\napi_key = "g"\n'
    plan = resolve_routes(load(text), registry, {})
    again = resolve_routes(load(text), registry, {})
    seen = {plan.primary: "first"}
    assert seen[again.primary] == "first"  # equal routes hash alike
