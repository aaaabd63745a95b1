"""The Slack adapter passes the channel contract, in both transports, against the loopback
Slack."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from fermix_channels.slack.adapter import WEBHOOK_PATH, SlackChannel
from fermix_core.channel import Channel, WebhookRequest
from fermix_core.testing import StubChannelHost
from fermix_core.testing.contracts import ChannelContract
from fermix_core.testing.loopback import Reply

#: The loopback Slack helpers, loaded by conftest.py.
fs = sys.modules["fermix_channels_tests_fake_slack"]


class _SlackContract(ChannelContract):
    chat_id = "D0CONTRACT"
    overrides: dict[str, Any] = {}

    @pytest.fixture(autouse=True)
    def _slack(self, fake: Any, config_for: Any) -> None:
        self.fake = fake
        self.config = config_for(**self.overrides)

    def make_channel(self) -> SlackChannel:
        return SlackChannel(config=self.config)

    def make_host(self, channel: Channel) -> StubChannelHost:
        return StubChannelHost("slack", config=self.config)

    async def sent_texts(self, channel: Channel, chat_id: str) -> list[str]:
        return self.fake.texts(chat_id)

    async def provoke_rate_limit(self, channel: Channel, chat_id: str) -> bool:
        self.fake.fail(
            "chat.postMessage",
            Reply(
                status=429, headers={"Retry-After": "3"}, body={"ok": False, "error": "ratelimited"}
            ),
        )
        return True


class TestSlackEventsApi(_SlackContract):
    async def trigger_inbound(self, channel: Channel, text: str) -> None:
        assert isinstance(channel, SlackChannel)
        body = json.dumps(fs.message_event(text, channel=self.chat_id)).encode()
        (route,) = channel.webhook_routes()
        response = await route.handler(
            WebhookRequest("POST", WEBHOOK_PATH, {}, fs.sign(body), body)
        )
        assert response.status == 200


class TestSlackSocketMode(_SlackContract):
    overrides = {"mode": "socket", "app_token": fs.APP_TOKEN}

    async def trigger_inbound(self, channel: Channel, text: str) -> None:
        envelope = await self.fake.push_event(fs.message_event(text, channel=self.chat_id))
        await self.fake.wait_ack(envelope)
