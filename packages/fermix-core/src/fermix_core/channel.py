"""The channel contract: platform input in as :class:`InboundMessage`, replies out by ``send``.

Every adapter converts its platform's updates into one common inbound record and hands it
to the gateway's ``deliver`` callback; the agent never learns which platform a message came
from. Optional abilities (editing, deleting, reactions, typing) are declared as flags so the
gateway and streaming code can choose a strategy up front instead of discovering a missing
ability halfway through a reply.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "Attachment",
    "AttachmentKind",
    "Channel",
    "ChannelCapabilityError",
    "ChannelError",
    "ConversationKey",
    "Deliver",
    "InboundMessage",
    "OutboundMessage",
    "SentMessage",
]


class ConversationKey(NamedTuple):
    """``(channel, chat_id, thread_id)`` — the unit the queue serializes turns on."""

    channel: str
    chat_id: str
    thread_id: str | None = None


class AttachmentKind(StrEnum):
    IMAGE = "image"
    AUDIO = "audio"
    VIDEO = "video"
    DOCUMENT = "document"


class Attachment(BaseModel):
    """A media item, inbound or outbound, held as a local file or as bytes.

    Exactly one of ``path`` and ``data`` is set, so a consumer never has to decide which
    of two disagreeing sources is the real file.
    """

    model_config = ConfigDict(
        frozen=True, extra="forbid", ser_json_bytes="base64", val_json_bytes="base64"
    )

    kind: AttachmentKind
    path: Path | None = None
    data: bytes | None = Field(default=None, repr=False)
    mime_type: str | None = None
    filename: str | None = None
    #: Size in bytes as declared by the platform (checked against caps before download)
    #: or measured from ``data``.
    size: int | None = Field(default=None, ge=0)
    #: A per-item caption for outbound media; platforms that take one caption use the first.
    caption: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _measure_data(cls, values: Any) -> Any:
        if isinstance(values, dict) and values.get("size") is None:
            data = values.get("data")
            if isinstance(data, bytes | bytearray):
                values = {**values, "size": len(data)}
        return values

    @model_validator(mode="after")
    def _one_source(self) -> Attachment:
        if (self.path is None) == (self.data is None):
            raise ValueError("an Attachment needs exactly one of path or data")
        return self

    def read_bytes(self) -> bytes:
        """The attachment's bytes. Reads the file for path attachments, so it blocks."""
        if self.data is not None:
            return self.data
        assert self.path is not None
        return self.path.read_bytes()


def _utcnow() -> datetime:
    return datetime.now(UTC)


class InboundMessage(BaseModel):
    """One platform message, normalized.

    Platform ids are strings even where the platform uses integers (Telegram), so that a
    conversation key built from them compares equal however the adapter received them.
    ``local`` marks local surfaces (cli, acp) that authorize by where they run rather than
    by sender id. ``raw_ref`` is an opaque handle for the adapter's own later use (a reply
    target, a media file id); it is never serialized.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", coerce_numbers_to_str=True)

    channel: str = Field(min_length=1)
    chat_id: str = Field(min_length=1)
    thread_id: str | None = None
    sender_id: str = Field(min_length=1)
    #: The sender's display name as the platform shows it, when the adapter knows it. It
    #: is chosen by the sender, so it labels messages in group chats but never decides
    #: trust: that is ``sender_id``'s job.
    sender_name: str | None = None
    text: str = ""
    attachments: list[Attachment] = Field(default_factory=list)
    message_id: str | None = None
    is_group: bool = False
    local: bool = False
    received_at: datetime = Field(default_factory=_utcnow)
    raw_ref: Any = Field(default=None, exclude=True, repr=False)

    @property
    def conversation_key(self) -> ConversationKey:
        return ConversationKey(self.channel, self.chat_id, self.thread_id)

    @property
    def is_empty(self) -> bool:
        """No text and no media: the gateway answers "looks empty" and schedules no turn."""
        return not self.text.strip() and not self.attachments


class OutboundMessage(BaseModel):
    """A reply for one chat; ``silent`` asks the platform not to ring a notification."""

    model_config = ConfigDict(frozen=True, extra="forbid", coerce_numbers_to_str=True)

    chat_id: str = Field(min_length=1)
    thread_id: str | None = None
    text: str = ""
    attachments: list[Attachment] = Field(default_factory=list)
    reply_to: str | None = None
    silent: bool = False

    @model_validator(mode="after")
    def _not_empty(self) -> OutboundMessage:
        if not self.text.strip() and not self.attachments:
            raise ValueError(
                "an outbound message needs text or an attachment; platforms reject blank messages"
            )
        return self


class SentMessage(BaseModel):
    """What the platform assigned to a sent message, for later edits, deletes and reactions."""

    model_config = ConfigDict(frozen=True, extra="forbid", coerce_numbers_to_str=True)

    message_id: str = Field(min_length=1)


#: The gateway's entry point, handed to :meth:`Channel.start`.
Deliver = Callable[[InboundMessage], Awaitable[None]]


class ChannelError(Exception):
    """A channel operation failed; the message says what to check next."""


class ChannelCapabilityError(ChannelError):
    """An optional ability was used on a channel that does not declare it."""

    def __init__(self, channel: str, ability: str, flag: str) -> None:
        self.channel = channel
        self.ability = ability
        self.flag = flag
        super().__init__(f"channel {channel!r} cannot {ability}; check `{flag}` before calling it")


class Channel(ABC):
    """A platform adapter built from a :class:`~fermix_core.specs.ChannelSpec`'s factory.

    ``start`` begins receiving and returns once the adapter is running (its receive loop
    runs in the background); every inbound message is passed to ``deliver``. ``stop`` must
    be safe to call twice and before ``start``.
    """

    name: str = ""
    supports_edit: bool = False
    supports_delete: bool = False
    supports_reactions: bool = False
    supports_typing: bool = False

    @abstractmethod
    async def start(self, deliver: Deliver) -> None:
        """Begin receiving; hand each inbound message to *deliver*."""

    @abstractmethod
    async def stop(self) -> None:
        """Stop receiving and release the connection."""

    @abstractmethod
    async def send(self, message: OutboundMessage) -> SentMessage:
        """Send *message*; raise :class:`ChannelError` when the platform refuses it."""

    async def edit(self, chat_id: str, message_id: str, text: str) -> None:
        """Replace the text of a message this channel sent (draft streaming)."""
        raise ChannelCapabilityError(self.name, "edit messages", "supports_edit")

    async def delete(self, chat_id: str, message_id: str) -> None:
        """Delete a message this channel sent (/stop on a draft, reasoning status lines)."""
        raise ChannelCapabilityError(self.name, "delete messages", "supports_delete")

    async def react(self, chat_id: str, message_id: str, emoji: str) -> None:
        """Put an emoji reaction on a message (acknowledgements instead of filler replies)."""
        raise ChannelCapabilityError(self.name, "react to messages", "supports_reactions")

    async def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        """Show a typing indicator while a turn runs."""
        raise ChannelCapabilityError(self.name, "show typing", "supports_typing")
