"""Channel config models: strict keys, streaming, ids, owner inference and secrets."""

from __future__ import annotations

import importlib

import pytest
from fermix_channels.acp.config import AcpConfig
from fermix_channels.config import RemoteChannelConfig
from fermix_channels.discord.config import DiscordConfig
from fermix_channels.signal.config import SignalConfig
from fermix_channels.slack.config import SlackConfig
from fermix_channels.telegram.config import TelegramConfig
from fermix_channels.whatsapp.config import WhatsAppConfig
from fermix_core.specs import resolve_ref
from pydantic import BaseModel, ValidationError

REMOTE_MODELS: list[type[RemoteChannelConfig]] = [
    TelegramConfig,
    WhatsAppConfig,
    SlackConfig,
    DiscordConfig,
    SignalConfig,
]
ALL_MODELS: list[type[BaseModel]] = [*REMOTE_MODELS, AcpConfig]


def allowlist(model: type[RemoteChannelConfig], ids: object) -> RemoteChannelConfig:
    return model.model_validate({model.allowlist_key: ids})


def test_spec_refs_point_at_these_models() -> None:
    for model in ALL_MODELS:
        name = model.channel  # type: ignore[attr-defined]
        spec = importlib.import_module(f"fermix_channels.{name}.plugin").SPEC
        assert resolve_ref(spec.config_model) is model


@pytest.mark.parametrize("model", ALL_MODELS)
def test_empty_section_is_valid(model: type[BaseModel]) -> None:
    model.model_validate({})


@pytest.mark.parametrize("model", ALL_MODELS)
@pytest.mark.parametrize("key", ["allowed_user_id", "Streaming", "token", "webhook_url"])
def test_unknown_keys_fail_naming_the_key(model: type[BaseModel], key: str) -> None:
    with pytest.raises(ValidationError) as info:
        model.model_validate({key: "x"})
    assert key in str(info.value)
    assert info.value.errors()[0]["type"] == "extra_forbidden"


def test_allowlist_key_matches_the_env_var_vocabulary() -> None:
    assert TelegramConfig.allowlist_key == "allowed_user_ids"
    assert SlackConfig.allowlist_key == "allowed_user_ids"
    assert DiscordConfig.allowlist_key == "allowed_user_ids"
    assert WhatsAppConfig.allowlist_key == "allowed_sender_ids"
    assert SignalConfig.allowlist_key == "allowed_sender_ids"
    with pytest.raises(ValidationError):
        WhatsAppConfig.model_validate({"allowed_user_ids": ["15551234567"]})
    with pytest.raises(ValidationError):
        TelegramConfig.model_validate({"allowed_sender_ids": ["1"]})


def test_album_debounce_only_on_telegram_and_whatsapp() -> None:
    assert TelegramConfig().album_debounce_ms == 3000
    assert WhatsAppConfig().album_debounce_ms == 3000
    assert TelegramConfig(album_debounce_ms=0).album_debounce_ms == 0
    for model in (SlackConfig, DiscordConfig, SignalConfig, AcpConfig):
        with pytest.raises(ValidationError):
            model.model_validate({"album_debounce_ms": 3000})


@pytest.mark.parametrize("bad", [-1, "3000", True, 2.5, None])
def test_album_debounce_rejects_non_integers_and_negatives(bad: object) -> None:
    with pytest.raises(ValidationError) as info:
        TelegramConfig.model_validate({"album_debounce_ms": bad})
    assert "album_debounce_ms" in str(info.value)


# --------------------------------------------------------------------------- streaming


@pytest.mark.parametrize("model", REMOTE_MODELS)
@pytest.mark.parametrize("mode", ["off", "draft", "block", None])
def test_streaming_accepts_the_three_modes_and_unset(model, mode) -> None:
    assert model.model_validate({"streaming": mode}).streaming == mode


@pytest.mark.parametrize("model", REMOTE_MODELS)
@pytest.mark.parametrize("bad", ["on", "Draft", "", "blocks", True, 1, ["block"]])
def test_bad_streaming_values_name_the_three_valid_ones(model, bad) -> None:
    with pytest.raises(ValidationError) as info:
        model.model_validate({"streaming": bad})
    message = str(info.value)
    assert "streaming" in message
    for mode in ('"off"', '"draft"', '"block"'):
        assert mode in message


def test_streaming_assignment_is_validated_too() -> None:
    config = SlackConfig()
    with pytest.raises(ValidationError):
        config.streaming = "fast"  # type: ignore[assignment]
    assert config.streaming is None


def test_acp_has_no_streaming_key() -> None:
    with pytest.raises(ValidationError):
        AcpConfig.model_validate({"streaming": "block"})


def test_effective_streaming_derives_from_the_channel() -> None:
    assert TelegramConfig().effective_streaming(supports_draft=True) == "draft"
    assert SlackConfig().effective_streaming(supports_draft=False) == "block"
    assert TelegramConfig(streaming="block").effective_streaming(supports_draft=True) == "block"
    assert SlackConfig(streaming="off").effective_streaming(supports_draft=False) == "off"
    # An explicit draft where editing is impossible does not stream, and does not fall back.
    assert SlackConfig(streaming="draft").effective_streaming(supports_draft=False) == "off"


# --------------------------------------------------------------------------- ids


@pytest.mark.parametrize("model", REMOTE_MODELS)
def test_ids_normalize_to_strings(model) -> None:
    config = allowlist(model, [123, " 456 ", "456", "", 789])
    assert config.allowed_ids() == ["123", "456", "789"]


@pytest.mark.parametrize("model", REMOTE_MODELS)
def test_an_id_string_is_split_on_commas_and_whitespace(model) -> None:
    assert allowlist(model, "1, 2,,3\n4 ,").allowed_ids() == ["1", "2", "3", "4"]
    assert allowlist(model, "").allowed_ids() == []


@pytest.mark.parametrize("model", REMOTE_MODELS)
@pytest.mark.parametrize(
    "bad", [[True], [1.5], [["1"]], [{"id": "1"}], ["12 34"], ["1,2"], {"1": "x"}, 3.0]
)
def test_malformed_ids_are_rejected(model, bad) -> None:
    with pytest.raises(ValidationError) as info:
        allowlist(model, bad)
    assert model.allowlist_key in str(info.value)


def test_owner_and_command_allowlist_are_normalized() -> None:
    config = TelegramConfig(owner_user_id=123456789, command_allowlist="987654321, 555")
    assert config.owner_user_id == "123456789"
    assert config.command_allowlist == ["987654321", "555"]
    assert TelegramConfig(owner_user_id="   ").owner_user_id is None
    with pytest.raises(ValidationError):
        TelegramConfig(owner_user_id="123 456")
    with pytest.raises(ValidationError):
        TelegramConfig(owner_user_id=True)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- owner


@pytest.mark.parametrize("model", REMOTE_MODELS)
def test_explicit_owner_wins(model) -> None:
    config = model.model_validate({"owner_user_id": "42", model.allowlist_key: ["7"]})
    assert config.effective_owner() == "42"


@pytest.mark.parametrize("model", REMOTE_MODELS)
def test_single_allowlisted_id_is_the_owner(model) -> None:
    assert allowlist(model, ["7"]).effective_owner() == "7"


@pytest.mark.parametrize("model", REMOTE_MODELS)
def test_several_allowlisted_ids_make_no_owner(model) -> None:
    assert allowlist(model, ["7", "8"]).effective_owner() is None
    assert model().effective_owner() is None


def test_duplicates_do_not_hide_a_single_owner() -> None:
    assert allowlist(SlackConfig, ["U1", "U1"]).effective_owner() == "U1"


def test_command_allowlist_never_promotes_an_owner() -> None:
    assert TelegramConfig(command_allowlist=["7"]).effective_owner() is None


def test_owner_inference_follows_later_changes() -> None:
    config = TelegramConfig(owner_user_id="1", allowed_user_ids=["2", "3"])
    assert config.model_copy(update={"owner_user_id": None}).effective_owner() is None
    config.allowed_user_ids = ["3"]
    config.owner_user_id = None
    assert config.effective_owner() == "3"


def test_trust_gap_explains_what_to_set() -> None:
    gap = WhatsAppConfig(enabled=True).trust_gap()
    assert gap is not None
    assert "[fermix_channels.whatsapp]" in gap
    assert "owner_user_id" in gap
    assert "allowed_sender_ids" in gap
    assert "fermix setup" in gap
    assert WhatsAppConfig(enabled=False).trust_gap() is None
    assert WhatsAppConfig(enabled=True, owner_user_id="15551234567").trust_gap() is None
    assert TelegramConfig(allowed_user_ids=["1", "2"]).trust_gap() is None


def test_acp_rejects_trust_keys() -> None:
    for key, value in (
        ("owner_user_id", "1"),
        ("allowed_user_ids", ["1"]),
        ("command_allowlist", ["1"]),
    ):
        with pytest.raises(ValidationError):
            AcpConfig.model_validate({key: value})
    assert AcpConfig().enabled is True


# --------------------------------------------------------------------------- credentials


CREDENTIALS = {
    TelegramConfig: ["bot_token"],
    WhatsAppConfig: ["access_token", "verify_token", "app_secret"],
    SlackConfig: ["bot_token", "signing_secret", "app_token"],
    DiscordConfig: ["bot_token"],
}


@pytest.mark.parametrize(("model", "keys"), list(CREDENTIALS.items()))
def test_credentials_accept_plaintext_and_stay_out_of_repr(model, keys) -> None:
    values = {key: f"plaintext-secret-{i}" for i, key in enumerate(keys)}
    config = model.model_validate(values)
    text = repr(config) + str(config)
    for value in values.values():
        assert value not in text


def test_a_token_under_a_misspelt_key_is_not_echoed_in_the_error() -> None:
    with pytest.raises(ValidationError) as info:
        TelegramConfig.model_validate({"bot_tokn": "123456:AAH-super-secret"})
    assert "bot_tokn" in str(info.value)
    assert "super-secret" not in str(info.value)


@pytest.mark.parametrize("bad", ["12345", "+0123456789", "15551234567", "+1 555 123 4567"])
def test_signal_account_must_be_international_format(bad: str) -> None:
    with pytest.raises(ValidationError) as info:
        SignalConfig(account=bad)
    assert "+15551234567" in str(info.value)


def test_signal_identifiers() -> None:
    config = SignalConfig(account=" +15551234567 ", cli_path="  ")
    assert config.account == "+15551234567"
    assert config.cli_path is None


def test_discord_bot_user_id_is_a_snowflake() -> None:
    assert DiscordConfig(bot_user_id=80351110224678912).bot_user_id == "80351110224678912"
    with pytest.raises(ValidationError):
        DiscordConfig(bot_user_id="my-bot")


def test_whatsapp_phone_number_id_is_numeric() -> None:
    assert WhatsAppConfig(phone_number_id=" 106540352242922 ").phone_number_id == "106540352242922"
    with pytest.raises(ValidationError) as info:
        WhatsAppConfig(phone_number_id="+1 555 123 4567")
    assert "Phone number ID" in str(info.value)


SECRET_FORMS = [
    "@keyring",
    {"source": "env", "env": "WORK_SLACK_TOKEN"},
    {"source": "command", "command": ["pass", "show", "fermix/slack"]},
]


@pytest.mark.parametrize(("model", "keys"), list(CREDENTIALS.items()))
@pytest.mark.parametrize("form", SECRET_FORMS)
def test_credentials_accept_every_secret_form(model, keys, form) -> None:
    config = model.model_validate(dict.fromkeys(keys, form))
    for key in keys:
        stored = getattr(config, key)
        if not isinstance(stored, str):
            stored = stored.model_dump(exclude_defaults=True)
        assert stored == form


@pytest.mark.parametrize(
    "bad",
    ["", "   ", "@vault", {"source": "file", "path": "/tmp/x"}, {"source": "env"}, 12345],
)
def test_credentials_reject_malformed_secrets(bad: object) -> None:
    with pytest.raises(ValidationError) as info:
        SlackConfig.model_validate({"bot_token": bad})
    assert "bot_token" in str(info.value)


def test_only_credentials_are_secret_slots() -> None:
    """Core finds secret slots by their type; identifiers must not be masked or keyringed."""
    from fermix_core.config.secret import is_secret_annotation

    identifiers = {
        WhatsAppConfig: ["phone_number_id"],
        DiscordConfig: ["bot_user_id"],
        SignalConfig: ["account", "cli_path"],
    }
    for model in ALL_MODELS:
        secret_keys = {
            key
            for key, field in model.model_fields.items()
            if is_secret_annotation(field.annotation)
        }
        assert secret_keys == set(CREDENTIALS.get(model, [])), model.__name__
        for key in identifiers.get(model, []):
            assert key not in secret_keys
