"""The WhatsApp adapter passes the channel contract against the loopback Graph API."""

from __future__ import annotations

import itertools
import sys
from typing import Any

import pytest
from fermix_channels.whatsapp.adapter import WhatsAppChannel
from fermix_core.channel import Channel, WebhookRequest
from fermix_core.testing import ChannelContract

fg = sys.modules["fermix_channels_tests_fake_graph"]
_ids = itertools.count(1)


class TestWhatsAppContract(ChannelContract):
    chat_id = fg.OWNER

    @pytest.fixture(autouse=True)
    def _graph(self, graph: Any) -> None:
        self.graph = graph

    def make_channel(self) -> WhatsAppChannel:
        return WhatsAppChannel(fg.whatsapp_config(self.graph))

    async def trigger_inbound(self, channel: Channel, text: str) -> None:
        assert isinstance(channel, WhatsAppChannel)
        body = fg.delivery(fg.value([fg.text_message(fg.OWNER, text, f"wamid.C{next(_ids)}")]))
        answer = await channel.handle_webhook(
            WebhookRequest("POST", "/webhook/whatsapp", {}, fg.signed_headers(body), body)
        )
        assert answer.status == 200

    async def sent_texts(self, channel: Channel, chat_id: str) -> list[str]:
        return self.graph.texts(chat_id)

    async def provoke_rate_limit(self, channel: Channel, chat_id: str) -> bool:
        self.graph.fail(chat_id, fg.graph_error(130429, "Rate limit hit", 429))
        return True
