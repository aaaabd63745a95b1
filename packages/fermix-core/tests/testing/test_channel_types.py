from __future__ import annotations

from pathlib import Path

import pytest
from fermix_core.channel import (
    Attachment,
    Channel,
    ChannelCapabilityError,
    ChannelHost,
    ConversationKey,
    InboundMessage,
    OutboundMessage,
    SentMessage,
)
from pydantic import ValidationError

pytestmark = pytest.mark.anyio


def test_platform_integer_ids_become_strings() -> None:
    message = InboundMessage(channel="telegram", chat_id=-100123, sender_id=42, message_id=7)
    assert message.chat_id == "-100123"
    assert message.sender_id == "42"
    assert message.message_id == "7"
    assert message.conversation_key == ConversationKey("telegram", "-100123", None)
    assert message.conversation_key == ("telegram", "-100123", None)
    assert message.received_at.tzinfo is not None


def test_inbound_requires_channel_chat_and_sender() -> None:
    with pytest.raises(ValidationError):
        InboundMessage(channel="", chat_id="c", sender_id="s")
    with pytest.raises(ValidationError):
        InboundMessage(channel="x", chat_id="c", sender_id="")
    with pytest.raises(ValidationError):
        InboundMessage(channel="x", chat_id="c", sender_id="s", surprise=1)  # type: ignore[call-arg]


def test_inbound_is_empty_counts_captionless_media_as_actionable() -> None:
    image = Attachment(kind="image", data=b"\x89PNG")
    assert InboundMessage(channel="x", chat_id="c", sender_id="s", text="  ").is_empty
    assert not InboundMessage(channel="x", chat_id="c", sender_id="s", attachments=[image]).is_empty


def test_raw_ref_is_never_serialized() -> None:
    message = InboundMessage(channel="x", chat_id="c", sender_id="s", raw_ref=object())
    assert "raw_ref" not in message.model_dump()
    assert "raw_ref" not in message.model_dump_json()


def test_attachment_needs_exactly_one_source(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="exactly one"):
        Attachment(kind="document")
    with pytest.raises(ValidationError, match="exactly one"):
        Attachment(kind="document", data=b"x", path=tmp_path / "x")
    with pytest.raises(ValidationError):
        Attachment(kind="sticker", data=b"x")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        Attachment(kind="image", data=b"x", size=-1)


def test_attachment_reads_bytes_and_measures_itself(tmp_path: Path) -> None:
    file = tmp_path / "note.txt"
    file.write_bytes(b"hello")
    on_disk = Attachment(kind="document", path=file, mime_type="text/plain", filename="note.txt")
    assert on_disk.read_bytes() == b"hello"
    assert on_disk.size is None
    inline = Attachment(kind="audio", data=b"abc")
    assert inline.size == 3
    assert Attachment.model_validate_json(inline.model_dump_json()) == inline


def test_outbound_refuses_a_blank_message() -> None:
    with pytest.raises(ValidationError, match="needs text or an attachment"):
        OutboundMessage(chat_id="c", text="  ")
    doc = Attachment(kind="document", data=b"x", filename="a.txt", caption="here")
    assert OutboundMessage(chat_id=5, attachments=[doc]).chat_id == "5"


class Minimal(Channel):
    name = "minimal"

    async def start(self, host: ChannelHost) -> None:
        self.host = host

    async def stop(self) -> None:
        return None

    async def send(self, message: OutboundMessage) -> SentMessage:
        return SentMessage(message_id="1")


async def test_optional_abilities_default_to_a_typed_refusal() -> None:
    channel = Minimal()
    assert not channel.supports_edit
    assert not channel.supports_delete
    assert not channel.supports_reactions
    assert not channel.supports_typing
    calls = [
        (channel.edit("c", "1", "x"), "supports_edit"),
        (channel.delete("c", "1"), "supports_delete"),
        (channel.react("c", "1", "👍"), "supports_reactions"),
        (channel.typing("c"), "supports_typing"),
    ]
    for call, flag in calls:
        with pytest.raises(ChannelCapabilityError) as info:
            await call
        assert info.value.flag == flag
        assert info.value.channel == "minimal"
        assert flag in str(info.value)


def test_channel_is_abstract() -> None:
    with pytest.raises(TypeError):
        Channel()  # type: ignore[abstract]


def test_the_turns_reply_and_the_local_receipt_equal_their_validated_forms() -> None:
    """Made without validation on the hot path, yet the same objects validation gives;
    a new field on either model fails here first."""
    from fermix_core.channel import OutboundMessage, SentMessage
    from fermix_core.service import CollectingReply
    from fermix_core.turns import reply_message

    for chat_id, thread_id, text in (("c1", None, "hello"), ("42", "t-7", " naïve\nanswer ")):
        made = reply_message(chat_id, thread_id, text)
        wanted = OutboundMessage(chat_id=chat_id, thread_id=thread_id, text=text)
        assert type(made) is OutboundMessage and made == wanted
        assert made.model_dump_json() == wanted.model_dump_json()
        assert made.model_fields_set == wanted.model_fields_set
        assert set(made.__dict__) == set(OutboundMessage.model_fields)
    for hostile in (("c1", None, "   "), ("", None, "hi"), ("c1", None, "")):
        with pytest.raises(ValidationError):
            reply_message(*hostile)
    assert reply_message(7, None, "hi") == OutboundMessage(chat_id="7", text="hi")  # type: ignore[arg-type]

    import anyio

    reply = CollectingReply(features=None)
    receipt = anyio.run(reply.send, reply_message("c1", None, "hi"))
    assert receipt == SentMessage(message_id="1")
    assert receipt.model_fields_set == SentMessage(message_id="1").model_fields_set
    assert set(receipt.__dict__) == set(SentMessage.model_fields)
