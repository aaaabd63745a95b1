"""Channel credentials resolve through the host, so plugins' secret resolvers are asked."""

from __future__ import annotations

import pytest
from fermix_channels.secrets import require_secret, section_secret
from fermix_channels.telegram.adapter import TelegramChannel
from fermix_core.channel import ChannelError
from fermix_core.hookspecs import hookimpl
from fermix_core.keyring_backend import MemoryKeyring
from fermix_core.plugins import PluginHost
from fermix_core.secrets import SecretResolver
from fermix_core.testing import StubChannelHost
from pydantic import BaseModel

from .conftest import ft, telegram_config

pytestmark = pytest.mark.anyio


class Vault:
    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    @hookimpl
    def fermix_resolve_secret(self, request) -> str | None:
        self.asked.append(request.env)
        return self.answers.get(request.env)


def resolver_with(vault: Vault) -> SecretResolver:
    host = PluginHost()
    host.register(vault, "secrets.vault")
    return SecretResolver(environ={}, host=host, keyring_backend=MemoryKeyring())


async def test_telegram_gets_its_keyring_token_from_a_plugin_resolver(fake) -> None:
    vault = Vault({"TELEGRAM_BOT_TOKEN": ft.TOKEN})
    config = telegram_config(fake, bot_token="@keyring")
    channel = TelegramChannel(config, jitter=lambda: 0.0)
    async with StubChannelHost("telegram", config=config, secrets=resolver_with(vault)) as host:
        await channel.start(host)
        try:
            await fake.wait_polling()
            assert channel.bot_id == ft.BOT_ID
        finally:
            await channel.stop()
    assert vault.asked == ["TELEGRAM_BOT_TOKEN"]


class Section(BaseModel):
    access_token: str | None = None


async def test_section_secrets_take_the_host_resolver_and_keep_the_old_path() -> None:
    vault = Vault({"WHATSAPP_ACCESS_TOKEN": "vaulted"})
    keyring = Section(access_token="@keyring")
    assert (
        await section_secret(
            keyring,
            "whatsapp",
            "access_token",
            "WHATSAPP_ACCESS_TOKEN",
            resolver=resolver_with(vault),
        )
        == "vaulted"
    )
    # The call without a resolver (what adapters written before host.secrets do) still works.
    plain = Section(access_token="plain-token")
    assert await section_secret(plain, "whatsapp", "access_token", "WHATSAPP_ACCESS_TOKEN") == (
        "plain-token"
    )
    with pytest.raises(ChannelError, match="replies need it"):
        await require_secret(
            Section(), "whatsapp", "access_token", "WHATSAPP_ACCESS_TOKEN", "replies need it"
        )
