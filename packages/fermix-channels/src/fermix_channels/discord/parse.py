"""Gateway events → :class:`~fermix_core.channel.InboundMessage` (or a reason to skip).

Pure functions over the decoded JSON, so every rule is unit-testable without a socket:

* ``MESSAGE_CREATE`` of the ordinary kinds (type 0, default, and 19, a reply). Anything a
  bot wrote — ``author.bot``, the bot itself, a webhook — is skipped: two bots answering
  each other would loop forever. System messages (joins, pins, boosts) are skipped.
* A direct message (no ``guild_id``) is always for the bot. In a server channel the bot
  answers only what is addressed to it: a mention of the bot (``<@id>`` / ``<@!id>``, or
  the bot in ``mentions``), a reply to one of the bot's messages, or a ``/command``. The
  mention itself is removed from the text. ``@everyone`` / ``@here`` are not mentions of
  the bot.
* Threads are channels of their own on Discord; a message in a thread carries the thread's
  id as ``channel_id``. When the thread's parent is known (from ``GUILD_CREATE`` /
  ``THREAD_CREATE`` events, see :class:`Threads`) the conversation is ``(parent, thread)``,
  so the thread id is the thread key; replies go to the thread.
* Ids: ``chat_id`` is the channel (the DM channel for a direct message), ``sender_id`` the
  author's user id, ``message_id`` ``<channel>:<message snowflake>`` (unique across
  Discord, the idempotency key); ``received_at`` from the ISO ``timestamp``.
* Attachments become :class:`MediaRef` entries with the declared size and content type;
  the adapter downloads them for an authorized sender only.
* ``INTERACTION_CREATE`` of type 3 (a message component: the Approve button) becomes a
  :class:`ComponentTap`.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from fermix_core.channel import AttachmentKind, InboundMessage

__all__ = [
    "ComponentTap",
    "DiscordRef",
    "MediaRef",
    "Skip",
    "Threads",
    "kind_of",
    "parse_interaction",
    "parse_message",
]

#: Message types that are someone writing: DEFAULT and REPLY.
_CHAT_TYPES = frozenset({0, 19})
#: Channel types of threads (announcement, public, private).
THREAD_TYPES = frozenset({10, 11, 12})
_MESSAGE_COMPONENT = 3


@dataclass(frozen=True)
class Skip:
    reason: str


@dataclass(frozen=True)
class MediaRef:
    """One inbound attachment, not yet downloaded."""

    url: str
    kind: AttachmentKind
    size: int | None
    mime_type: str | None
    filename: str | None


@dataclass(frozen=True)
class DiscordRef:
    """The adapter's handle on an inbound message (``InboundMessage.raw_ref``)."""

    channel_id: str
    message_id: str
    guild_id: str | None
    media: tuple[MediaRef, ...] = ()


@dataclass(frozen=True)
class ComponentTap:
    """A button press on one of the bot's messages."""

    interaction_id: str
    token: str
    custom_id: str
    sender_id: str
    sender_name: str | None
    sender_is_bot: bool
    channel_id: str
    guild_id: str | None


class Threads:
    """Thread id → parent channel id, learnt from gateway events (bounded)."""

    def __init__(self, limit: int = 10_000) -> None:
        self.limit = limit
        self._parents: OrderedDict[str, str] = OrderedDict()

    def parent(self, channel_id: str) -> str | None:
        return self._parents.get(channel_id)

    def learn(self, channel: Any) -> None:
        if not isinstance(channel, dict) or channel.get("type") not in THREAD_TYPES:
            return
        thread, parent = _id(channel.get("id")), _id(channel.get("parent_id"))
        if thread and parent:
            self._parents[thread] = parent
            self._parents.move_to_end(thread)
            while len(self._parents) > self.limit:
                self._parents.popitem(last=False)

    def forget(self, channel: Any) -> None:
        if isinstance(channel, dict):
            self._parents.pop(_id(channel.get("id")) or "", None)

    def event(self, name: str, data: Any) -> None:
        """Keep the map current from one dispatch."""
        if not isinstance(data, dict):
            return
        if name == "GUILD_CREATE":
            for thread in data.get("threads") or ():
                self.learn(thread)
        elif name in ("THREAD_CREATE", "THREAD_UPDATE"):
            self.learn(data)
        elif name == "THREAD_DELETE":
            self.forget(data)
        elif name == "THREAD_LIST_SYNC":
            for thread in data.get("threads") or ():
                self.learn(thread)

    def __len__(self) -> int:
        return len(self._parents)


def _id(value: Any) -> str | None:
    if isinstance(value, str) and value.isdigit():
        return value
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return str(value)
    return None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _name(user: dict[str, Any], member: Any = None) -> str | None:
    nick = member.get("nick") if isinstance(member, dict) else None
    for value in (nick, user.get("global_name"), user.get("username")):
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _time(value: Any) -> datetime:
    if isinstance(value, str):
        try:
            stamp = datetime.fromisoformat(value)
        except ValueError:
            stamp = None
        if stamp is not None:
            return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)
    return datetime.now(UTC)


def kind_of(mime: str | None) -> AttachmentKind:
    major = (mime or "").split("/", 1)[0].lower()
    if major == "image":
        return AttachmentKind.IMAGE
    if major == "audio":
        return AttachmentKind.AUDIO
    if major == "video":
        return AttachmentKind.VIDEO
    return AttachmentKind.DOCUMENT


def _media(message: dict[str, Any]) -> tuple[MediaRef, ...]:
    refs: list[MediaRef] = []
    for item in message.get("attachments") or ():
        if not isinstance(item, dict):
            continue
        url = item.get("url")
        if not isinstance(url, str) or not url.startswith(("https://", "http://")):
            continue
        mime = item.get("content_type")
        mime = mime.split(";", 1)[0].strip() if isinstance(mime, str) and mime else None
        filename = item.get("filename")
        refs.append(
            MediaRef(
                url=url,
                kind=kind_of(mime),
                size=_int(item.get("size")),
                mime_type=mime,
                filename=filename if isinstance(filename, str) and filename else None,
            )
        )
    return tuple(refs)


def _mention_pattern(bot_id: str) -> re.Pattern[str]:
    return re.compile(rf"<@!?{re.escape(bot_id)}>")


def parse_message(
    data: Any, *, channel: str, bot_id: str | None, threads: Threads | None = None
) -> InboundMessage | Skip:
    """One ``MESSAGE_CREATE`` payload → a message, or why it is not one."""
    if not isinstance(data, dict):
        return Skip("not a message object")
    author = data.get("author")
    if not isinstance(author, dict):
        return Skip("no author")
    sender = _id(author.get("id"))
    channel_id = _id(data.get("channel_id"))
    message_id = _id(data.get("id"))
    if sender is None or channel_id is None or message_id is None:
        return Skip("no author, channel or message id")
    if author.get("bot") is True or data.get("webhook_id") is not None:
        return Skip("written by a bot or a webhook")
    if bot_id is not None and sender == bot_id:
        return Skip("the bot's own message")
    kind = data.get("type", 0)
    if kind not in _CHAT_TYPES:
        return Skip(f"message type {kind!r} is not someone writing")
    content = data.get("content")
    text = content if isinstance(content, str) else ""
    guild_id = _id(data.get("guild_id"))
    if guild_id is not None:
        addressed = False
        if bot_id is not None:
            pattern = _mention_pattern(bot_id)
            mentions = data.get("mentions")
            mentioned = isinstance(mentions, list) and any(
                isinstance(m, dict) and _id(m.get("id")) == bot_id for m in mentions
            )
            if mentioned or pattern.search(text):
                addressed = True
                text = re.sub(r"\s{2,}", " ", pattern.sub(" ", text)).strip()
            referenced = data.get("referenced_message")
            if isinstance(referenced, dict):
                ref_author = referenced.get("author")
                if isinstance(ref_author, dict) and _id(ref_author.get("id")) == bot_id:
                    addressed = True
        if text.lstrip().startswith("/"):
            addressed = True
        if not addressed:
            return Skip("a server message not addressed to the bot")
    media = _media(data)
    chat_id, thread_id = channel_id, None
    parent = threads.parent(channel_id) if threads is not None else None
    if parent is not None:
        chat_id, thread_id = parent, channel_id
    return InboundMessage(
        channel=channel,
        chat_id=chat_id,
        thread_id=thread_id,
        sender_id=sender,
        sender_name=_name(author, data.get("member")),
        text=text,
        # "<channel>:<message>": replies, reactions and edits need the channel the message
        # is in (a thread's own id), which the conversation's chat id is not.
        message_id=f"{channel_id}:{message_id}",
        is_group=guild_id is not None,
        received_at=_time(data.get("timestamp")),
        raw_ref=DiscordRef(
            channel_id=channel_id, message_id=message_id, guild_id=guild_id, media=media
        ),
    )


def parse_interaction(data: Any) -> ComponentTap | Skip:
    """One ``INTERACTION_CREATE`` payload → a button tap, or why it is not one."""
    if not isinstance(data, dict):
        return Skip("not an interaction object")
    if data.get("type") != _MESSAGE_COMPONENT:
        return Skip(f"interaction type {data.get('type')!r} is not a message component")
    interaction_id = _id(data.get("id"))
    token = data.get("token")
    channel_id = _id(data.get("channel_id"))
    payload = data.get("data")
    custom_id = payload.get("custom_id") if isinstance(payload, dict) else None
    member = data.get("member")
    user = member.get("user") if isinstance(member, dict) else data.get("user")
    if not isinstance(user, dict):
        return Skip("no user on the interaction")
    sender = _id(user.get("id"))
    if (
        interaction_id is None
        or not isinstance(token, str)
        or not token
        or channel_id is None
        or not isinstance(custom_id, str)
        or sender is None
    ):
        return Skip("an interaction without its id, token, channel, custom_id or user")
    return ComponentTap(
        interaction_id=interaction_id,
        token=token,
        custom_id=custom_id,
        sender_id=sender,
        sender_name=_name(user, member),
        sender_is_bot=user.get("bot") is True,
        channel_id=channel_id,
        guild_id=_id(data.get("guild_id")),
    )
