"""The update → InboundMessage rules, on Bot API JSON shapes."""

from __future__ import annotations

from fermix_channels.telegram.parse import Skip, TelegramRef, parse_callback, parse_message
from fermix_core.channel import AttachmentKind

BOT_ID = 777
BOT = "fermix_bot"


def _msg(text: str | None = "hi", *, chat: dict | None = None, **extra):
    message = {
        "message_id": 5,
        "from": {"id": 42, "is_bot": False, "first_name": "Ada", "last_name": "Lovelace"},
        "chat": chat or {"id": 42, "type": "private"},
        "date": 1_700_000_000,
    }
    if text is not None:
        message["text"] = text
    message.update(extra)
    return message


def parse(message):
    return parse_message(message, channel="telegram", bot_id=BOT_ID, bot_username=BOT)


GROUP = {"id": -100555, "type": "supergroup", "title": "g"}


def test_private_message_is_normalized() -> None:
    inbound = parse(_msg("hello"))
    assert not isinstance(inbound, Skip)
    assert inbound.chat_id == "42"
    assert inbound.sender_id == "42"
    assert inbound.sender_name == "Ada Lovelace"
    assert inbound.message_id == "42:5"
    assert inbound.is_group is False
    assert inbound.thread_id is None
    assert inbound.received_at.timestamp() == 1_700_000_000
    assert isinstance(inbound.raw_ref, TelegramRef)


def test_bots_are_never_answered() -> None:
    message = _msg("hello")
    message["from"]["is_bot"] = True
    assert isinstance(parse(message), Skip)


def test_group_message_not_addressed_is_skipped() -> None:
    assert isinstance(parse(_msg("just chatting", chat=GROUP)), Skip)


def test_group_mention_reply_and_command_are_answered() -> None:
    mention = parse(_msg(f"hey @{BOT.upper()} what's up", chat=GROUP))
    assert not isinstance(mention, Skip)
    assert mention.is_group
    reply = parse(
        _msg(
            "and this?",
            chat=GROUP,
            reply_to_message={"message_id": 3, "from": {"id": BOT_ID, "is_bot": True}},
        )
    )
    assert not isinstance(reply, Skip)
    command = parse(_msg("/whoami", chat=GROUP))
    assert not isinstance(command, Skip)
    text_mention = parse(
        _msg(
            "Fermix, look",
            chat=GROUP,
            entities=[{"type": "text_mention", "offset": 0, "length": 6, "user": {"id": BOT_ID}}],
        )
    )
    assert not isinstance(text_mention, Skip)


def test_a_mention_of_a_longer_username_is_not_ours() -> None:
    assert isinstance(parse(_msg(f"@{BOT}_two hi", chat=GROUP)), Skip)


def test_reply_to_someone_else_is_not_addressed() -> None:
    message = _msg("yes", chat=GROUP, reply_to_message={"message_id": 3, "from": {"id": 9}})
    assert isinstance(parse(message), Skip)


def test_command_for_another_bot_is_ignored_and_ours_is_normalized() -> None:
    assert isinstance(parse(_msg("/help@other_bot", chat=GROUP)), Skip)
    assert isinstance(parse(_msg("/help@other_bot")), Skip)
    ours = parse(_msg(f"/help@{BOT} me", chat=GROUP))
    assert not isinstance(ours, Skip)
    assert ours.text == "/help me"


def test_forum_topic_is_the_thread_key() -> None:
    inbound = parse(
        _msg(f"@{BOT} in a topic", chat=GROUP, message_thread_id=17, is_topic_message=True)
    )
    assert not isinstance(inbound, Skip)
    assert inbound.thread_id == "17"
    assert inbound.conversation_key == ("telegram", "-100555", "17")


def test_caption_is_text_and_media_are_refs_with_sizes() -> None:
    inbound = parse(
        _msg(
            None,
            caption="look",
            photo=[
                {"file_id": "small", "width": 90, "height": 90, "file_size": 1000},
                {"file_id": "big", "width": 1280, "height": 960, "file_size": 90000},
            ],
        )
    )
    assert not isinstance(inbound, Skip)
    assert inbound.text == "look"
    assert inbound.attachments == []  # downloaded later, for an authorized sender only
    (ref,) = inbound.raw_ref.media
    assert (ref.file_id, ref.kind, ref.size) == ("big", AttachmentKind.IMAGE, 90000)


def test_voice_document_video_note_kinds() -> None:
    voice = parse(_msg(None, voice={"file_id": "v", "file_size": 10, "mime_type": "audio/ogg"}))
    doc = parse(
        _msg(None, document={"file_id": "d", "file_name": "a.pdf", "mime_type": "application/pdf"})
    )
    note = parse(_msg(None, video_note={"file_id": "n", "file_size": 5}))
    assert voice.raw_ref.media[0].kind is AttachmentKind.AUDIO
    assert doc.raw_ref.media[0].kind is AttachmentKind.DOCUMENT
    assert doc.raw_ref.media[0].filename == "a.pdf"
    # A round video note is speech: audio for the gateway, its MP4 container kept.
    assert note.raw_ref.media[0].kind is AttachmentKind.AUDIO
    assert note.raw_ref.media[0].mime_type == "video/mp4"
    video = parse(_msg(None, video={"file_id": "m", "mime_type": "video/mp4"}))
    assert video.raw_ref.media[0].kind is AttachmentKind.VIDEO


def test_stickers_channel_posts_and_service_messages_are_skipped() -> None:
    assert isinstance(parse(_msg(None, sticker={"file_id": "s"})), Skip)
    assert isinstance(parse(_msg("post", chat={"id": -1009, "type": "channel"})), Skip)
    no_sender = _msg("anon")
    del no_sender["from"]
    assert isinstance(parse(no_sender), Skip)
    assert isinstance(parse("garbage"), Skip)


def test_callback_query_parsing() -> None:
    tap = parse_callback(
        {
            "id": "q1",
            "from": {"id": 42, "is_bot": False, "first_name": "Ada"},
            "message": {"message_id": 9, "chat": GROUP},
            "data": "fx-confirm:ABCD2345",
        }
    )
    assert not isinstance(tap, Skip)
    assert tap.is_group and tap.chat_id == "-100555" and tap.data.endswith("ABCD2345")
    assert isinstance(parse_callback({"id": "q2", "from": {"id": 1}}), Skip)
