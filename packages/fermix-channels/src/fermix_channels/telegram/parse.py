"""Bot API updates → :class:`~fermix_core.channel.InboundMessage` (or a reason to skip).

Pure functions over the decoded JSON, so every rule is unit-testable without a server:

* ``message`` updates from private chats, groups and supergroups; channel posts, service
  messages and anything from a bot (``from.is_bot``) are skipped — two bots answering each
  other would loop forever.
* In a group the bot answers only what is addressed to it: a mention of ``@<bot
  username>`` (or a text mention of the bot), a reply to one of the bot's messages, or a
  ``/command`` — and a ``/command@otherbot`` is someone else's. With BotFather's privacy mode
  on (the default) Telegram only sends the bot those messages anyway; this rule keeps the
  behaviour the same when privacy mode is off.
* Forum topics: ``message_thread_id`` of a topic message is the thread key, so each topic is
  its own conversation.
* ``/cmd@<bot username>`` is normalized to ``/cmd`` so the command dispatcher sees it.
* Ids: ``chat_id`` and ``sender_id`` as strings, ``message_id`` as ``<chat>:<message>``
  (unique per bot, the idempotency key); ``received_at`` from the seconds-based ``date``.
* Media (photo, document, voice, audio, video, video note, animation) become
  :class:`MediaRef` entries on the message's ``raw_ref`` with their declared sizes; the
  adapter downloads them only for an authorized sender (see ``adapter.py``).
* ``callback_query`` updates (an inline-button tap) become :class:`CallbackTap`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fermix_core.channel import AttachmentKind, InboundMessage

__all__ = [
    "CallbackTap",
    "MediaRef",
    "Skip",
    "TelegramRef",
    "parse_callback",
    "parse_message",
    "sender_name",
]

_COMMAND = re.compile(r"^/([A-Za-z0-9_]{1,64})(?:@([A-Za-z0-9_]{1,64}))?(?=\s|$)")


@dataclass(frozen=True)
class Skip:
    """Not a turn: why, for the debug log."""

    reason: str


@dataclass(frozen=True)
class MediaRef:
    """One inbound file, not yet downloaded."""

    file_id: str
    kind: AttachmentKind
    size: int | None
    mime_type: str | None
    filename: str | None


@dataclass(frozen=True)
class TelegramRef:
    """The adapter's handle on an inbound message (``InboundMessage.raw_ref``)."""

    chat_id: int
    message_id: int
    chat_type: str
    media: tuple[MediaRef, ...] = ()
    media_group_id: str | None = None


@dataclass(frozen=True)
class CallbackTap:
    """An inline keyboard button tap (``callback_query``)."""

    query_id: str
    sender_id: str
    sender_name: str | None
    sender_is_bot: bool
    data: str
    chat_id: str | None
    chat_type: str | None
    thread_id: str | None
    message_id: int | None

    @property
    def is_group(self) -> bool:
        return self.chat_type in ("group", "supergroup")


@dataclass
class _Addressed:
    yes: bool = False
    why: list[str] = field(default_factory=list)


def sender_name(user: dict[str, Any]) -> str | None:
    parts = [str(user.get(k) or "").strip() for k in ("first_name", "last_name")]
    name = " ".join(p for p in parts if p)
    return name or (str(user["username"]) if user.get("username") else None)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _size(item: dict[str, Any]) -> int | None:
    return _int(item.get("file_size"))


def _media(message: dict[str, Any]) -> list[MediaRef]:
    refs: list[MediaRef] = []
    photos = message.get("photo")
    if isinstance(photos, list) and photos:
        # Sizes come smallest first; the last is the original resolution.
        best = max(
            (p for p in photos if isinstance(p, dict) and p.get("file_id")),
            key=lambda p: (_int(p.get("width")) or 0) * (_int(p.get("height")) or 0),
            default=None,
        )
        if best is not None:
            refs.append(
                MediaRef(
                    str(best["file_id"]), AttachmentKind.IMAGE, _size(best), "image/jpeg", None
                )
            )
    kinds = (
        ("document", None, None),
        ("audio", AttachmentKind.AUDIO, "audio/mpeg"),
        ("voice", AttachmentKind.AUDIO, "audio/ogg"),
        ("video", AttachmentKind.VIDEO, "video/mp4"),
        # A round video note is speech: kind audio (so the gateway transcribes it), the
        # MP4 container kept as its MIME type and sent to speech-to-text as it is.
        ("video_note", AttachmentKind.AUDIO, "video/mp4"),
        ("animation", AttachmentKind.VIDEO, "video/mp4"),
    )
    for key, kind, default_mime in kinds:
        item = message.get(key)
        if not isinstance(item, dict) or not item.get("file_id"):
            continue
        if key == "document" and message.get("animation"):
            continue  # an animation also carries a document field; take it once
        mime = item.get("mime_type") if isinstance(item.get("mime_type"), str) else default_mime
        if kind is None:
            kind = _kind_of(mime)
        name = item.get("file_name") if isinstance(item.get("file_name"), str) else None
        refs.append(MediaRef(str(item["file_id"]), kind, _size(item), mime, name))
    return refs


def _kind_of(mime: str | None) -> AttachmentKind:
    major = (mime or "").split("/", 1)[0]
    return {
        "image": AttachmentKind.IMAGE,
        "audio": AttachmentKind.AUDIO,
        "video": AttachmentKind.VIDEO,
    }.get(major, AttachmentKind.DOCUMENT)


def _addressed(
    message: dict[str, Any], text: str, *, bot_id: int, bot_username: str | None
) -> _Addressed:
    result = _Addressed()
    reply = message.get("reply_to_message")
    if isinstance(reply, dict):
        author = reply.get("from")
        if isinstance(author, dict) and _int(author.get("id")) == bot_id:
            result.yes = True
            result.why.append("reply")
    command = _COMMAND.match(text)
    if command is not None:
        target = command.group(2)
        if target is None or (bot_username and target.lower() == bot_username.lower()):
            result.yes = True
            result.why.append("command")
    if bot_username and re.search(
        rf"(?<![A-Za-z0-9_])@{re.escape(bot_username)}(?![A-Za-z0-9_])", text, re.IGNORECASE
    ):
        result.yes = True
        result.why.append("mention")
    for key in ("entities", "caption_entities"):
        for entity in message.get(key) or ():
            if (
                isinstance(entity, dict)
                and entity.get("type") == "text_mention"
                and isinstance(entity.get("user"), dict)
                and _int(entity["user"].get("id")) == bot_id
            ):
                result.yes = True
                result.why.append("text_mention")
    return result


def _normalize_command(text: str, bot_username: str | None) -> str:
    """``/cmd@<this bot> args`` → ``/cmd args``."""
    match = _COMMAND.match(text)
    if match is None or match.group(2) is None or not bot_username:
        return text
    if match.group(2).lower() != bot_username.lower():
        return text
    return f"/{match.group(1)}{text[match.end() :]}"


def parse_message(
    message: Any, *, channel: str, bot_id: int, bot_username: str | None
) -> InboundMessage | Skip:
    """One ``message`` object → an inbound message, or why it is not one."""
    if not isinstance(message, dict):
        return Skip("not a message object")
    chat = message.get("chat")
    author = message.get("from")
    if not isinstance(chat, dict) or _int(chat.get("id")) is None:
        return Skip("no chat")
    if not isinstance(author, dict) or _int(author.get("id")) is None:
        return Skip("no sender (a channel post or an anonymous admin)")
    if author.get("is_bot"):
        return Skip("sent by a bot")
    chat_type = str(chat.get("type") or "")
    if chat_type not in ("private", "group", "supergroup"):
        return Skip(f"chat type {chat_type!r} is not served")
    message_id = _int(message.get("message_id"))
    if message_id is None:
        return Skip("no message_id")
    text = message.get("text")
    if not isinstance(text, str):
        text = message.get("caption") if isinstance(message.get("caption"), str) else ""
    media = _media(message)
    if not text and not media:
        return Skip("no text or media (a sticker, a poll, a service message)")
    is_group = chat_type in ("group", "supergroup")
    command = _COMMAND.match(text)
    target = command.group(2) if command is not None else None
    if target and bot_username and target.lower() != bot_username.lower():
        return Skip("a command for another bot")
    if is_group:
        addressed = _addressed(message, text, bot_id=bot_id, bot_username=bot_username)
        if not addressed.yes:
            return Skip("a group message not addressed to the bot")
    thread_id: str | None = None
    if message.get("is_topic_message") and _int(message.get("message_thread_id")) is not None:
        thread_id = str(message["message_thread_id"])
    date = _int(message.get("date"))
    received = datetime.fromtimestamp(date, UTC) if date is not None else datetime.now(UTC)
    chat_id = int(chat["id"])
    group_id = message.get("media_group_id")
    return InboundMessage(
        channel=channel,
        chat_id=str(chat_id),
        thread_id=thread_id,
        sender_id=str(author["id"]),
        sender_name=sender_name(author),
        text=_normalize_command(text, bot_username),
        message_id=f"{chat_id}:{message_id}",
        is_group=is_group,
        received_at=received,
        raw_ref=TelegramRef(
            chat_id=chat_id,
            message_id=message_id,
            chat_type=chat_type,
            media=tuple(media),
            media_group_id=str(group_id) if isinstance(group_id, str | int) else None,
        ),
    )


def parse_callback(query: Any) -> CallbackTap | Skip:
    """One ``callback_query`` object → a tap, or why it is not one."""
    if not isinstance(query, dict) or not isinstance(query.get("id"), str):
        return Skip("not a callback query")
    author = query.get("from")
    if not isinstance(author, dict) or _int(author.get("id")) is None:
        return Skip("callback query without a sender")
    data = query.get("data")
    if not isinstance(data, str):
        return Skip("callback query without data (a game button)")
    message = query.get("message") if isinstance(query.get("message"), dict) else {}
    chat = message.get("chat") if isinstance(message.get("chat"), dict) else {}
    chat_id = _int(chat.get("id"))
    thread = _int(message.get("message_thread_id")) if message.get("is_topic_message") else None
    return CallbackTap(
        query_id=query["id"],
        sender_id=str(author["id"]),
        sender_name=sender_name(author),
        sender_is_bot=bool(author.get("is_bot")),
        data=data,
        chat_id=str(chat_id) if chat_id is not None else None,
        chat_type=str(chat.get("type")) if chat.get("type") else None,
        thread_id=str(thread) if thread is not None else None,
        message_id=_int(message.get("message_id")),
    )
