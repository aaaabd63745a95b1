"""Reply ports over channel adapters."""

from __future__ import annotations

import pytest
from fermix_core.channel import ChannelError, InboundMessage
from fermix_core.gateway.reply import ChannelReplyPort, features_of, reply_text, try_reply_text
from fermix_core.gateway.types import ChannelFeatures, ReplyPort
from fermix_core.testing import MemoryChannel, StubChannelHost

pytestmark = pytest.mark.anyio


async def _running(channel: MemoryChannel) -> MemoryChannel:
    await channel.start(StubChannelHost(channel.name))
    return channel


def test_features_follow_the_adapter_flags() -> None:
    full = features_of(MemoryChannel(), reactions=["👍", "❤"])
    assert full == ChannelFeatures(
        local=False,
        reactions=("👍", "❤"),
        draft=True,
        edit=True,
        delete=True,
        streaming="draft",
    )
    any_emoji = features_of(MemoryChannel())
    assert any_emoji.reactions == ()
    bare = features_of(
        MemoryChannel(supports_edit=False, supports_delete=False, supports_reactions=False),
        reactions=["👍"],
        draft=True,
        local=True,
        slash_commands=False,
    )
    # A channel that cannot edit cannot draft, whatever the caller asked for.
    assert bare == ChannelFeatures(
        local=True,
        reactions=None,
        draft=False,
        edit=False,
        delete=False,
        slash_commands=False,
        streaming="block",
    )


def test_streaming_mode_derives_from_editing_and_keeps_an_explicit_choice() -> None:
    editable = MemoryChannel()
    fixed = MemoryChannel(supports_edit=False)
    assert features_of(editable).streaming == "draft"
    assert features_of(fixed).streaming == "block"
    assert features_of(editable, streaming="block").stream_mode == "block"
    assert features_of(editable, streaming="off").stream_mode == "off"
    assert features_of(fixed, streaming="block").stream_mode == "block"
    # An explicit draft on a channel that cannot edit is kept, and streams nothing: no
    # quiet fallback to block (doctor flags the mismatch instead).
    mismatch = features_of(fixed, streaming="draft")
    assert mismatch.streaming == "draft"
    assert mismatch.stream_mode == "off"
    assert ChannelFeatures().stream_mode == "off"  # local surfaces never stream
    # A channel that can edit but is not draft-capable (the runtime passes the spec's
    # supports_draft: Slack) streams in blocks by default, and an explicit draft is off.
    assert features_of(editable, draft=False).streaming == "block"
    assert features_of(editable, draft=False, streaming="draft").stream_mode == "off"
    with pytest.raises(ValueError, match="'off', 'draft', 'block'"):
        features_of(editable, streaming="fast")


async def test_channel_reply_port_edits_and_deletes_through_the_adapter() -> None:
    channel = await _running(MemoryChannel())
    port = ChannelReplyPort(channel)
    inbound = InboundMessage(channel="memory", chat_id="c", sender_id="s", text="x")
    sent = await reply_text(port, inbound, "draft")
    await port.edit("c", sent.message_id, "draft, longer")
    assert channel.visible("c") == ["draft, longer"]
    await port.delete("c", sent.message_id)
    assert channel.visible("c") == []
    assert channel.deletes == [("c", sent.message_id)]


async def test_channel_reply_port_sends_into_the_inbound_chat_and_thread() -> None:
    channel = await _running(MemoryChannel("slack"))
    port = ChannelReplyPort(channel)
    assert isinstance(port, ReplyPort)
    inbound = InboundMessage(
        channel="slack", chat_id="C1", thread_id="171.5", sender_id="U1", message_id="m9"
    )
    sent = await reply_text(port, inbound, "hello")
    (out,) = channel.sent
    assert (out.chat_id, out.thread_id, out.reply_to, out.text) == ("C1", "171.5", "m9", "hello")
    assert channel.visible("C1") == ["hello"]
    assert sent.message_id in channel.posted


async def test_try_reply_text_swallows_platform_refusals() -> None:
    channel = await _running(MemoryChannel())
    port = ChannelReplyPort(channel)
    inbound = InboundMessage(channel="memory", chat_id="c", sender_id="s", text="x")
    channel.fail_next(ChannelError("bot was blocked by the user"))
    assert await try_reply_text(port, inbound, "hi") is False
    assert await try_reply_text(port, inbound, "hi again") is True
    assert channel.texts == ["hi again"]
    with pytest.raises(ValueError, match="needs text"):
        await reply_text(port, inbound, "  ")
