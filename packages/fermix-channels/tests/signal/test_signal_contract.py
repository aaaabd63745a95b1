"""The Signal adapter passes the shared channel contract against the stub signal-cli."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from fermix_core.channel import Channel
from fermix_core.testing import ChannelContract, StubChannelHost

from .conftest import make_channel, ss


class TestSignalContract(ChannelContract):
    chat_id = ss.OWNER

    @pytest.fixture(autouse=True)
    def _stub(self) -> Any:
        with ss.StubSignalCli(style="subscription") as stub:
            self.stub = stub
            yield

    def make_channel(self) -> Channel:
        return make_channel(self.stub)

    def make_host(self, channel: Channel) -> StubChannelHost:
        return StubChannelHost("signal", config=channel.config)  # type: ignore[attr-defined]

    async def trigger_inbound(self, channel: Channel, text: str) -> None:
        self.stub.message(text)

    async def sent_texts(self, channel: Channel, chat_id: str) -> list[str]:
        return self.stub.texts_to(chat_id)

    async def provoke_rate_limit(self, channel: Channel, chat_id: str) -> bool:
        error = {"code": -5, "message": "Failed to send message due to rate limiting"}
        await anyio.to_thread.run_sync(self.stub.fail, "send", error)
        return True
