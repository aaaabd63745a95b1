"""Messages for a CLI conversation that arrive after the ask that caused them returned.

A chat channel has somewhere to post late: the chat itself. The terminal does not — each
``fermix ask`` (and each line of ``fermix chat``) is one request and one answer — so work
that finishes later (a ``/background`` result) is held here per CLI session until a
reader takes it: ``fermix chat`` polls while it waits for input, in-process or through the
daemon's ``inbox`` control method. What is posted here is also committed to the
conversation's history by the turn that produced it, so an inbox that nobody reads (the
caller was a one-shot ``fermix ask``) loses nothing but the notification. Each session
keeps the newest :data:`INBOX_LIMIT` messages.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

import anyio

from fermix_core.channel import OutboundMessage, SentMessage

__all__ = ["INBOX_LIMIT", "MAX_WAIT_SECONDS", "InboxReply", "LocalInbox"]

#: Messages kept per session for a reader that has not come yet.
INBOX_LIMIT = 50
#: The longest one ``take`` may wait over the control socket (a long poll, re-issued).
MAX_WAIT_SECONDS = 30.0


class LocalInbox:
    def __init__(self, limit: int = INBOX_LIMIT) -> None:
        self.limit = limit
        self._items: dict[str, deque[str]] = {}
        self._arrived: dict[str, anyio.Event] = {}

    def post(self, session: str, text: str) -> None:
        if not text:
            return
        self._items.setdefault(session, deque(maxlen=self.limit)).append(text)
        event = self._arrived.pop(session, None)
        if event is not None:
            event.set()

    def pending(self, session: str) -> int:
        return len(self._items.get(session, ()))

    async def take(self, session: str, *, wait: float | None = 0) -> list[str]:
        """Everything waiting for *session*, oldest first; waits up to *wait* seconds for
        the first message when there is none (``None`` waits until one comes)."""
        if not self._items.get(session) and (wait is None or wait > 0):
            event = self._arrived.setdefault(session, anyio.Event())
            with anyio.move_on_after(math.inf if wait is None else wait):
                await event.wait()
        items = self._items.pop(session, None)
        return list(items) if items else []


class InboxReply:
    """The reply port of work a CLI conversation started but does not wait for."""

    def __init__(self, inbox: LocalInbox, session: str, features: Any) -> None:
        self.inbox = inbox
        self.session = session
        self.features = features
        self._sent = 0

    async def send(self, message: OutboundMessage) -> SentMessage:
        self.inbox.post(self.session, message.text or "")
        self._sent += 1
        return SentMessage(message_id=f"inbox-{self._sent}")
