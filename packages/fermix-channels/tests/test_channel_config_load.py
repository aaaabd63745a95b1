"""The channel specs and models driving core's real config loader over a real config.toml."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from fermix_core.config.loader import check_config
from fermix_core.home import FermixHome
from fermix_core.plugins.host import PluginHost
from fermix_core.plugins.registry import SpecRegistry

NAMES = ["telegram", "whatsapp", "slack", "discord", "signal", "acp"]


@pytest.fixture
def registry() -> SpecRegistry:
    host = PluginHost()
    for name in NAMES:
        module = importlib.import_module(f"fermix_channels.{name}.plugin")
        host.register(module, name=f"channels.{name}")
    registry = host.collect()
    assert registry.errors == []
    return registry


def check(tmp_path: Path, registry: SpecRegistry, toml: str, environ: dict[str, str] | None = None):
    (tmp_path / "config.toml").write_text(toml)
    home = FermixHome.resolve({"FERMIX_HOME": str(tmp_path)})
    return check_config(home, registry, environ=environ or {})


def test_sections_load_into_the_channel_models(tmp_path: Path, registry: SpecRegistry) -> None:
    report = check(
        tmp_path,
        registry,
        """
[fermix_channels.telegram]
bot_token = "@keyring"
owner_user_id = 123456789
command_allowlist = ["987654321"]
streaming = "block"

[fermix_channels.signal]
enabled = true
account = "+15551234567"
allowed_sender_ids = ["+15557654321"]

[fermix_channels.acp]
enabled = false
""",
    )
    assert report.problems == []
    loaded = report.loaded
    assert loaded is not None
    telegram = loaded.section("fermix_channels.telegram")
    assert telegram.owner_user_id == "123456789"
    assert telegram.effective_streaming(supports_draft=True) == "block"
    assert loaded.section("fermix_channels.signal").effective_owner() == "+15557654321"
    assert loaded.section("fermix_channels.acp").enabled is False


def test_env_overlays_fill_channel_keys_but_never_the_telegram_token(
    tmp_path: Path, registry: SpecRegistry
) -> None:
    environ = {
        "TELEGRAM_BOT_TOKEN": "123456:stray-shell-token",
        "TELEGRAM_ALLOWED_USER_IDS": "111,222",
        "SLACK_BOT_TOKEN": "xoxb-from-env",
        "SLACK_ALLOWED_USER_IDS": "U012AB3CD",
        "SIGNAL_CLI_PATH": "/opt/signal-cli/bin/signal-cli",
    }
    report = check(
        tmp_path,
        registry,
        "[fermix_channels.telegram]\n\n[fermix_channels.slack]\nenabled = true\n",
        environ=environ,
    )
    assert report.problems == []
    loaded = report.loaded
    assert loaded is not None
    telegram = loaded.section("fermix_channels.telegram")
    assert telegram.bot_token is None
    assert telegram.allowed_user_ids == ["111", "222"]
    assert telegram.effective_owner() is None  # two allowed ids: nobody is promoted
    slack = loaded.section("fermix_channels.slack")
    assert slack.bot_token == "xoxb-from-env"
    assert slack.effective_owner() == "U012AB3CD"
    assert "TELEGRAM_BOT_TOKEN" not in loaded.env_applied
    assert {"TELEGRAM_ALLOWED_USER_IDS", "SLACK_BOT_TOKEN"} <= set(loaded.env_applied)


def test_bad_streaming_names_the_full_key_and_the_three_values(
    tmp_path: Path, registry: SpecRegistry
) -> None:
    report = check(tmp_path, registry, '[fermix_channels.slack]\nstreaming = "live"\n')
    problems = {p.path: p.message for p in report.problems}
    message = problems["fermix_channels.slack.streaming"]
    for mode in ('"off"', '"draft"', '"block"'):
        assert mode in message


def test_unknown_keys_are_reported_with_their_path_and_without_their_value(
    tmp_path: Path, registry: SpecRegistry
) -> None:
    report = check(
        tmp_path,
        registry,
        '[fermix_channels.telegram]\ntelegram_bot_token = "123456:AAH-very-secret"\n'
        '[fermix_channels.acp]\nowner_user_id = "1"\n',
    )
    paths = {p.path for p in report.problems}
    assert "fermix_channels.telegram.telegram_bot_token" in paths
    assert "fermix_channels.acp.owner_user_id" in paths
    assert "very-secret" not in "\n".join(str(p) for p in report.problems)
