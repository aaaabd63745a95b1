"""The reply port for channel turns: Markdown in, rendered, split, paced and retried sends out.

The agent (and the stream controller) speak Markdown to :class:`OutboundPort`; the port
renders it in the adapter's ``dialect`` with the presentation package, splits it on the
boundary ladder within the adapter's ``max_text``, and sends the chunks in order:

* only the first chunk notifies (the caller's ``silent`` is kept on it), only the first
  replies to the inbound message; code blocks too large for one message follow as text-file
  attachments, then the message's own attachments;
* one chat's sends are serialized (a reply's chunks never interleave with another send to
  that chat) and paced by the adapter's ``send_interval``;
* :class:`~fermix_core.channel.ChannelRateLimited` waits ``retry_after`` (or a backoff
  step) and retries; :class:`~fermix_core.channel.ChannelTransientError` retries with
  capped, jittered backoff; :class:`~fermix_core.channel.ChannelFormatError` resends that
  one chunk once as plain text and logs an error; any other error is permanent;
* a reply that still cannot be delivered is logged with its conversation, recorded in the
  channel's health and raised as :class:`ReplyUndelivered` — the turn runner keeps the reply
  in history, so nothing is dropped silently;
* media are checked against the adapter's ``media_caps`` before anything is uploaded; an
  oversized file is refused with :class:`MediaTooLarge`, which says what to do instead;
  that refusal and any failed media send emit ``channel.media_send_error``.

It also carries the optional abilities (edit, delete, react, typing) with the same retry
rules, and :meth:`OutboundPort.approval`, the sandbox approval prompt as plain text with its
``/confirm TOKEN`` line.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio

from fermix_core.channel import (
    Attachment,
    Channel,
    ChannelError,
    ChannelFormatError,
    ChannelRateLimited,
    ChannelTransientError,
    OutboundMessage,
    SentMessage,
)

__all__ = [
    "MediaTooLarge",
    "OutboundPort",
    "ReplyUndelivered",
    "RetryPolicy",
    "media_cap",
]

log = logging.getLogger("fermix.channels.outbound")

T = TypeVar("T")

#: Seam dialect names that the presentation package spells differently.
_DIALECT_ALIASES = {"telegram_html": "telegram"}


class ReplyUndelivered(ChannelError):
    """A reply (or part of it) could not be delivered after the retries; already logged."""


class MediaTooLarge(ChannelError):
    """An attachment is over the channel's cap for its kind; nothing was uploaded."""


@dataclass(frozen=True)
class RetryPolicy:
    """How hard a send is retried: ``attempts`` tries in all for rate limits and transient
    errors, backoff ``base·2^n`` capped at ``cap`` with jitter; a platform asking for a wait
    longer than ``max_retry_after`` seconds is not waited for."""

    attempts: int = 5
    base: float = 0.5
    cap: float = 30.0
    max_retry_after: float = 120.0

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        raw = min(self.cap, self.base * (2 ** min(attempt, 30)))
        return raw * (0.5 + 0.5 * rand())


def media_cap(channel: Channel, kind: str) -> int | None:
    """The channel's upload cap in bytes for *kind* (falling back to ``document``'s)."""
    caps: Mapping[str, int] = getattr(channel, "media_caps", None) or {}
    cap = caps.get(kind)
    if cap is None:
        cap = caps.get("document")
    return cap


def _size_of(attachment: Attachment) -> int | None:
    if attachment.size is not None:
        return attachment.size
    if attachment.data is not None:
        return len(attachment.data)
    if attachment.path is not None:
        try:
            return Path(attachment.path).stat().st_size
        except OSError:
            return None
    return None


def _mb(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB" if size >= 100_000 else f"{size / 1000:.0f} KB"


def _profile(channel: Channel) -> tuple[Any, int]:
    """The presentation profile and cap for *channel* (plain for an unknown dialect)."""
    from fermix_core.channels import presentation

    limit = int(getattr(channel, "max_text", 4096) or 4096)
    declared = getattr(channel, "channel_profile", None)
    if callable(declared):  # an adapter with its own DialectProfile
        profile = declared()
        return profile, min(limit, profile.limit)
    name = str(getattr(channel, "dialect", "plain") or "plain")
    name = _DIALECT_ALIASES.get(name, name)
    try:
        profile = presentation.dialect_profile(name)
    except ValueError:
        log.warning(
            "channel %s declares unknown dialect %r; replies go out as plain text",
            getattr(channel, "name", "?"),
            name,
        )
        profile = presentation.dialect_profile("plain")
    return profile, max(presentation.MIN_LIMIT, limit)


class OutboundPort:
    """A :class:`~fermix_core.gateway.types.ReplyPort` over one channel adapter.

    *on_sent* is called after every delivered message, *on_failed* with a one-line reason
    for every undeliverable reply (the runtime keeps both in the channel's health). *sleep*
    and *clock* are injectable so tests never wait on real time.
    """

    def __init__(
        self,
        channel: Channel,
        features: Any,
        *,
        retry: RetryPolicy | None = None,
        on_sent: Callable[[], None] | None = None,
        on_failed: Callable[[str], None] | None = None,
        emit: Callable[..., None] | None = None,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.channel = channel
        self.features = features
        self.name = getattr(channel, "name", "?")
        self.retry = retry or RetryPolicy()
        self._on_sent = on_sent
        self._on_failed = on_failed
        self._emit = emit
        self._sleep = sleep
        self._clock = clock
        self._profile, self._limit = _profile(channel)
        self.interval = float(getattr(channel, "send_interval", 0.0) or 0.0)
        self._locks: dict[tuple[str, str | None], anyio.Lock] = {}
        self._last_send: dict[tuple[str, str | None], float] = {}

    def __repr__(self) -> str:
        return f"OutboundPort({self.name!r})"

    # ------------------------------------------------------------------ helpers

    def emit(self, name: str, **data: Any) -> None:
        if self._emit is None:
            return
        try:
            self._emit(name, channel=self.name, **data)
        except Exception:
            log.exception("telemetry emit of %s failed", name)

    def _lock(self, key: tuple[str, str | None]) -> anyio.Lock:
        lock = self._locks.get(key)
        if lock is None:
            if len(self._locks) > 4096:  # forget idle chats; a held lock is never dropped
                for old in [k for k, v in self._locks.items() if not v.locked()]:
                    del self._locks[old]
                    self._last_send.pop(old, None)
            lock = self._locks[key] = anyio.Lock()
        return lock

    async def _pace(self, key: tuple[str, str | None]) -> None:
        if self.interval <= 0:
            return
        last = self._last_send.get(key)
        if last is not None:
            wait = self.interval - (self._clock() - last)
            if wait > 0:
                await self._sleep(wait)

    async def _with_retries(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        attempt = 0
        while True:
            try:
                return await call()
            except ChannelRateLimited as exc:
                attempt += 1
                wait = exc.retry_after if exc.retry_after is not None else self.retry.delay(attempt)
                if attempt >= self.retry.attempts or wait > self.retry.max_retry_after:
                    raise
                self.emit("channel.rate_limited", retry_after=wait, operation=what)
                log.info("channel %s rate-limited %s; retrying in %.1fs", self.name, what, wait)
                await self._sleep(wait)
            except ChannelTransientError as exc:
                attempt += 1
                if attempt >= self.retry.attempts:
                    raise
                wait = self.retry.delay(attempt)
                log.info(
                    "channel %s: %s failed (%s); retrying in %.1fs", self.name, what, exc, wait
                )
                await self._sleep(wait)

    async def _send_one(self, key: tuple[str, str | None], message: OutboundMessage) -> SentMessage:
        await self._pace(key)
        started = self._clock()
        sent = await self._with_retries("send", lambda: self.channel.send(message))
        self._last_send[key] = self._clock()
        self.emit(
            "channel.reply",
            kind="media" if message.attachments else "text",
            duration_ms=round((self._clock() - started) * 1000, 3),
        )
        self.emit("channel.message", direction="outbound")
        if self._on_sent is not None:
            self._on_sent()
        return sent

    def _undelivered(
        self, message: OutboundMessage, what: str, exc: BaseException
    ) -> ReplyUndelivered:
        reason = f"{type(exc).__name__}: {exc}"
        log.error(
            "reply undelivered on %s (chat %s, thread %s): %s failed: %s; the reply is kept in "
            "the conversation's history",
            self.name,
            message.chat_id,
            message.thread_id,
            what,
            reason,
        )
        self.emit("channel.reply_failed", chat_id=message.chat_id, error=reason)
        if self._on_failed is not None:
            self._on_failed(f"{what}: {reason}")
        return ReplyUndelivered(f"{what} on {self.name} was not delivered ({reason})")

    def _media_error(self, attachments: list[Attachment], exc: BaseException) -> None:
        """``channel.media_send_error``: a media reply that was refused or failed."""
        kinds = sorted({str(a.kind) for a in attachments})
        self.emit("channel.media_send_error", kind=",".join(kinds), error=str(exc))

    def check_media(self, attachments: list[Attachment]) -> None:
        """Refuse any attachment over the channel's cap, before anything is uploaded."""
        for attachment in attachments:
            kind = str(attachment.kind)
            cap = media_cap(self.channel, kind)
            size = _size_of(attachment)
            if cap is None or size is None or size <= cap:
                continue
            name = attachment.filename or (attachment.path.name if attachment.path else "file")
            hint = (
                " Send it as a document instead (kind='document')."
                if kind != "document" and (media_cap(self.channel, "document") or 0) >= size
                else " Compress it or send a smaller file."
            )
            raise MediaTooLarge(
                f"{name} is {_mb(size)}; {self.name} accepts {kind} files up to {_mb(cap)}.{hint}"
            )

    # ------------------------------------------------------------------ the port

    async def send(self, message: OutboundMessage) -> SentMessage:
        """Render, split and send *message*; the first delivered message's id comes back."""
        from fermix_core.channels.presentation import RenderedChunk, present

        try:
            self.check_media(list(message.attachments))
        except MediaTooLarge as exc:
            self._media_error(message.attachments, exc)
            raise
        chunks: list[RenderedChunk] = []
        extra: list[Attachment] = []
        if message.text.strip():
            if message.plain:
                chunks = [
                    RenderedChunk(part, part, formatted=False)
                    for part in self._split_plain(message.text)
                ]
            else:
                presentation = present(message.text, self._profile, self._limit)
                chunks, extra = list(presentation.chunks), list(presentation.attachments)
        key = (message.chat_id, message.thread_id)
        first: SentMessage | None = None
        async with self._lock(key):
            for index, chunk in enumerate(chunks):
                outbound = OutboundMessage(
                    chat_id=message.chat_id,
                    thread_id=message.thread_id,
                    text=chunk.text,
                    plain=not chunk.formatted,
                    silent=message.silent or index > 0,
                    reply_to=message.reply_to if index == 0 else None,
                )
                what = f"part {index + 1} of {len(chunks)}" if len(chunks) > 1 else "the reply"
                try:
                    sent = await self._send_chunk(key, outbound, chunk.plain)
                except ChannelError as exc:
                    raise self._undelivered(message, what, exc) from exc
                first = first or sent
            for attachment in [*extra, *message.attachments]:
                outbound = OutboundMessage(
                    chat_id=message.chat_id,
                    thread_id=message.thread_id,
                    attachments=[attachment],
                    silent=message.silent or first is not None,
                    reply_to=message.reply_to if first is None else None,
                )
                try:
                    sent = await self._send_one(key, outbound)
                except ChannelError as exc:
                    self._media_error([attachment], exc)
                    raise self._undelivered(
                        message, f"the attachment {attachment.filename or ''}".strip(), exc
                    ) from exc
                first = first or sent
        if first is None:
            raise ChannelError("nothing to send: the reply rendered to no text and no media")
        return first

    async def _send_chunk(
        self, key: tuple[str, str | None], message: OutboundMessage, plain: str
    ) -> SentMessage:
        try:
            return await self._send_one(key, message)
        except ChannelFormatError as exc:
            if message.plain:
                raise
            log.error(
                "channel %s rejected a formatted message (%s); resending it once as plain "
                "text. This is a rendering fault: report it with the reply that caused it.",
                self.name,
                exc,
            )
            self.emit("channel.format_fallback", chat_id=message.chat_id)
            return await self._send_one(
                key, message.model_copy(update={"text": plain, "plain": True})
            )

    def _split_plain(self, text: str) -> list[str]:
        """Plain text cut at line breaks (or hard, for a line too long) within the cap."""
        measure = self._profile.measure
        limit = self._limit
        parts: list[str] = []
        current = ""
        for line in text.splitlines(keepends=True):
            if measure(current + line) <= limit:
                current += line
                continue
            if current.strip():
                parts.append(current.rstrip("\n"))
            current = ""
            while measure(line) > limit:
                good, bad = 1, len(line)
                while bad - good > 1:
                    mid = (good + bad) // 2
                    if measure(line[:mid]) <= limit:
                        good = mid
                    else:
                        bad = mid
                parts.append(line[:good])
                line = line[good:]
            current = line
        if current.strip():
            parts.append(current.rstrip("\n"))
        return parts

    async def edit(self, chat_id: str, message_id: str, text: str) -> None:
        """Replace a sent message with *text* (Markdown), rendered; plain once on rejection."""
        from fermix_core.channels.presentation import present

        chunks = present(text, self._profile, self._limit).chunks
        if not chunks:
            raise ChannelError("cannot edit a message to blank text; delete it instead")
        chunk = chunks[0]
        if len(chunks) > 1:
            log.warning(
                "channel %s: an edit of %s is longer than one message; only its first part "
                "is shown",
                self.name,
                message_id,
            )

        async def call(body: str, plain: bool) -> None:
            await self._with_retries(
                "edit", lambda: self.channel.edit(chat_id, message_id, body, plain=plain)
            )

        try:
            await call(chunk.text, not chunk.formatted)
        except ChannelFormatError:
            if not chunk.formatted:
                raise
            log.error("channel %s rejected a formatted edit; editing as plain text", self.name)
            await call(chunk.plain, True)

    async def delete(self, chat_id: str, message_id: str) -> None:
        await self._with_retries("delete", lambda: self.channel.delete(chat_id, message_id))

    async def react(self, chat_id: str, message_id: str, emoji: str) -> None:
        allowed = getattr(self.channel, "reactions_allowed", None)
        if allowed is not None and emoji not in allowed:
            raise ChannelError(
                f"{self.name} accepts only these reactions: {' '.join(allowed)}; {emoji!r} "
                "is not one of them"
            )
        await self._with_retries("react", lambda: self.channel.react(chat_id, message_id, emoji))

    def turn_stream(self, message: Any, session_id: str) -> Any:
        """The adapter's own live stream for one turn (``Channel.turn_stream``), or None.

        A surface whose protocol streams natively (ACP's ``session/update``) feeds the
        turn's events straight to its client instead of through draft or block messages.
        """
        own = getattr(self.channel, "turn_stream", None)
        return own(message, session_id) if callable(own) else None

    async def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        """Show the typing indicator; best effort (a failure is logged, never raised)."""
        if not getattr(self.channel, "supports_typing", False):
            return
        try:
            await self.channel.typing(chat_id, thread_id)
        except Exception as exc:
            log.debug("channel %s: typing indicator failed: %s", self.name, exc)

    async def approval(self, chat_id: str, thread_id: str | None, proposal: Any) -> SentMessage:
        """The sandbox approval prompt: plain text ending in its ``/confirm TOKEN`` line.

        An adapter with a native approval control (an inline Approve button) provides
        ``send_approval(chat_id, thread_id, proposal)``: it sends the prompt itself and
        decides whether the typed token line shows (never in a shared chat); the button's
        tap must come back as the owner's ``/confirm TOKEN`` message.
        """
        native = getattr(self.channel, "send_approval", None)
        if callable(native):
            return await self._with_retries(
                "approval", lambda: native(chat_id, thread_id, proposal)
            )
        prompt = proposal.prompt(include_token=True)
        return await self.send(
            OutboundMessage(chat_id=chat_id, thread_id=thread_id, text=prompt, plain=True)
        )
