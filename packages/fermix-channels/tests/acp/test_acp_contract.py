"""The ACP adapter passes the shared channel contract, driven by the official ACP client.

Each inbound message is a real ``session/prompt`` from ``agent-client-protocol``'s client
over the adapter's Unix socket; what the "platform" received is what that client got as
``agent_message_chunk`` updates. An ACP chat is a session the client opened, so the
contract's chat id is the session the fixture opens once the adapter runs.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

acp = pytest.importorskip("acp", reason="the agent-client-protocol SDK is not installed")

from acp import PROTOCOL_VERSION, connect_to_agent, text_block  # noqa: E402
from fermix_channels.acp.adapter import AcpChannel  # noqa: E402
from fermix_core.channel import Channel, OutboundMessage  # noqa: E402
from fermix_core.testing import ChannelContract, StubChannelHost  # noqa: E402


class Editor:
    """An ACP client connected to the adapter's socket; records agent message chunks."""

    def __init__(self) -> None:
        self.chunks: dict[str, list[str]] = {}
        self.changed = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        if update.session_update == "agent_message_chunk":
            self.chunks.setdefault(session_id, []).append(update.content.text)
            self.changed.set()

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("not expected")

    def on_connect(self, conn: Any) -> None:
        pass


@asynccontextmanager
async def editor(path: str) -> AsyncIterator[tuple[Any, Editor]]:
    reader, writer = await asyncio.open_unix_connection(path)
    client = Editor()
    conn = connect_to_agent(client, writer, reader)
    try:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        yield conn, client
    finally:
        await conn.close()
        writer.close()


class TestAcpContract(ChannelContract):
    @pytest.fixture
    def anyio_backend(self) -> str:
        return "asyncio"  # the SDK speaks asyncio streams

    def make_channel(self) -> AcpChannel:
        return AcpChannel()

    @asynccontextmanager
    async def _running(self) -> AsyncIterator[tuple[Channel, StubChannelHost]]:
        async with (
            super()._running() as (channel, host),
            editor(str(channel.socket_path)) as (conn, client),
        ):
            self.conn, self.client = conn, client
            self.chat_id = (await conn.new_session(cwd=os.getcwd())).session_id
            yield channel, host

    async def trigger_inbound(self, channel: Channel, text: str) -> None:
        path = str(channel.socket_path)  # type: ignore[attr-defined]
        async with editor(path) as (conn, _client):
            session = await conn.new_session(cwd=os.getcwd())
            answer = await conn.prompt(session_id=session.session_id, prompt=[text_block(text)])
            assert answer.stop_reason == "end_turn"

    async def sent_texts(self, channel: Channel, chat_id: str) -> list[str]:
        with anyio.fail_after(10):
            while not self.client.chunks.get(chat_id):
                self.client.changed.clear()
                await self.client.changed.wait()
        return ["".join(self.client.chunks[chat_id])]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_socket_is_private_and_messages_are_local_operator_text(anyio_backend) -> None:
    channel = AcpChannel()
    async with StubChannelHost("acp") as host:
        await channel.start(host)
        try:
            path = channel.socket_path
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
            async with editor(str(path)) as (conn, client):
                sid = (await conn.new_session(cwd=os.getcwd())).session_id
                await conn.prompt(session_id=sid, prompt=[text_block("/help me")])
                message = host.deliveries[0]
                assert message.local and message.text == "/help me"
                assert message.chat_id == sid and message.sender_id == "operator"
                with pytest.raises(acp.RequestError):
                    await conn.new_session(cwd="relative/dir")
                await channel.send(
                    OutboundMessage(chat_id=sid, text="a picture", attachments=[_image()])
                )
                with anyio.fail_after(10):
                    while len(client.chunks.get(sid, [])) < 2:
                        client.changed.clear()
                        await client.changed.wait()
                assert "chart.png" in client.chunks[sid][1]
        finally:
            await channel.stop()
        assert not path.exists()


def _image() -> Any:
    from fermix_core.channel import Attachment, AttachmentKind

    return Attachment(kind=AttachmentKind.IMAGE, data=b"\x89PNG", filename="chart.png")
