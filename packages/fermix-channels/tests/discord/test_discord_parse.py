"""Gateway events → inbound messages: who is answered where, threads, attachments."""

from __future__ import annotations

from fermix_channels.discord.parse import (
    ComponentTap,
    DiscordRef,
    Skip,
    Threads,
    parse_interaction,
    parse_message,
)
from fermix_core.channel import AttachmentKind, InboundMessage

from .conftest import fd

_fake = fd.FakeDiscord()


def _parse(threads: Threads | None = None, **kwargs) -> InboundMessage | Skip:
    text = kwargs.pop("text", "hello")
    payload = _fake.message_payload(text, **kwargs)
    return parse_message(payload, channel="discord", bot_id=fd.BOT_ID, threads=threads)


def test_a_dm_is_always_for_the_bot() -> None:
    message = _parse(text="no mention needed")
    assert isinstance(message, InboundMessage)
    assert message.text == "no mention needed" and not message.is_group
    assert isinstance(message.raw_ref, DiscordRef) and message.raw_ref.guild_id is None


def test_in_a_server_only_what_is_addressed_to_the_bot() -> None:
    server = {"channel": fd.GUILD_CHANNEL, "guild": fd.GUILD_ID}
    assert isinstance(_parse(text="people chatting", **server), Skip)
    assert isinstance(_parse(text="@everyone look", **server), Skip)
    mentioned = _parse(text=f"<@{fd.BOT_ID}> what time is it", mentions=[fd.BOT_ID], **server)
    assert isinstance(mentioned, InboundMessage)
    assert mentioned.text == "what time is it" and mentioned.is_group
    nick = _parse(text=f"hey <@!{fd.BOT_ID}>, hi", **server)
    assert isinstance(nick, InboundMessage) and nick.text == "hey , hi"
    command = _parse(text="/whoami", **server)
    assert isinstance(command, InboundMessage) and command.text == "/whoami"


def test_a_reply_to_the_bot_is_addressed_to_it_but_not_a_reply_to_someone_else() -> None:
    server = {"channel": fd.GUILD_CHANNEL, "guild": fd.GUILD_ID}
    bots = {"id": "999999999", "author": _fake.bot, "content": "earlier answer"}
    someone = {"id": "999999998", "author": _fake.user(fd.GUEST_ID), "content": "hm"}
    assert isinstance(_parse(text="and then?", reply_to=bots, **server), InboundMessage)
    assert isinstance(_parse(text="and then?", reply_to=someone, **server), Skip)


def test_bots_webhooks_system_messages_and_the_bot_itself_are_never_answered() -> None:
    assert isinstance(_parse(sender=fd.OTHER_BOT_ID, bot=True), Skip)
    assert isinstance(_parse(sender=fd.BOT_ID), Skip)
    assert isinstance(_parse(webhook_id="123456789"), Skip)
    assert isinstance(_parse(type=7), Skip)  # a member joined
    assert isinstance(parse_message(None, channel="discord", bot_id=fd.BOT_ID), Skip)
    assert isinstance(parse_message({"author": 1}, channel="discord", bot_id=fd.BOT_ID), Skip)


def test_a_thread_is_its_own_conversation_under_its_parent() -> None:
    threads = Threads()
    threads.event("GUILD_CREATE", _fake.guilds[0])
    message = _parse(threads, text="/help", channel=fd.THREAD_ID, guild=fd.GUILD_ID)
    assert isinstance(message, InboundMessage)
    assert (message.chat_id, message.thread_id) == (fd.GUILD_CHANNEL, fd.THREAD_ID)
    assert message.message_id.startswith(f"{fd.THREAD_ID}:")  # where the message lives
    threads.event("THREAD_CREATE", {"id": "5500000000000000077", "type": 12,
                                    "parent_id": fd.GUILD_CHANNEL})  # fmt: skip
    assert threads.parent("5500000000000000077") == fd.GUILD_CHANNEL
    threads.event("THREAD_DELETE", {"id": "5500000000000000077", "type": 12})
    assert threads.parent("5500000000000000077") is None
    threads.event("CHANNEL_CREATE", {"id": "1", "type": 0, "parent_id": "2"})  # not a thread
    assert threads.parent("1") is None


def test_attachments_carry_kind_mime_name_and_declared_size() -> None:
    files = [
        {"id": "1", "filename": "voice-message.ogg", "size": 2048,
         "url": "https://cdn.discordapp.com/attachments/1/2/voice-message.ogg",
         "content_type": "audio/ogg"},
        {"id": "2", "filename": "cat.png", "size": 99,
         "url": "https://cdn.discordapp.com/attachments/1/3/cat.png",
         "content_type": "image/png"},
        {"id": "3", "filename": "notes.txt", "size": 5,
         "url": "https://cdn.discordapp.com/attachments/1/4/notes.txt",
         "content_type": "text/plain; charset=utf-8"},
        {"id": "4", "filename": "bad", "url": "javascript:alert(1)"},
    ]  # fmt: skip
    message = _parse(text="", attachments=files)
    assert isinstance(message, InboundMessage)
    media = message.raw_ref.media
    assert [(m.kind, m.mime_type, m.filename, m.size) for m in media] == [
        (AttachmentKind.AUDIO, "audio/ogg", "voice-message.ogg", 2048),
        (AttachmentKind.IMAGE, "image/png", "cat.png", 99),
        (AttachmentKind.DOCUMENT, "text/plain", "notes.txt", 5),
    ]


def test_a_button_tap_from_a_server_or_a_dm() -> None:
    base = {"id": "123456", "type": 3, "token": "tok", "channel_id": fd.GUILD_CHANNEL,
            "data": {"custom_id": "fx-approve:abc", "component_type": 2}}  # fmt: skip
    guild = parse_interaction(
        {**base, "guild_id": fd.GUILD_ID, "member": {"user": _fake.user(), "nick": "Ada"}}
    )
    assert isinstance(guild, ComponentTap)
    assert guild.sender_id == fd.OWNER_ID and guild.sender_name == "Ada"
    assert guild.guild_id == fd.GUILD_ID and guild.custom_id == "fx-approve:abc"
    dm = parse_interaction({**base, "user": _fake.user(fd.GUEST_ID)})
    assert isinstance(dm, ComponentTap) and dm.guild_id is None
    assert isinstance(parse_interaction({**base, "type": 2, "user": _fake.user()}), Skip)
    assert isinstance(parse_interaction({**base}), Skip)  # no user at all
    assert isinstance(parse_interaction([]), Skip)
