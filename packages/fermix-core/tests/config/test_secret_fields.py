"""``secret_fields``: every slot, its canonical ENV name, and the value config.toml stores."""

from __future__ import annotations

import tomlkit
from fermix_core.config import CommandSecret, EnvSecret, Secret, is_secret_annotation, secret_fields
from fermix_core.config.secret import derived_env_name, mask
from fermix_core.hookspecs import hookimpl
from fermix_core.plugins import PluginHost
from fermix_core.specs import ChannelSpec
from pydantic import BaseModel, ConfigDict


def test_every_core_and_plugin_slot_is_listed_with_its_env_name(registry) -> None:
    slots = {s.path: (s.env, s.overridable) for s in secret_fields({}, registry)}
    assert slots == {
        ("fermix_core", "providers", "openai", "api_key"): ("OPENAI_API_KEY", True),
        ("fermix_core", "providers", "anthropic", "api_key"): ("ANTHROPIC_API_KEY", True),
        ("fermix_core", "providers", "openrouter", "api_key"): ("OPENROUTER_API_KEY", True),
        ("fermix_core", "tools", "web_search", "api_key"): (
            "FERMIX_TOOLS_WEB_SEARCH_API_KEY",
            True,
        ),
        ("fermix_core", "tools", "generate_image", "google_api_key"): ("GEMINI_API_KEY", True),
        ("fermix_core", "transcription", "openai_api_key"): (
            "FERMIX_TRANSCRIPTION_OPENAI_API_KEY",
            True,
        ),
        ("fermix_core", "transcription", "xai_api_key"): ("FERMIX_TRANSCRIPTION_XAI_API_KEY", True),
        ("fermix_core", "transcription", "deepgram_api_key"): (
            "FERMIX_TRANSCRIPTION_DEEPGRAM_API_KEY",
            True,
        ),
        ("fermix_core", "oauth", "google", "client_secret"): (
            "FERMIX_OAUTH_GOOGLE_CLIENT_SECRET",
            True,
        ),
        ("fermix_core", "oauth", "github", "client_secret"): (
            "FERMIX_OAUTH_GITHUB_CLIENT_SECRET",
            True,
        ),
        ("fermix_core", "oauth", "notion", "client_secret"): (
            "FERMIX_OAUTH_NOTION_CLIENT_SECRET",
            True,
        ),
        ("fermix_core", "oauth", "x", "client_secret"): ("FERMIX_OAUTH_X_CLIENT_SECRET", True),
        ("fermix_core", "oauth", "slack", "client_secret"): (
            "FERMIX_OAUTH_SLACK_CLIENT_SECRET",
            True,
        ),
        ("fermix_channels", "slack", "bot_token"): ("SLACK_BOT_TOKEN", True),
        ("fermix_channels", "slack", "signing_secret"): ("SLACK_SIGNING_SECRET", True),
        ("fermix_channels", "telegram", "bot_token"): ("TELEGRAM_BOT_TOKEN", False),
        ("fermix_weather", "api_key"): ("FERMIX_WEATHER_API_KEY", True),
    }


def test_keyless_providers_have_no_slot(registry) -> None:
    paths = [s.path for s in secret_fields({}, registry)]
    assert ("fermix_core", "providers", "ollama", "api_key") not in paths


def test_values_come_from_the_file_in_every_form(load, registry) -> None:
    text = """
[fermix_core.providers.openai]
api_key = "sk-plain"
[fermix_core.providers.anthropic]
api_key = "@keyring"
[fermix_core.transcription]
openai_api_key = { source = "env", env = "WORK_KEY" }
deepgram_api_key = { source = "command", command = ["pass", "show", "dg"] }
[fermix_core.plugin_secrets]
notion = "@keyring"
"fermix-gmail" = "@keyring"
"""
    loaded = load(text, environ={"OPENAI_API_KEY": "sk-from-env"})
    values = {s.path: s.value for s in secret_fields(loaded, registry)}
    assert (
        values[("fermix_core", "providers", "openai", "api_key")] == "sk-plain"
    )  # not the env value
    assert values[("fermix_core", "providers", "anthropic", "api_key")] == "@keyring"
    assert values[("fermix_core", "transcription", "openai_api_key")] == EnvSecret(
        source="env", env="WORK_KEY"
    )
    assert values[("fermix_core", "transcription", "deepgram_api_key")] == CommandSecret(
        source="command", command=["pass", "show", "dg"]
    )
    assert values[("fermix_core", "providers", "openrouter", "api_key")] is None
    envs = {s.path: s.env for s in secret_fields(loaded, registry)}
    assert envs[("fermix_core", "plugin_secrets", "notion")] == "FERMIX_PLUGIN_NOTION_API_KEY"
    assert (
        envs[("fermix_core", "plugin_secrets", "fermix-gmail")]
        == "FERMIX_PLUGIN_FERMIX_GMAIL_API_KEY"
    )
    # A tomlkit document and a plain dict give the same answer as a LoadedConfig.
    doc = tomlkit.parse(text)
    assert secret_fields(doc, registry) == secret_fields(loaded, registry)
    assert secret_fields(doc.unwrap(), registry) == secret_fields(loaded, registry)


def test_web_search_key_follows_the_selected_backend(registry) -> None:
    data = {"fermix_core": {"tools": {"web_search": {"backend": "brave", "api_key": "@keyring"}}}}
    slot = next(
        s for s in secret_fields(data, registry) if s.path[-2:] == ("web_search", "api_key")
    )
    assert (slot.env, slot.value) == ("BRAVE_API_KEY", "@keyring")


def test_unmapped_channel_secrets_are_keyring_only() -> None:
    class Matrix(BaseModel):
        model_config = ConfigDict(extra="forbid")
        access_token: Secret | None = None
        password: Secret | None = None

    class Plugin:
        @hookimpl
        def fermix_channels(self):
            yield ChannelSpec(
                name="matrix",
                factory="x.y:z",
                config_model=Matrix,
                env={"MATRIX_ACCESS_TOKEN": "access_token"},
            )

    host = PluginHost()
    host.register(Plugin(), "channels.matrix")
    slots = {
        s.path[-1]: s for s in secret_fields({}, host.collect()) if s.path[0] == "fermix_channels"
    }
    assert (slots["access_token"].env, slots["access_token"].overridable) == (
        "MATRIX_ACCESS_TOKEN",
        True,
    )
    assert (slots["password"].env, slots["password"].overridable) == ("MATRIX_PASSWORD", False)


def test_invalid_stored_references_are_reported_as_empty_not_guessed(registry) -> None:
    data = {"fermix_core": {"providers": {"openai": {"api_key": {"source": "vault"}}}}}
    slot = next(s for s in secret_fields(data, registry) if s.env == "OPENAI_API_KEY")
    assert slot.value is None


def test_secret_annotation_detection() -> None:
    class M(BaseModel):
        a: Secret
        b: Secret | None = None
        c: str | None = None
        d: dict[str, Secret] = {}

    fields = M.model_fields
    assert is_secret_annotation(fields["b"].annotation)
    assert not is_secret_annotation(fields["c"].annotation)
    assert not is_secret_annotation(fields["d"].annotation)
    from fermix_core.config.messages import field_annotation

    assert is_secret_annotation(field_annotation(M, "a"))


def test_derived_names_and_masking() -> None:
    assert derived_env_name(("fermix_core", "transcription", "openai_api_key")) == (
        "FERMIX_TRANSCRIPTION_OPENAI_API_KEY"
    )
    assert derived_env_name(("fermix_weather", "api_key")) == "FERMIX_WEATHER_API_KEY"
    assert derived_env_name(("acme", "web-hook", "token")) == "FERMIX_ACME_WEB_HOOK_TOKEN"
    assert mask("sk-abc") == "********"
    assert mask("@keyring") == "@keyring"
    assert mask(EnvSecret(source="env", env="X")) == {"source": "env", "env": "X"}
    assert mask(None) is None
