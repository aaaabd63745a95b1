"""An in-memory channel for gateway, streaming and reply tests.

It behaves like a well-behaved platform: it assigns message ids, remembers what each chat
currently shows (so an edited draft or a deleted status line is visible as such), and
refuses operations a real platform would refuse — sending while stopped, editing a
message that does not exist. Abilities can be switched off per instance to test the paths
for channels that cannot edit, delete or react.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field

from fermix_core.channel import (
    Attachment,
    Channel,
    ChannelCapabilityError,
    ChannelError,
    Deliver,
    InboundMessage,
    OutboundMessage,
    SentMessage,
)

__all__ = ["MemoryChannel", "PostedMessage"]


@dataclass
class PostedMessage:
    """A message as the chat currently shows it."""

    message_id: str
    chat_id: str
    thread_id: str | None
    text: str
    attachments: list[Attachment]
    silent: bool
    deleted: bool = False
    #: Every text the message has shown, first one first (draft streaming edits).
    history: list[str] = field(default_factory=list)


class MemoryChannel(Channel):
    """A :class:`~fermix_core.channel.Channel` whose platform is a few Python lists.

    ``sent`` holds every :class:`OutboundMessage` in order; ``edits``, ``deletes``,
    ``reactions`` and ``typing_calls`` record the optional abilities; :meth:`visible` shows a
    chat the way a user would see it now.
    """

    def __init__(
        self,
        name: str = "memory",
        *,
        supports_edit: bool = True,
        supports_delete: bool = True,
        supports_reactions: bool = True,
        supports_typing: bool = True,
        local: bool = False,
    ) -> None:
        self.name = name
        self.supports_edit = supports_edit
        self.supports_delete = supports_delete
        self.supports_reactions = supports_reactions
        self.supports_typing = supports_typing
        self.local = local
        self.sent: list[OutboundMessage] = []
        self.edits: list[tuple[str, str, str]] = []
        self.deletes: list[tuple[str, str]] = []
        self.reactions: list[tuple[str, str, str]] = []
        self.typing_calls: list[tuple[str, str | None]] = []
        self.inbound: list[InboundMessage] = []
        self.posted: dict[str, PostedMessage] = {}
        self._deliver: Deliver | None = None
        self._ids = itertools.count(1)
        self._inbound_ids = itertools.count(1)
        self._failures: list[BaseException] = []

    # ------------------------------------------------------------------ lifecycle

    @property
    def running(self) -> bool:
        return self._deliver is not None

    async def start(self, deliver: Deliver) -> None:
        if not callable(deliver):
            raise TypeError("start() needs the gateway's async deliver callable")
        self._deliver = deliver

    async def stop(self) -> None:
        self._deliver = None

    # ------------------------------------------------------------------ inbound

    async def inject(
        self,
        message: InboundMessage | str,
        *,
        sender_id: str = "owner",
        chat_id: str = "chat",
        thread_id: str | None = None,
        is_group: bool = False,
        attachments: Iterable[Attachment] = (),
    ) -> InboundMessage:
        """Deliver a platform message as if a user sent it; returns what was delivered.

        Awaits the ``deliver`` callback, so when this returns the gateway has accepted (or
        dropped) the message.
        """
        if self._deliver is None:
            raise ChannelError(f"channel {self.name!r} is not running; call start() first")
        if isinstance(message, str):
            message = InboundMessage(
                channel=self.name,
                chat_id=chat_id,
                thread_id=thread_id,
                sender_id=sender_id,
                text=message,
                attachments=list(attachments),
                message_id=f"in{next(self._inbound_ids)}",
                is_group=is_group,
                local=self.local,
            )
        elif not isinstance(message, InboundMessage):
            raise TypeError(
                f"inject() takes an InboundMessage or a str, not {type(message).__name__}"
            )
        self.inbound.append(message)
        await self._deliver(message)
        return message

    # ------------------------------------------------------------------ outbound

    def fail_next(self, *errors: BaseException) -> None:
        """Make the next sends raise these errors, one per send (a platform refusing)."""
        self._failures.extend(errors)

    async def send(self, message: OutboundMessage) -> SentMessage:
        if self._deliver is None:
            raise ChannelError(f"channel {self.name!r} is not running; call start() first")
        if not isinstance(message, OutboundMessage):
            raise TypeError(f"send() takes an OutboundMessage, not {type(message).__name__}")
        if self._failures:
            raise self._failures.pop(0)
        self.sent.append(message)
        message_id = f"m{next(self._ids)}"
        self.posted[message_id] = PostedMessage(
            message_id=message_id,
            chat_id=message.chat_id,
            thread_id=message.thread_id,
            text=message.text,
            attachments=list(message.attachments),
            silent=message.silent,
            history=[message.text],
        )
        return SentMessage(message_id=message_id)

    def _posted(self, chat_id: str, message_id: str, verb: str) -> PostedMessage:
        posted = self.posted.get(message_id)
        if posted is None or posted.chat_id != chat_id:
            raise ChannelError(
                f"cannot {verb} message {message_id!r} in chat {chat_id!r}: not found"
            )
        if posted.deleted:
            raise ChannelError(f"cannot {verb} message {message_id!r}: it was deleted")
        return posted

    async def edit(self, chat_id: str, message_id: str, text: str) -> None:
        if not self.supports_edit:
            raise ChannelCapabilityError(self.name, "edit messages", "supports_edit")
        posted = self._posted(chat_id, message_id, "edit")
        if not text.strip():
            raise ChannelError("cannot edit a message to blank text; delete it instead")
        posted.text = text
        posted.history.append(text)
        self.edits.append((chat_id, message_id, text))

    async def delete(self, chat_id: str, message_id: str) -> None:
        if not self.supports_delete:
            raise ChannelCapabilityError(self.name, "delete messages", "supports_delete")
        posted = self._posted(chat_id, message_id, "delete")
        posted.deleted = True
        self.deletes.append((chat_id, message_id))

    async def react(self, chat_id: str, message_id: str, emoji: str) -> None:
        if not self.supports_reactions:
            raise ChannelCapabilityError(self.name, "react to messages", "supports_reactions")
        if not emoji.strip():
            raise ChannelError("a reaction needs an emoji")
        known = {m.message_id for m in self.inbound if m.chat_id == chat_id}
        if message_id not in known and message_id not in self.posted:
            raise ChannelError(
                f"cannot react to message {message_id!r} in chat {chat_id!r}: not found"
            )
        self.reactions.append((chat_id, message_id, emoji))

    async def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        if not self.supports_typing:
            raise ChannelCapabilityError(self.name, "show typing", "supports_typing")
        self.typing_calls.append((chat_id, thread_id))

    # ------------------------------------------------------------------ reading

    @property
    def texts(self) -> list[str]:
        """The text of every send, in order (as sent, before any edit)."""
        return [m.text for m in self.sent]

    def visible(self, chat_id: str = "chat") -> list[str]:
        """What *chat_id* shows now: current texts of messages not deleted, oldest first."""
        return [p.text for p in self.posted.values() if p.chat_id == chat_id and not p.deleted]
