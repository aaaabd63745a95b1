"""The records and protocols the gateway, the queue and the turn runner share.

They live apart from the implementations so the turn runner, the daemon and the command
handlers can name them without pulling in each other's code.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol, runtime_checkable

from fermix_core.channel import ConversationKey, InboundMessage, OutboundMessage, SentMessage
from fermix_core.tool import Trust

__all__ = [
    "ChannelFeatures",
    "CommandServices",
    "IngestOutcome",
    "IngestStatus",
    "ReplyPort",
    "StopReport",
    "TurnDone",
    "TurnExecutor",
    "TurnJob",
]


@dataclass(frozen=True)
class ChannelFeatures:
    """What the surface a message came from can do, decided once per reply port.

    ``reactions`` is ``None`` when the channel cannot react, an empty tuple when it accepts
    any single emoji, and the allowed set otherwise (Telegram, Slack). ``slash_commands``
    is off for surfaces where a leading ``/`` is ordinary text (ACP).

    ``streaming`` is the channel's live-streaming mode: ``"off"``, ``"draft"`` (one message
    edited in place) or ``"block"`` (each finished output item its own message). A
    ``"draft"`` on a surface that cannot draft (``draft`` false) is kept as configured but
    streams nothing; :attr:`stream_mode` is the mode a turn actually runs.
    """

    local: bool = False
    reactions: tuple[str, ...] | None = None
    draft: bool = False
    edit: bool = False
    delete: bool = False
    slash_commands: bool = True
    streaming: str = "off"

    @property
    def stream_mode(self) -> str:
        """The streaming a turn on this surface runs: ``"draft"``, ``"block"`` or ``"off"``."""
        if self.streaming == "draft":
            return "draft" if self.draft and self.edit else "off"
        return self.streaming if self.streaming == "block" else "off"


@runtime_checkable
class ReplyPort(Protocol):
    """The way back to the chat a message came from."""

    features: ChannelFeatures

    async def send(self, message: OutboundMessage) -> SentMessage: ...

    # Optional, guarded by ``features``: ports whose channel supports reactions offer
    # ``async def react(chat_id: str, message_id: str, emoji: str) -> None``; ports that
    # can edit or delete offer ``async def edit(chat_id, message_id, text) -> None`` and
    # ``async def delete(chat_id, message_id) -> None`` (streaming uses them).


class TurnDone:
    """A job's "finished" flag: ``anyio.Event``'s interface (``set``, ``is_set``, ``wait``).

    The runtime runs on asyncio; this skips the async-library lookup every ``anyio.Event()``
    makes when it is created (one per turn). ``wait`` behaves as anyio's does on asyncio: it
    yields to the loop once even when already set, and cancel scopes cancel it.
    """

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def set(self) -> None:
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    async def wait(self) -> None:
        if self._event.is_set():
            await asyncio.sleep(0)
        else:
            await self._event.wait()


@dataclass(eq=False)
class TurnJob:
    """One unit of work for the queue: an authorized message and where its reply goes.

    Identity, not value, is equality: two identical texts sent twice are two turns. The
    queue sets ``started`` when the executor receives the job (so ``on_stopped`` knows
    whether the turn had persisted its user message), ``stopped`` when ``/stop`` or
    shutdown ended it, ``error`` when the executor raised, and ``done`` in every case, so
    a waiter never hangs.
    """

    message: InboundMessage
    trust: Trust
    reply: ReplyPort
    run_profile: str = "normal"
    cwd: Path | None = None
    background: bool = False
    done: TurnDone = field(default_factory=TurnDone)
    result: object | None = None
    started: bool = False
    stopped: bool = False
    error: BaseException | None = None

    @property
    def key(self) -> ConversationKey:
        return self.message.conversation_key


class TurnExecutor(Protocol):
    """Runs turns for the queue; the turn runner implements it."""

    async def run_turn(self, job: TurnJob) -> None:
        """Run one turn to completion, delivering through ``job.reply``.

        Runs inside a cancel scope: ``/stop`` cancels it, and a cancelled turn must
        neither deliver nor commit.
        """

    async def on_stopped(self, job: TurnJob) -> None:
        """A queued or active job was stopped; ``job.started`` says which.

        Called once per stopped job, the active one first and only after its ``run_turn``
        has unwound, so a history marker written here cannot race the cancelled turn's own
        cleanup. A job that never started has persisted nothing and needs no marker.
        """


@dataclass(frozen=True)
class StopReport:
    """What ``/stop`` ended in one conversation."""

    cancelled: bool
    cleared: int
    background: int = 0

    @property
    def anything(self) -> bool:
        return self.cancelled or self.cleared > 0 or self.background > 0


class CommandServices(Protocol):
    """What slash-command handlers may ask of the runtime (the lead's runtime implements it)."""

    async def clear_conversation(self, key: ConversationKey) -> None: ...

    async def compact_conversation(self, key: ConversationKey) -> str: ...

    async def start_background(self, job: TurnJob) -> str | None:
        """Start *job* detached; ``None`` when the daemon-wide cap of 8 is full."""

    def background_tasks(self, key: ConversationKey) -> list[dict]:
        """Running and recent background work of *key*.

        Each dict may carry ``id``, ``status``, ``prompt``, ``started_at`` and
        ``finished_at``; ``/tasks`` shows what is present.
        """

    async def stop_conversation(self, key: ConversationKey) -> StopReport: ...

    async def submit_turn(self, job: TurnJob) -> None: ...


class IngestStatus(StrEnum):
    """How the gateway disposed of one inbound message."""

    #: The sender is not authorized on this channel; nothing was sent back.
    DROPPED = "dropped"
    #: No text and no media; answered with the "looks empty" note.
    EMPTY = "empty"
    #: Media that could not be prepared (audio that could not be transcribed); the sender
    #: was told why.
    MEDIA_REFUSED = "media_refused"
    #: A slash command ran (or was refused) before the agent.
    COMMAND = "command"
    #: The agent was restarting; the sender was asked to try again.
    UNAVAILABLE = "unavailable"
    #: A turn was queued.
    QUEUED = "queued"


@dataclass(frozen=True)
class IngestOutcome:
    """The gateway's answer to ``ingest``: what happened, and the queued job if any.

    Callers that must wait for the reply (``fermix ask`` through the gateway) await
    ``job.done``. ``command`` is the canonical command name when a command ran or was
    refused; ``trust`` is set for every authorized sender.
    """

    status: IngestStatus
    job: TurnJob | None = None
    command: str | None = None
    trust: Trust | None = None
