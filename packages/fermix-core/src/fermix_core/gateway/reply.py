"""Reply ports: the way back to the chat a message came from.

The agent never learns which channel a message came from; it gets a :class:`ReplyPort`
whose ``features`` say what the surface can do (edit a draft, delete, react) so streaming
and the reaction capability pick a strategy up front instead of failing halfway through a
reply. :class:`ChannelReplyPort` is the port over a running :class:`Channel` adapter;
local surfaces (the CLI, the daemon socket) bring their own.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from fermix_core.channel import Channel, InboundMessage, OutboundMessage, SentMessage
from fermix_core.gateway.types import ChannelFeatures, ReplyPort

__all__ = [
    "STREAMING_MODES",
    "ChannelReplyPort",
    "features_of",
    "reply_text",
    "streaming_mode",
    "try_reply_text",
]

log = logging.getLogger("fermix.gateway")

#: The values ``[fermix_channels.<name>] streaming`` accepts.
STREAMING_MODES: tuple[str, ...] = ("off", "draft", "block")


def streaming_mode(configured: str | None, *, can_draft: bool) -> str:
    """The streaming mode of a channel: *configured*, or derived from its abilities.

    Unset derives ``"draft"`` where the channel can draft (edit its own messages in place)
    and ``"block"`` elsewhere. An explicit ``"draft"`` on a channel that cannot stays
    ``"draft"``: the turn then streams nothing (no fallback to block) and ``fermix
    doctor`` flags it.
    """
    if configured is None:
        return "draft" if can_draft else "block"
    if configured not in STREAMING_MODES:
        raise ValueError(
            f"streaming must be one of {', '.join(repr(m) for m in STREAMING_MODES)}, "
            f"not {configured!r}"
        )
    return configured


def features_of(
    channel: Channel,
    *,
    local: bool = False,
    reactions: Sequence[str] | None = None,
    draft: bool | None = None,
    slash_commands: bool = True,
    streaming: str | None = None,
) -> ChannelFeatures:
    """Features declared by a channel adapter's ability flags.

    ``reactions`` narrows a reaction-capable channel to its fixed emoji set; leave it
    ``None`` for "any single emoji". ``draft`` defaults to "can edit", the only thing draft
    streaming needs from the platform; the runtime narrows it to the channel spec's
    ``supports_draft`` (a channel that can edit but whose edits are rate-limited too hard
    for a live draft, like Slack, streams in blocks by default). ``streaming`` is the
    channel section's ``streaming`` value (``None`` when unset); see :func:`streaming_mode`.
    """
    can_react = bool(getattr(channel, "supports_reactions", False))
    can_edit = bool(getattr(channel, "supports_edit", False))
    can_draft = can_edit if draft is None else (draft and can_edit)
    return ChannelFeatures(
        local=local,
        reactions=(tuple(reactions) if reactions is not None else ()) if can_react else None,
        draft=can_draft,
        edit=can_edit,
        delete=bool(getattr(channel, "supports_delete", False)),
        slash_commands=slash_commands,
        streaming=streaming_mode(streaming, can_draft=can_draft),
    )


class ChannelReplyPort:
    """A :class:`ReplyPort` over a channel adapter; one per channel, shared by its chats.

    Outbound messages already name their chat, so one port serves every conversation of
    the channel and costs nothing per message.
    """

    def __init__(self, channel: Channel, features: ChannelFeatures | None = None) -> None:
        self.channel = channel
        self.features = features if features is not None else features_of(channel)

    async def send(self, message: OutboundMessage) -> SentMessage:
        return await self.channel.send(message)

    async def react(self, chat_id: str, message_id: str, emoji: str) -> None:
        """Acknowledge a message with one emoji (only when ``features.reactions`` allows)."""
        await self.channel.react(chat_id, message_id, emoji)

    async def edit(self, chat_id: str, message_id: str, text: str) -> None:
        """Replace a sent message's text (only when ``features.edit``)."""
        await self.channel.edit(chat_id, message_id, text)

    async def delete(self, chat_id: str, message_id: str) -> None:
        """Delete a sent message (only when ``features.delete``)."""
        await self.channel.delete(chat_id, message_id)

    def __repr__(self) -> str:
        return f"ChannelReplyPort({getattr(self.channel, 'name', '?')!r})"


def _outbound(inbound: InboundMessage, text: str) -> OutboundMessage:
    return OutboundMessage(
        chat_id=inbound.chat_id,
        thread_id=inbound.thread_id,
        text=text,
        reply_to=inbound.message_id,
    )


async def reply_text(reply: ReplyPort, inbound: InboundMessage, text: str) -> SentMessage:
    """Answer *inbound* in its own chat and thread with *text*."""
    return await reply.send(_outbound(inbound, text))


async def try_reply_text(reply: ReplyPort, inbound: InboundMessage, text: str) -> bool:
    """Like :func:`reply_text`, but a platform refusal is logged instead of raised.

    Gateway notes ("looks empty", "restart in progress", command answers) are courtesy
    replies: an adapter whose platform refused one must not see its receive loop fail.
    """
    try:
        await reply_text(reply, inbound, text)
    except Exception as exc:
        log.warning(
            "could not reply on %s chat %s: %s: %s",
            inbound.channel,
            inbound.chat_id,
            type(exc).__name__,
            exc,
        )
        return False
    return True
