"""The environment overlay: precedence, what it may touch, and what it must never read."""

from __future__ import annotations

import os

from fermix_core.config import CORE_FLAGS, render_config, secret_fields
from fermix_core.config.env import apply_env, env_overlays


def test_environment_beats_file_beats_default(load) -> None:
    text = (
        '[fermix_core.providers.openai]\napi_key = "sk-file"\nprimary = true\n'
        '[fermix_core.providers.ollama]\nbase_url = "http://file:11434/v1"\n'
    )
    assert load(text).provider_config("openai").api_key == "sk-file"
    loaded = load(
        text, environ={"OPENAI_API_KEY": "sk-env", "OLLAMA_BASE_URL": "http://env:11434/v1"}
    )
    assert loaded.provider_config("openai").api_key == "sk-env"
    assert loaded.provider_config("openai").primary is True  # the file still decides the rest
    assert loaded.provider_config("ollama").base_url == "http://env:11434/v1"
    assert loaded.env_applied == ["OLLAMA_BASE_URL", "OPENAI_API_KEY"]
    assert loaded.overridden_by("fermix_core.providers.openai.api_key") == "OPENAI_API_KEY"
    assert loaded.overridden_by("fermix_core.providers.openai.primary") is None


def test_env_supplies_a_provider_that_the_file_does_not_mention(load) -> None:
    loaded = load("", environ={"ANTHROPIC_API_KEY": "sk-ant"})
    assert loaded.provider_config("anthropic").api_key == "sk-ant"
    assert loaded.data == {"fermix_core": {"providers": {"anthropic": {"api_key": "sk-ant"}}}}


def test_env_values_are_never_written_back(load, home, write_config, registry) -> None:
    from fermix_core.config import set_value

    path = write_config('[fermix_core.providers.openai]\napi_key = "@keyring"\n')
    env = {"OPENAI_API_KEY": "sk-env-only", "SLACK_BOT_TOKEN": "xoxb-env-only"}
    change = set_value(home, "fermix_core.agent.name", "Jarvis", registry, environ=env)
    assert change.changed
    text = path.read_text()
    assert "sk-env-only" not in text
    assert "xoxb-env-only" not in text
    assert '[fermix_core.providers.openai]\napi_key = "@keyring"\n' in text


def test_telegram_bot_token_is_never_read_from_the_environment(load) -> None:
    # The test channel spec even maps TELEGRAM_BOT_TOKEN; core still refuses to read it.
    env = {"TELEGRAM_BOT_TOKEN": "123:env-token", "TELEGRAM_ALLOWED_USER_IDS": "42"}
    loaded = load('[fermix_channels.telegram]\nbot_token = "@keyring"\n', environ=env)
    assert loaded.section("fermix_channels.telegram").bot_token == "@keyring"
    assert loaded.env_applied == ["TELEGRAM_ALLOWED_USER_IDS"]
    unset = load("", environ=env)
    assert unset.section("fermix_channels.telegram").bot_token is None
    assert "123:env-token" not in repr(unset.data)


def test_telegram_bot_token_slot_is_not_overridable(registry) -> None:
    slots = {s.path: s for s in secret_fields({}, registry)}
    telegram = slots[("fermix_channels", "telegram", "bot_token")]
    assert telegram.env == "TELEGRAM_BOT_TOKEN"
    assert telegram.overridable is False
    assert all(o.env != "TELEGRAM_BOT_TOKEN" for o in env_overlays(registry, list(slots.values())))


def test_telegram_bot_token_is_not_even_looked_up(load) -> None:
    class Spy(dict):
        def __init__(self, *a: object) -> None:
            super().__init__(*a)
            self.asked: list[str] = []

        def get(self, key, default=None):
            self.asked.append(key)
            return super().get(key, default)

        def __getitem__(self, key):
            self.asked.append(key)
            return super().__getitem__(key)

        def __contains__(self, key):
            self.asked.append(key)
            return super().__contains__(key)

    spy = Spy({"TELEGRAM_BOT_TOKEN": "123:env"})
    load("", environ=spy)
    assert spy.asked, "the overlay should consult the environment"
    assert "TELEGRAM_BOT_TOKEN" not in spy.asked


def test_allowlist_env_vars_are_comma_separated_lists(load) -> None:
    loaded = load(
        '[fermix_channels.slack]\nallowed_user_ids = ["UFILE"]\n',
        environ={"SLACK_ALLOWED_USER_IDS": " U1, U2 ,,U3 ", "TELEGRAM_ALLOWED_USER_IDS": "7,8"},
    )
    assert loaded.section("fermix_channels.slack").allowed_user_ids == ["U1", "U2", "U3"]
    assert loaded.section("fermix_channels.telegram").allowed_user_ids == [7, 8]


def test_invalid_env_values_name_the_variable_but_not_secret_values(problems_of) -> None:
    lines = problems_of(
        "",
        environ={"OLLAMA_BASE_URL": "localhost:11434", "TELEGRAM_ALLOWED_USER_IDS": "12,abc"},
    )
    assert lines == [
        'fermix_channels.telegram.allowed_user_ids[1]: must be an integer (got "abc") '
        "(from environment variable TELEGRAM_ALLOWED_USER_IDS)",
        "fermix_core.providers.ollama.base_url: must be an http:// or https:// URL like "
        '"http://localhost:11434/v1" (got "localhost:11434") (from environment variable '
        "OLLAMA_BASE_URL)",
    ]


def test_empty_env_values_count_as_unset(load) -> None:
    loaded = load(
        '[fermix_core.providers.openai]\napi_key = "@keyring"\n', environ={"OPENAI_API_KEY": "  "}
    )
    assert loaded.provider_config("openai").api_key == "@keyring"
    assert loaded.env_applied == []


def test_non_secret_settings_have_no_env_overlay(load) -> None:
    env = {
        "FERMIX_AGENT_NAME": "Env",
        "FERMIX_COMPACTION_THRESHOLD": "0.1",
        "FERMIX_SANDBOX_MODE": "open",
        "OPENAI_DEFAULT_MODEL": "x",
    }
    loaded = load("", environ=env)
    assert loaded.core.fermix_core.agent.name == "fermix"
    assert loaded.core.fermix_core.compaction.threshold == 0.85
    assert loaded.core.sandbox.mode == "standard"
    assert loaded.env_applied == []


def test_every_overlay_is_a_secret_base_url_or_channel_mapping(registry) -> None:
    overlays = env_overlays(registry, secret_fields({}, registry))
    by_env = {o.env: o for o in overlays}
    assert by_env["OPENAI_API_KEY"].path == ("fermix_core", "providers", "openai", "api_key")
    assert by_env["OLLAMA_BASE_URL"].kind == "base_url"
    assert by_env["FERMIX_TRANSCRIPTION_DEEPGRAM_API_KEY"].kind == "secret"
    assert by_env["GEMINI_API_KEY"].path[-1] == "google_api_key"
    assert by_env["SLACK_ALLOWED_USER_IDS"].split_list is True
    assert by_env["SLACK_BOT_TOKEN"].split_list is False
    assert {o.kind for o in overlays} == {"secret", "base_url", "channel"}
    assert not set(CORE_FLAGS) & set(by_env)  # flags are read where used, not overlaid


def test_derived_secret_names_override_their_slots(load) -> None:
    loaded = load(
        '[fermix_core.plugin_secrets]\nnotion = "@keyring"\n',
        environ={
            "FERMIX_TRANSCRIPTION_OPENAI_API_KEY": "sk-tr",
            "FERMIX_OAUTH_GOOGLE_CLIENT_SECRET": "gsecret",
            "FERMIX_PLUGIN_NOTION_API_KEY": "ntn",
            "FERMIX_WEATHER_API_KEY": "wx",
        },
    )
    core = loaded.core.fermix_core
    assert core.transcription.openai_api_key == "sk-tr"
    assert core.oauth.google.client_secret == "gsecret"
    assert core.plugin_secrets == {"notion": "ntn"}
    assert loaded.section("fermix_weather").api_key == "wx"


def test_rendered_config_masks_env_supplied_secrets(load) -> None:
    loaded = load(
        '[fermix_core.providers.anthropic]\napi_key = "@keyring"\n',
        environ={"OPENAI_API_KEY": "sk-live-value", "SLACK_BOT_TOKEN": "xoxb-live"},
    )
    rendered = render_config(loaded)
    assert rendered["fermix_core"]["providers"]["openai"]["api_key"] == "********"
    assert rendered["fermix_core"]["providers"]["anthropic"]["api_key"] == "@keyring"
    assert rendered["fermix_channels"]["slack"]["bot_token"] == "********"
    assert "sk-live-value" not in repr(rendered)
    assert "xoxb-live" not in repr(rendered)
    shown = render_config(loaded, show_secrets=True)
    assert shown["fermix_core"]["providers"]["openai"]["api_key"] == "sk-live-value"


def test_a_file_value_that_is_not_a_table_is_not_papered_over(problems_of) -> None:
    lines = problems_of('[fermix_channels]\nslack = "on"\n', environ={"SLACK_BOT_TOKEN": "xoxb"})
    assert lines == ['fermix_channels.slack: must be a table (got "on")']


def test_apply_env_defaults_to_the_process_environment(registry, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-process")
    overlays = env_overlays(registry, secret_fields({}, registry))
    merged, applied, origins = apply_env({}, overlays)
    assert merged["fermix_core"]["providers"]["openai"]["api_key"] == "sk-process"
    assert "OPENAI_API_KEY" in applied
    assert origins[("fermix_core", "providers", "openai", "api_key")] == "OPENAI_API_KEY"
    assert os.environ["OPENAI_API_KEY"] == "sk-process"


def test_env_errors_do_not_echo_secret_values(problems_of) -> None:
    lines = problems_of("", environ={"FERMIX_TRANSCRIPTION_XAI_API_KEY": "@bogus-ref"})
    assert lines == [
        'fermix_core.transcription.xai_api_key: unknown secret reference; the only "@" form is '
        '"@keyring" (from environment variable FERMIX_TRANSCRIPTION_XAI_API_KEY)'
    ]
    assert "bogus" not in lines[0]
