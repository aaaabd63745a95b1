"""Send one chunk; if the platform rejects its formatting, resend it once as plain text."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from fermix_core.channel import ChannelFormatError

from .present import RenderedChunk

__all__ = ["is_channel_format_error", "send_with_plain_fallback"]

log = logging.getLogger("fermix.channels.presentation")

T = TypeVar("T")


def is_channel_format_error(exc: BaseException) -> bool:
    """The adapter said the platform rejected the markup (:class:`ChannelFormatError`)."""
    return isinstance(exc, ChannelFormatError)


async def send_with_plain_fallback(
    send: Callable[[str, bool], Awaitable[T]],
    chunk: RenderedChunk,
    is_format_error: Callable[[BaseException], bool] = is_channel_format_error,
    *,
    channel: str = "",
) -> T:
    """Send *chunk* with ``send(text, formatted)``; on a formatting rejection, send its plain
    text once.

    *is_format_error* tells a rejected-markup error from every other failure — by default
    an adapter's :class:`~fermix_core.channel.ChannelFormatError` (Telegram's "can't parse
    entities" …); only that error earns the plain
    resend, and it is logged as an error, because it means a renderer produced markup the
    platform does not accept. Any other error — and a failure of the plain resend —
    propagates to the caller's retry and delivery handling unchanged.
    """
    if not chunk.formatted:
        return await send(chunk.text, False)
    try:
        return await send(chunk.text, True)
    except Exception as exc:
        if not is_format_error(exc):
            raise
        log.error(
            "channel %s rejected a formatted message (%s: %s); resending it once as plain "
            "text. This is a rendering fault: report it with the reply that caused it.",
            channel or "?",
            type(exc).__name__,
            exc,
        )
        return await send(chunk.plain, False)
