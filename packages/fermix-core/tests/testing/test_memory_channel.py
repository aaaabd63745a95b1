from __future__ import annotations

import pytest
from fermix_core.channel import (
    Attachment,
    ChannelCapabilityError,
    ChannelError,
    InboundMessage,
    OutboundMessage,
)
from fermix_core.testing import MemoryChannel, StubChannelHost

pytestmark = pytest.mark.anyio


async def started(channel: MemoryChannel) -> list[InboundMessage]:
    host = StubChannelHost(channel.name)
    await channel.start(host)
    return host.deliveries


async def test_inject_builds_a_normalized_message() -> None:
    channel = MemoryChannel("mem")
    received = await started(channel)
    image = Attachment(kind="image", data=b"\x89PNG")
    delivered = await channel.inject(
        "hi", sender_id="u7", chat_id="g1", is_group=True, attachments=[image]
    )
    assert received == [delivered]
    assert delivered.channel == "mem"
    assert delivered.conversation_key == ("mem", "g1", None)
    assert delivered.is_group
    assert delivered.attachments == [image]
    assert delivered.message_id == "in1"


async def test_inject_passes_a_prepared_message_through() -> None:
    channel = MemoryChannel(local=True)
    received = await started(channel)
    message = InboundMessage(channel="memory", chat_id="c", sender_id="s", text="x", local=True)
    await channel.inject(message)
    assert received[0] is message
    with pytest.raises(TypeError):
        await channel.inject(42)  # type: ignore[arg-type]


async def test_inject_and_send_need_a_running_channel() -> None:
    channel = MemoryChannel()
    with pytest.raises(ChannelError, match="call start"):
        await channel.inject("hi")
    with pytest.raises(ChannelError, match="call start"):
        await channel.send(OutboundMessage(chat_id="c", text="x"))
    await started(channel)
    await channel.stop()
    assert not channel.running
    with pytest.raises(ChannelError):
        await channel.inject("hi")


async def test_draft_streaming_is_visible_as_edits_and_deletes() -> None:
    channel = MemoryChannel()
    await started(channel)
    status = await channel.send(OutboundMessage(chat_id="chat", text="💭 thinking", silent=True))
    draft = await channel.send(OutboundMessage(chat_id="chat", text="The answer"))
    await channel.edit("chat", draft.message_id, "The answer is 42")
    await channel.delete("chat", status.message_id)
    assert channel.visible("chat") == ["The answer is 42"]
    assert channel.texts == ["💭 thinking", "The answer"]
    assert channel.posted[draft.message_id].history == ["The answer", "The answer is 42"]
    assert channel.edits == [("chat", draft.message_id, "The answer is 42")]
    assert channel.deletes == [("chat", status.message_id)]


async def test_platform_refusals() -> None:
    channel = MemoryChannel()
    await started(channel)
    sent = await channel.send(OutboundMessage(chat_id="chat", text="x"))
    with pytest.raises(ChannelError, match="not found"):
        await channel.edit("chat", "m999", "y")
    with pytest.raises(ChannelError, match="not found"):
        await channel.edit("other-chat", sent.message_id, "y")
    with pytest.raises(ChannelError, match="blank"):
        await channel.edit("chat", sent.message_id, "  ")
    await channel.delete("chat", sent.message_id)
    with pytest.raises(ChannelError, match="deleted"):
        await channel.edit("chat", sent.message_id, "y")
    with pytest.raises(ChannelError, match="deleted"):
        await channel.delete("chat", sent.message_id)


async def test_reactions_target_known_messages() -> None:
    channel = MemoryChannel()
    await started(channel)
    inbound = await channel.inject("thanks!", chat_id="chat")
    assert inbound.message_id is not None
    await channel.react("chat", inbound.message_id, "👍")
    assert channel.reactions == [("chat", inbound.message_id, "👍")]
    with pytest.raises(ChannelError, match="not found"):
        await channel.react("chat", "nope", "👍")
    with pytest.raises(ChannelError, match="emoji"):
        await channel.react("chat", inbound.message_id, " ")


async def test_fail_next_simulates_a_platform_refusal_once() -> None:
    channel = MemoryChannel()
    await started(channel)
    channel.fail_next(ChannelError("Bad Request: can't parse entities"))
    with pytest.raises(ChannelError, match="parse entities"):
        await channel.send(OutboundMessage(chat_id="chat", text="<b>broken"))
    await channel.send(OutboundMessage(chat_id="chat", text="broken"))
    assert channel.texts == ["broken"]


async def test_disabled_abilities_refuse_with_the_flag_name() -> None:
    channel = MemoryChannel(supports_edit=False, supports_typing=False)
    await started(channel)
    sent = await channel.send(OutboundMessage(chat_id="chat", text="x"))
    with pytest.raises(ChannelCapabilityError, match="supports_edit"):
        await channel.edit("chat", sent.message_id, "y")
    with pytest.raises(ChannelCapabilityError, match="supports_typing"):
        await channel.typing("chat")
    await channel.delete("chat", sent.message_id)
    assert channel.edits == []
