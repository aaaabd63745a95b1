"""The Discord adapter passes the shared channel contract against the loopback Discord."""

from __future__ import annotations

from typing import Any

import pytest
from fermix_channels.discord.adapter import DiscordChannel
from fermix_core.channel import Channel
from fermix_core.testing import ChannelContract, StubChannelHost

from .conftest import fd, make_channel


class TestDiscordContract(ChannelContract):
    chat_id = fd.DM_CHANNEL

    @pytest.fixture(autouse=True)
    async def _fake(self) -> Any:
        async with fd.FakeDiscord() as fake:
            self.fake = fake
            yield

    def make_channel(self) -> DiscordChannel:
        return make_channel(self.fake)

    def make_host(self, channel: Channel) -> StubChannelHost:
        return StubChannelHost("discord", config=channel.config)  # type: ignore[attr-defined]

    async def trigger_inbound(self, channel: Channel, text: str) -> None:
        await self.fake.until(lambda: self.fake.connected)
        await self.fake.message(text)

    async def sent_texts(self, channel: Channel, chat_id: str) -> list[str]:
        return self.fake.texts(chat_id)

    async def provoke_rate_limit(self, channel: Channel, chat_id: str) -> bool:
        self.fake.rate_limit("POST /channels/", 2.0)
        return True
