"""Live streaming of a reply into a chat, driven by the channel's declared abilities.

A :class:`StreamController` is fed the provider's :class:`~fermix_core.provider.StreamEvent`s
while the agent loop runs and turns them into sends, edits and deletes on the turn's reply
port. It never asks the platform what it can do halfway through a reply: the mode comes from
``ReplyPort.features`` (see :func:`fermix_core.gateway.reply.features_of`) and the controller
only calls ``edit``/``delete`` where the features say the port has them.

Two modes:

``draft``
    One live message, opened once at least :data:`DRAFT_OPEN_CHARS` characters arrived and
    edited about once per :data:`DRAFT_EDIT_INTERVAL`. Past :data:`DRAFT_SEAL_CHARS` rendered
    characters the live card is *sealed* at a natural boundary (a section heading, else a
    paragraph) and the rest continues in a fresh message. Sealed cards are finished messages;
    :meth:`StreamController.abort` (``/stop``, a failed call) deletes only the live one. At
    the end the authoritative final text replaces the live card, a short remainder merging
    into it rather than becoming one more message; a final text that does not extend what
    was sealed is handed back to be delivered in full. Reasoning summaries roll into one
    "💭" status message edited in place and deleted when the answer lands.

``block``
    Every completed output item is its own message, pre-tool commentary included. Long text
    goes out in :data:`BLOCK_MIN_CHARS`–:data:`BLOCK_MAX_CHARS` pieces cut on the boundary
    ladder, and text that stops growing for :data:`BLOCK_IDLE_FLUSH` seconds is flushed up
    to its last complete sentence. Reasoning summaries arrive as silent "💭" one-liners,
    deleted when the answer lands — and not sent at all where the channel cannot delete.

Events are only queued by :meth:`StreamController.on_event` (it runs inline with the
provider's stream, which must not wait on a chat platform); every send, edit and delete
happens in :meth:`StreamController.tick`, which :meth:`StreamController.run` calls whenever
an event arrives or a timer falls due. Time comes from an injected clock, so tests drive the
controller by advancing a clock and calling ``tick`` — no sleeping.

Every action is reported as telemetry ``channel.stream`` with ``phase`` = ``open`` (a live
card or status message appeared), ``edit``, ``block`` (a block-mode message), ``seal``,
``rotate`` (a sealed card's continuation opened) or ``discard`` (a card or status deleted),
plus the turn's ``session_id``.
"""

from __future__ import annotations

import functools
import logging
import math
import re
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio

from fermix_core.channel import OutboundMessage
from fermix_core.channels.presentation import (
    DialectProfile,
    block_cut,
    dialect_profile,
    rendered_length,
    seal_point,
)
from fermix_core.provider import StreamEvent, StreamEventKind

__all__ = [
    "BLOCK_IDLE_FLUSH",
    "BLOCK_MAX_CHARS",
    "BLOCK_MIN_CHARS",
    "DRAFT_EDIT_INTERVAL",
    "DRAFT_HARD_CHARS",
    "DRAFT_MERGE_CHARS",
    "DRAFT_OPEN_CHARS",
    "DRAFT_SEAL_CHARS",
    "STATUS_PREFIX",
    "StreamController",
    "complete_prefix",
    "extension_point",
    "status_line",
]

log = logging.getLogger("fermix.channels.stream")

DRAFT_OPEN_CHARS = 30
DRAFT_EDIT_INTERVAL = 1.0
#: A live card past this many rendered characters is sealed at the next natural boundary.
DRAFT_SEAL_CHARS = 1400
#: A live card is never let grow past this (below Discord's 2,000, the smallest cap).
DRAFT_HARD_CHARS = 1800
#: A final remainder this short merges into the live card instead of one more message.
DRAFT_MERGE_CHARS = 300
BLOCK_MIN_CHARS = 800
BLOCK_MAX_CHARS = 1200
BLOCK_IDLE_FLUSH = 1.0
STATUS_PREFIX = "💭"
#: Timers wake this much after their deadline, so a clock read a hair early is still due.
_TIMER_SLACK = 0.005
_STATUS_MAX = 120

# --------------------------------------------------------------------------- boundaries

#: Cut decisions render the text, which costs milliseconds per kilobyte: they are re-taken
#: once the text grew this many characters since the last one (and always at the end).
RECHECK_CHARS = 100
#: Cut decisions on text this short render on the event loop (tens to a few hundred
#: microseconds) instead of in a worker thread, whose hop alone costs about as much.
INLINE_CHARS = 256

_SENTENCE_END = re.compile(r"[.!?…。！？:]+[\"'”’)\]»]*(?:\s+|$)")
_PARAGRAPH = re.compile(r"\n[ \t]*\n\s*")
_FENCE_LINE = re.compile(r"^ {0,3}(?:`{3,}|~{3,})", re.M)


def _profile(dialect: str | DialectProfile) -> DialectProfile:
    """The presentation profile for a channel's dialect; unknown names render as plain."""
    if isinstance(dialect, DialectProfile):
        return dialect
    name = DIALECT_ALIASES.get(dialect, dialect)
    try:
        return dialect_profile(name)
    except ValueError:
        log.warning("unknown presentation dialect %r; streaming measures it as plain", dialect)
        return dialect_profile("plain")


#: Channel ``dialect`` names that differ from the presentation package's.
DIALECT_ALIASES = {"telegram_html": "telegram"}


def complete_prefix(text: str) -> int | None:
    """The end of the last complete sentence or paragraph of growing *text*.

    Used by block mode's idle flush, which sends finished sentences only; never a place
    inside an open code fence.
    """
    ends = [m.end() for m in _PARAGRAPH.finditer(text)]
    ends += [m.end() for m in _SENTENCE_END.finditer(text)]
    for end in sorted(set(ends), reverse=True):
        if len(_FENCE_LINE.findall(text[:end])) % 2 == 0:
            return end
    return None


def extension_point(full: str, prefix: str) -> int | None:
    """Where *full* continues past *prefix*, comparing text without whitespace.

    Streams and final answers join their pieces differently (an item separator, a trimmed
    newline), so "does the final text extend what was shown" ignores whitespace; ``None``
    means *full* says something else.
    """
    i = 0
    for char in prefix:
        if char.isspace():
            continue
        while i < len(full) and full[i].isspace():
            i += 1
        if i >= len(full) or full[i] != char:
            return None
        i += 1
    return i


def status_line(summary: str) -> str:
    """A reasoning summary as one "💭" line: its bold title, else its first line."""
    text = summary.strip()
    title = re.match(r"\*\*(.+?)\*\*", text)
    line = title.group(1) if title else next((ln for ln in text.splitlines() if ln.strip()), "")
    line = line.strip().strip("*#").strip()
    if len(line) > _STATUS_MAX:
        line = line[: _STATUS_MAX - 1].rstrip() + "…"
    return f"{STATUS_PREFIX} {line}" if line else STATUS_PREFIX


# --------------------------------------------------------------------------- controller


@dataclass
class _Card:
    """A message the stream posted: its id and the text it shows now."""

    message_id: str
    shown: str
    edited_at: float


@dataclass
class _Draft:
    #: Streamed answer text of the current model call (since the last tool call).
    answer: str = ""
    #: ``answer[:cut]`` is sealed into finished cards; the live card shows the rest.
    cut: int = 0
    live: _Card | None = None
    #: The live card is the continuation of a sealed one (its opening is a "rotate").
    continued: bool = False
    #: No safe boundary before the hard cap: live edits stop, the end is delivered whole.
    overflow: bool = False
    #: Length of the live text when sealing was last considered.
    checked: int = 0


@dataclass
class _Block:
    #: Text of the current output item that has not been sent yet.
    pending: str = ""
    #: Text of the current output item already sent.
    sent: str = ""
    last_delta: float = 0.0
    #: Length of ``pending`` when a cut was last considered.
    checked: int = 0


@dataclass
class _Status:
    text: str = ""
    card: _Card | None = None
    #: Block mode: every "💭" message, deleted when the answer lands.
    lines: list[str] = field(default_factory=list)
    #: The platform refused a status message: no more of them this turn.
    off: bool = False


class StreamController:
    """Streams one turn's reply into one chat through a reply port.

    *mode* is ``"draft"`` or ``"block"`` (``features.stream_mode``). *clock* returns
    seconds (anyio's clock by default); *dialect* is the channel's presentation dialect
    (``Channel.dialect``), in which every size limit here is measured. Call
    :meth:`finish` with the final answer once the loop is done: it returns the text the
    caller must still deliver normally, or ``None`` when the stream delivered everything.
    """

    def __init__(
        self,
        reply: Any,
        *,
        chat_id: str,
        thread_id: str | None = None,
        mode: str,
        session_id: str = "",
        emit: Callable[..., Any] | None = None,
        clock: Callable[[], float] = anyio.current_time,
        dialect: str | DialectProfile = "plain",
    ) -> None:
        if mode not in ("draft", "block"):
            raise ValueError(f"a stream runs in 'draft' or 'block' mode, not {mode!r}")
        features = reply.features
        if mode == "draft" and not features.edit:
            raise ValueError("draft streaming needs a reply port that can edit messages")
        self.reply = reply
        self.chat_id = chat_id
        self.thread_id = thread_id
        self.mode = mode
        self.session_id = session_id
        self.clock = clock
        self._profile = _profile(dialect)
        self._emit = emit
        self._can_delete = bool(features.delete)
        self._queue: deque[StreamEvent] = deque()
        self._wake = anyio.Event()
        self._lock = anyio.Lock()
        self._closing = False
        self._broken = False
        self._finished = False
        self._draft = _Draft()
        self._block = _Block()
        self._status = _Status()
        #: Block mode: what the current model call's items sent (the final answer's part).
        self._segment: list[str] = []
        self._sent_any = False

    # ------------------------------------------------------------------ input

    def on_event(self, event: StreamEvent) -> None:
        """Queue one provider event; returns at once (the provider's stream is waiting)."""
        if self._finished:
            return
        self._queue.append(event)
        self._wake.set()

    # ------------------------------------------------------------------ driving

    async def run(self) -> None:
        """Tick whenever an event arrives or a timer falls due, until :meth:`close`."""
        while not self._closing:
            wake = self._wake
            if not self._queue:
                deadline = self.next_deadline()
                at = (
                    math.inf
                    if deadline is None
                    else anyio.current_time() + max(0.0, deadline - self.clock()) + _TIMER_SLACK
                )
                with anyio.CancelScope(deadline=at):
                    await wake.wait()
            self._wake = anyio.Event()
            if self._closing:
                break
            await self.tick()

    def close(self) -> None:
        """Let :meth:`run` return after the tick in progress (no half-done send)."""
        self._closing = True
        self._wake.set()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[StreamController]:
        """Run the driver for the body of the ``async with``.

        An exception from the body comes out as itself, not wrapped in the driver's task
        group, so callers catch a :class:`~fermix_core.provider.ProviderError` as usual.
        """
        error: Exception | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.run)
            try:
                yield self
            except Exception as exc:
                error = exc
            finally:
                self.close()
        if error is not None:
            raise error

    def next_deadline(self) -> float | None:
        """When :meth:`tick` next has timed work to do, on the controller's clock."""
        if self._broken or self._finished:
            return None
        due: list[float] = []
        if self.mode == "draft":
            draft = self._draft
            card = draft.live
            if card is not None and not draft.overflow and self._live_text() != card.shown:
                due.append(card.edited_at + DRAFT_EDIT_INTERVAL)
            status = self._status
            if status.card is not None and not status.off and status.text != status.card.shown:
                due.append(status.card.edited_at + DRAFT_EDIT_INTERVAL)
        elif self._block.pending.strip() and complete_prefix(self._block.pending) is not None:
            due.append(self._block.last_delta + BLOCK_IDLE_FLUSH)
        return min(due) if due else None

    async def tick(self) -> None:
        """Apply queued events, then whatever timed work is due now."""
        async with self._lock:
            if self._broken or self._finished:
                self._queue.clear()
                return
            try:
                while self._queue:
                    await self._apply(self._queue.popleft())
                if self.mode == "draft":
                    await self._draft_timers()
                else:
                    await self._block_idle()
            except Exception as exc:
                self._fail(exc)

    # ------------------------------------------------------------------ events

    async def _apply(self, event: StreamEvent) -> None:
        kind = event.kind
        if kind is StreamEventKind.TEXT_DELTA:
            if self.mode == "draft":
                self._draft.answer += event.text
            else:
                self._block.pending += event.text
                self._block.last_delta = self.clock()
                await self._block_overflow()
        elif kind is StreamEventKind.REASONING_SUMMARY:
            await self._reasoning(event.text)
        elif kind is StreamEventKind.ITEM_DONE:
            if event.item_type == "tool_call":
                await self._segment_end()
            elif event.item_type == "message" and self.mode == "block":
                await self._block_item_done(event.text)

    async def _reasoning(self, summary: str) -> None:
        status = self._status
        if not self._can_delete or status.off or not summary.strip():
            return  # a status that can never be removed would stay in the chat for good
        line = status_line(summary)
        try:
            if self.mode == "block":
                status.lines.append(await self._post(line, silent=True))
                self._telemetry("open", kind="status")
                return
            status.text = line
            if status.card is None:
                status.card = _Card(await self._post(line, silent=True), line, self.clock())
                self._telemetry("open", kind="status")
        except Exception as exc:
            self._status_failed(exc)

    def _status_failed(self, exc: Exception) -> None:
        """A 💭 line is a courtesy: when the platform refuses one, stop sending them, and
        keep streaming the answer."""
        log.warning("no more 💭 status lines on %s: %s: %s", self.chat_id, type(exc).__name__, exc)
        self._status.off = True

    async def _segment_end(self) -> None:
        """The model call ended in a tool call: what it said first is a finished message."""
        if self.mode == "block":
            await self._block_flush_all()
            self._block = _Block()
            self._segment = []
            return
        draft = self._draft
        text = self._live_text().rstrip()
        if draft.overflow:
            # Too long for one card with nothing to cut on: the port sends it its own way.
            await self._discard_live()
            await self._post(text)
        elif draft.live is not None:
            if text and text != draft.live.shown:
                await self._edit(draft.live, text)
            self._telemetry("seal")
        elif text:
            await self._post(text)
            self._telemetry("seal")
        self._draft = _Draft()

    # ------------------------------------------------------------------ draft

    def _live_text(self) -> str:
        draft = self._draft
        return draft.answer[draft.cut :].lstrip()

    async def _draft_timers(self) -> None:
        draft = self._draft
        now = self.clock()
        await self._seal_due()
        text = self._live_text()
        if draft.live is None:
            if len(text.strip()) >= DRAFT_OPEN_CHARS and not draft.overflow:
                draft.live = _Card(await self._post(text), text, now)
                self._telemetry("rotate" if draft.continued else "open")
        elif (
            not draft.overflow
            and text != draft.live.shown
            and now - draft.live.edited_at >= DRAFT_EDIT_INTERVAL
        ):
            await self._edit(draft.live, text)
            self._telemetry("edit")
        status = self._status
        if (
            status.card is not None
            and not status.off
            and status.text != status.card.shown
            and now - status.card.edited_at >= DRAFT_EDIT_INTERVAL
        ):
            try:
                await self._edit(status.card, status.text)
                self._telemetry("edit", kind="status")
            except Exception as exc:
                self._status_failed(exc)

    async def _seal_due(self) -> None:
        draft = self._draft
        while not draft.overflow:
            text = self._live_text()
            if len(text) < draft.checked + RECHECK_CHARS:
                return
            draft.checked = len(text)
            size = await self._measure(text)
            if size <= DRAFT_SEAL_CHARS:
                return
            position = await self._seal_point(text)
            if position is None and size > DRAFT_HARD_CHARS:
                position = await self._hard_cut(text)
                if position is None:
                    draft.overflow = True  # one unbreakable block: delivered whole at the end
                    return
            if position is None:
                return  # wait for a heading or a paragraph
            await self._seal(text[:position].rstrip())
            draft.cut = len(draft.answer) - len(text) + position
            draft.checked = 0

    async def _seal(self, head: str) -> None:
        """Finish the live card as *head* and start a fresh one for the rest."""
        draft = self._draft
        if draft.live is None:
            await self._post(head)
        elif draft.live.shown != head:
            await self._edit(draft.live, head)
        self._telemetry("seal")
        draft.live = None
        draft.continued = True

    async def _draft_finish(self, final: str) -> str | None:
        draft = self._draft
        sealed = draft.answer[: draft.cut]
        position = extension_point(final, sealed)
        if position is None:
            # The answer is not what the sealed cards began: the live card goes, the
            # whole answer is delivered normally.
            await self._discard_live()
            return final
        draft.answer = final
        draft.cut = position
        if not self._sent_any and draft.live is None:
            return final or None  # nothing streamed: an ordinary delivery
        if draft.overflow:
            await self._discard_live()
            rest = self._live_text()
            return rest or None
        while True:
            text = self._live_text()
            size = await self._measure(text)
            if size <= DRAFT_SEAL_CHARS:
                break
            position = await self._seal_point(text)
            if position is None:
                position = await self._hard_cut(text)
            if position is None:
                break
            tail = text[position:].strip()
            if size <= DRAFT_HARD_CHARS and await self._measure(tail) <= DRAFT_MERGE_CHARS:
                break  # a short remainder merges into the live card
            await self._seal(text[:position].rstrip())
            draft.cut += len(draft.answer[draft.cut :]) - len(text) + position
        text = self._live_text().rstrip()
        if await self._measure(text) > DRAFT_HARD_CHARS:
            await self._discard_live()
            return text
        if not text.strip():
            await self._discard_live()
            return None
        if draft.live is None:
            await self._post(text)
            self._telemetry("rotate" if draft.continued else "open")
        elif draft.live.shown != text:
            await self._edit(draft.live, text)
        self._telemetry("seal")
        draft.live = None
        return None

    async def _discard_live(self) -> None:
        draft = self._draft
        card = draft.live
        draft.live = None
        if card is None:
            return
        if self._can_delete:
            await self.reply.delete(self.chat_id, card.message_id)
            self._telemetry("discard")

    # ------------------------------------------------------------------ block

    async def _block_overflow(self, *, force: bool = False) -> None:
        """Send every full message the pending text holds, cut on the ladder."""
        block = self._block
        while block.pending.strip():
            if not force and len(block.pending) < block.checked + RECHECK_CHARS:
                return
            block.checked = len(block.pending)
            position = await self._pure(block_cut, block.pending, self._profile)
            if position is None:
                return  # fits one message still (or is one open code fence): keep it
            await self._block_send(block.pending[:position])
            block.pending = block.pending[position:]
            block.checked = 0

    async def _block_idle(self) -> None:
        block = self._block
        if not block.pending.strip() or self.clock() - block.last_delta < BLOCK_IDLE_FLUSH:
            return
        position = complete_prefix(block.pending)
        if position is None:
            return
        await self._block_send(block.pending[:position])
        block.pending = block.pending[position:]

    async def _block_send(self, text: str) -> None:
        text = text.strip()
        if not text:
            return
        block = self._block
        await self._post(text)
        block.sent += text
        self._telemetry("block")

    async def _block_flush_all(self) -> None:
        await self._block_overflow(force=True)
        block = self._block
        # What is left fits one message, or has nothing to cut on (the port splits it).
        await self._block_send(block.pending)
        block.pending = ""

    async def _block_item_done(self, item: str) -> None:
        """A finished message item: send what of its authoritative text is still unsent."""
        block = self._block
        position = extension_point(item, block.sent) if item else None
        if position is not None:
            block.pending = item[position:]
        await self._block_flush_all()
        self._block = _Block()

    async def _block_finish(self, final: str) -> str | None:
        await self._block_flush_all()
        if not self._sent_any:
            return final or None
        if not final.strip():
            return None
        # The final answer is the last segment's text: compare with what that segment sent.
        segment = self._segment_texts()
        position = extension_point(final, segment)
        if position is None:
            return final
        rest = final[position:]
        if rest.strip():
            self._block.pending = rest
            await self._block_flush_all()
        return None

    def _segment_texts(self) -> str:
        return "\n\n".join(self._segment)

    def _undelivered(self, final: str) -> str | None:
        """What of *final* the stream has not delivered as a finished message."""
        if self.mode == "draft":
            shown = self._draft.answer[: self._draft.cut]
        else:
            shown = self._segment_texts()
        position = extension_point(final, shown)
        rest = final if position is None else final[position:]
        return rest.strip() or None

    # ------------------------------------------------------------------ the end

    async def finish(self, final: str) -> str | None:
        """The loop is done and *final* is the answer: settle the stream.

        Returns the text the caller must still deliver through the reply port, or
        ``None`` when the stream already delivered it. "💭" status messages are deleted.
        """
        async with self._lock:
            self._closing = True
            if not self._broken:
                try:
                    while self._queue:
                        await self._apply(self._queue.popleft())
                    if self.mode == "draft":
                        rest = await self._draft_finish(final)
                    else:
                        rest = await self._block_finish(final)
                except Exception as exc:
                    self._fail(exc)
                else:
                    self._finished = True
                    await self._clear_status()
                    return rest
            self._finished = True
            return await self._broken_rest(final)

    async def abort(self) -> None:
        """The turn was stopped or failed: delete the live card and the status lines.

        Sealed cards and sent blocks are finished messages and stay.
        """
        async with self._lock:
            self._finished = True
            self._closing = True
            self._queue.clear()
            try:
                if self.mode == "draft":
                    await self._discard_live()
            except Exception as exc:
                log.warning("could not delete the live draft: %s: %s", type(exc).__name__, exc)
            await self._clear_status()

    async def _broken_rest(self, final: str) -> str | None:
        """After a platform failure: hand back whatever of *final* was not delivered."""
        try:
            await self._discard_live()
        except Exception:
            log.debug("the live draft could not be removed either", exc_info=True)
        await self._clear_status()
        return self._undelivered(final)

    async def _clear_status(self) -> None:
        status = self._status
        ids = [status.card.message_id] if status.card is not None else []
        ids += status.lines
        status.card, status.lines = None, []
        for message_id in ids:
            try:
                await self.reply.delete(self.chat_id, message_id)
                self._telemetry("discard", kind="status")
            except Exception as exc:
                log.warning("could not delete a 💭 status message: %s: %s", type(exc).__name__, exc)

    # ------------------------------------------------------------------ presentation

    async def _pure(self, fn: Callable[..., Any], text: str, *args: Any, **kwargs: Any) -> Any:
        """Run a presentation function on *text* (it renders: milliseconds per kilobyte) off
        the loop — or inline for text of at most :data:`INLINE_CHARS`, whose render costs
        less than the hop to a worker thread (a short reply that arrived whole)."""
        if len(text) <= INLINE_CHARS:
            return fn(text, *args, **kwargs)
        return await anyio.to_thread.run_sync(functools.partial(fn, text, *args, **kwargs))

    async def _measure(self, text: str) -> int:
        return await self._pure(rendered_length, text, self._profile)

    async def _seal_point(self, text: str) -> int | None:
        return await self._pure(
            seal_point,
            text,
            self._profile,
            DRAFT_HARD_CHARS,
            min_rendered=DRAFT_SEAL_CHARS // 2,
        )

    async def _hard_cut(self, text: str) -> int | None:
        """No heading or paragraph to seal on: the rest of the ladder, within the hard cap."""
        return await self._pure(
            block_cut,
            text,
            self._profile,
            min_rendered=DRAFT_SEAL_CHARS // 2,
            max_rendered=DRAFT_HARD_CHARS,
        )

    # ------------------------------------------------------------------ port calls

    async def _post(self, text: str, *, silent: bool | None = None) -> str:
        quiet = self._sent_any if silent is None else silent
        sent = await self.reply.send(
            OutboundMessage(chat_id=self.chat_id, thread_id=self.thread_id, text=text, silent=quiet)
        )
        if silent is None:
            self._sent_any = True
            self._segment.append(text)
        return sent.message_id

    async def _edit(self, card: _Card, text: str) -> None:
        await self.reply.edit(self.chat_id, card.message_id, text)
        card.shown = text
        card.edited_at = self.clock()

    def _fail(self, exc: Exception) -> None:
        log.warning(
            "streaming to %s stopped after a platform error (%s: %s); the reply is delivered "
            "normally instead",
            self.chat_id,
            type(exc).__name__,
            exc,
        )
        self._broken = True
        self._queue.clear()

    def _telemetry(self, phase: str, **data: Any) -> None:
        if self._emit is None:
            return
        try:
            self._emit(
                "channel.stream", phase=phase, mode=self.mode, session_id=self.session_id, **data
            )
        except Exception:
            log.debug("channel.stream telemetry failed", exc_info=True)
