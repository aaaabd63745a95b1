"""The six first-party channel specs: soundness, env overlays, abilities, registration."""

from __future__ import annotations

import importlib

import pytest
from fermix_core.plugins.host import PluginHost
from fermix_core.specs import ChannelSpec, resolve_ref
from fermix_core.testing.imports import loaded_after
from pydantic import BaseModel

NAMES = ["telegram", "whatsapp", "slack", "discord", "signal", "acp"]
REMOTE = ["telegram", "whatsapp", "slack", "discord", "signal"]

#: The environment variables channels.md lists, and the key each one overlays.
DOCUMENTED_ENV = {
    "telegram": {"TELEGRAM_ALLOWED_USER_IDS": "allowed_user_ids"},
    "whatsapp": {
        "WHATSAPP_ACCESS_TOKEN": "access_token",
        "WHATSAPP_PHONE_NUMBER_ID": "phone_number_id",
        "WHATSAPP_VERIFY_TOKEN": "verify_token",
        "WHATSAPP_APP_SECRET": "app_secret",
        "WHATSAPP_ALLOWED_SENDER_IDS": "allowed_sender_ids",
    },
    "slack": {
        "SLACK_BOT_TOKEN": "bot_token",
        "SLACK_SIGNING_SECRET": "signing_secret",
        "SLACK_APP_TOKEN": "app_token",
        "SLACK_ALLOWED_USER_IDS": "allowed_user_ids",
    },
    "discord": {
        "DISCORD_BOT_TOKEN": "bot_token",
        "DISCORD_BOT_USER_ID": "bot_user_id",
        "DISCORD_ALLOWED_USER_IDS": "allowed_user_ids",
    },
    "signal": {
        "SIGNAL_ACCOUNT": "account",
        "SIGNAL_CLI_PATH": "cli_path",
        "SIGNAL_ALLOWED_SENDER_IDS": "allowed_sender_ids",
    },
    "acp": {},
}

#: Plausible values as an environment overlay would deliver them (always strings).
ENV_VALUES = {
    "TELEGRAM_ALLOWED_USER_IDS": "123456789, 987654321",
    "WHATSAPP_ACCESS_TOKEN": "EAAG-test-access-token",
    "WHATSAPP_PHONE_NUMBER_ID": "106540352242922",
    "WHATSAPP_VERIFY_TOKEN": "verify-me",
    "WHATSAPP_APP_SECRET": "0123456789abcdef",
    "WHATSAPP_ALLOWED_SENDER_IDS": "15551234567",
    "SLACK_BOT_TOKEN": "xoxb-test-token",
    "SLACK_SIGNING_SECRET": "8f742231b10e8888abcd99yyyzzz85a5",
    "SLACK_APP_TOKEN": "xapp-1-A0TEST-1-abcdef",
    "SLACK_ALLOWED_USER_IDS": "U012AB3CD U045EF6GH",
    "DISCORD_BOT_TOKEN": "discord-test-token",
    "DISCORD_BOT_USER_ID": "80351110224678912",
    "DISCORD_ALLOWED_USER_IDS": "80351110224678913",
    "SIGNAL_ACCOUNT": "+15551234567",
    "SIGNAL_CLI_PATH": "/opt/signal-cli/bin/signal-cli",
    "SIGNAL_ALLOWED_SENDER_IDS": "+15557654321,+15550001111",
}


def spec_of(name: str) -> ChannelSpec:
    return importlib.import_module(f"fermix_channels.{name}.plugin").SPEC


def model_of(name: str) -> type[BaseModel]:
    ref = spec_of(name).config_model
    assert ref is not None
    return resolve_ref(ref)


def loaded_host() -> PluginHost:
    host = PluginHost()
    for name in NAMES:
        module = importlib.import_module(f"fermix_channels.{name}.plugin")
        record = host.register(module, name=f"channels.{name}")
        assert record.status == "loaded", record.error
    return host


@pytest.mark.parametrize("name", NAMES)
def test_spec_is_sound(name: str) -> None:
    spec = spec_of(name)
    assert spec.name == name
    assert spec.problems() == []
    assert spec.label


@pytest.mark.parametrize("name", NAMES)
def test_hook_yields_exactly_the_module_spec(name: str) -> None:
    module = importlib.import_module(f"fermix_channels.{name}.plugin")
    assert list(module.fermix_channels()) == [module.SPEC]


@pytest.mark.parametrize("name", NAMES)
def test_factory_names_the_adapter_inside_the_channel_package(name: str) -> None:
    factory = spec_of(name).factory
    assert isinstance(factory, str)
    assert factory.startswith(f"fermix_channels.{name}.adapter:")


def test_host_collects_all_six_and_their_sections_without_errors() -> None:
    registry = loaded_host().collect()
    assert registry.errors == []
    assert set(registry.typed(ChannelSpec)) == set(NAMES)
    sections = registry.config_sections()
    assert set(sections) == {f"fermix_channels.{n}" for n in NAMES}
    for name in NAMES:
        ref, source = sections[f"fermix_channels.{name}"]
        # A first-party module registered in process keeps its distribution.
        assert source == f"channels.{name} (fermix-channels 0.1.0)"
        assert resolve_ref(ref) is model_of(name)


@pytest.mark.parametrize("name", NAMES)
def test_env_map_is_exactly_the_documented_one(name: str) -> None:
    assert dict(spec_of(name).env) == DOCUMENTED_ENV[name]


def test_telegram_bot_token_is_never_an_env_overlay() -> None:
    for name in NAMES:
        env = spec_of(name).env
        assert "TELEGRAM_BOT_TOKEN" not in env, name
    # The key exists, it just has no environment overlay.
    assert "bot_token" in model_of("telegram").model_fields
    assert "bot_token" not in spec_of("telegram").env.values()


@pytest.mark.parametrize("name", NAMES)
def test_every_env_target_is_a_field_of_the_config_model(name: str) -> None:
    fields = model_of(name).model_fields
    for var, key in spec_of(name).env.items():
        assert key in fields, f"{var} -> {key} is not a key of [fermix_channels.{name}]"
        assert var.startswith(f"{name.upper()}_")


@pytest.mark.parametrize("name", REMOTE)
def test_env_overlay_values_validate_through_the_model(name: str) -> None:
    overlay = {key: ENV_VALUES[var] for var, key in spec_of(name).env.items()}
    config = model_of(name).model_validate({"enabled": True, **overlay})
    assert config.allowed_ids()  # every remote channel maps its allowlist
    assert config.trust_gap() is None


def test_env_overlays_split_id_lists() -> None:
    slack = model_of("slack").model_validate(
        {"allowed_user_ids": ENV_VALUES["SLACK_ALLOWED_USER_IDS"]}
    )
    assert slack.allowed_user_ids == ["U012AB3CD", "U045EF6GH"]
    signal = model_of("signal").model_validate(
        {"allowed_sender_ids": ENV_VALUES["SIGNAL_ALLOWED_SENDER_IDS"]}
    )
    assert signal.allowed_sender_ids == ["+15557654321", "+15550001111"]


def test_remote_flags_and_enablement_defaults() -> None:
    for name in NAMES:
        spec = spec_of(name)
        assert spec.remote == (name != "acp"), name
        assert spec.enabled_by_default == (name in ("telegram", "acp")), name
        assert model_of(name)().enabled == spec.enabled_by_default, name


def test_abilities() -> None:
    # The channels that edit their own messages in place: Telegram, and Discord (PATCH).
    assert [n for n in NAMES if spec_of(n).supports_draft] == ["telegram", "discord"]
    assert [n for n in NAMES if spec_of(n).supports_reactions] == REMOTE


@pytest.mark.parametrize("name", NAMES)
def test_every_key_is_documented(name: str) -> None:
    model = model_of(name)
    assert model.model_config.get("extra") == "forbid"
    for key, field in model.model_fields.items():
        assert field.description, f"[fermix_channels.{name}] {key} has no description"


def test_registration_imports_neither_pydantic_nor_platform_sdks() -> None:
    code = (
        "import importlib\n"
        f"for name in {NAMES!r}:\n"
        "    importlib.import_module(f'fermix_channels.{name}.plugin')\n"
    )
    heavy = ("pydantic", "httpx", "starlette", "slack_sdk", "websockets", "acp")
    assert loaded_after(code, heavy) == []


def test_docs_cover_every_key_and_env_var() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[3] / "docs" / "channels.md").read_text()
    for name in NAMES:
        assert f"[fermix_channels.{name}]" in doc, name
        for key in model_of(name).model_fields:
            assert f"`{key}`" in doc, f"{name}.{key} is not documented"
        for var in spec_of(name).env:
            assert f"`{var}`" in doc, var


def test_entry_point_table_loads_and_one_channel_can_be_disabled() -> None:
    from importlib.metadata import EntryPoint

    eps = [
        EntryPoint(name=f"channels.{name}", value=f"fermix_channels.{name}.plugin", group="fermix")
        for name in NAMES
    ]
    host = PluginHost()
    records = host.load_entry_points(only=None, disabled=["channels.signal"], entry_points=eps)
    status = {r.name: r.status for r in records}
    assert status.pop("channels.signal") == "disabled"
    assert set(status.values()) == {"loaded"}
    registry = host.collect()
    assert registry.errors == []
    assert set(registry.typed(ChannelSpec)) == set(NAMES) - {"signal"}
    assert "fermix_channels.signal" not in registry.config_sections()
