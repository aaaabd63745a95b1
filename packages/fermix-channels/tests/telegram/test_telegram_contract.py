"""The Telegram adapter passes the shared channel contract against the loopback Bot API."""

from __future__ import annotations

from typing import Any

import pytest
from fermix_channels.telegram.adapter import TelegramChannel
from fermix_core.channel import Channel
from fermix_core.testing import ChannelContract, StubChannelHost

from .conftest import ft, telegram_config


class TestTelegramContract(ChannelContract):
    chat_id = str(ft.OWNER_ID)

    @pytest.fixture(autouse=True)
    async def _fake(self) -> Any:
        async with ft.FakeBotApi() as fake:
            self.fake = fake
            yield

    def make_channel(self) -> TelegramChannel:
        return TelegramChannel(telegram_config(self.fake), jitter=lambda: 0.0)

    def make_host(self, channel: Channel) -> StubChannelHost:
        return StubChannelHost("telegram", config=channel.config)  # type: ignore[attr-defined]

    async def trigger_inbound(self, channel: Channel, text: str) -> None:
        self.fake.message(text)

    async def sent_texts(self, channel: Channel, chat_id: str) -> list[str]:
        return [m.get("text", "") for m in self.fake.sent(chat_id)]

    async def provoke_rate_limit(self, channel: Channel, chat_id: str) -> bool:
        self.fake.fail("sendMessage", 429, "Too Many Requests: retry after 2", retry_after=2)
        return True
