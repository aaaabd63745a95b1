"""The single inbound entry point: every channel message goes through :meth:`Gateway.ingest`.

The seven steps run in a fixed order, and the order is the point:

1. normalize — adapters already hand over an :class:`InboundMessage`; it is checked here;
2. authorize — owner → operator, allowlisted → guest, anyone else is dropped without a
   reply and *before* any media work, so a stranger cannot make Fermix download or
   transcribe anything (``channel.message`` is emitted only past this point);
3. media — audio is transcribed (:mod:`fermix_core.transcription.inbound`) into the turn
   text, and a transcription that cannot be done answers the sender and schedules no turn;
   images are capped, checked and stored as files by
   :class:`fermix_core.media.images.ImageIntake` (a refused image is answered, no turn);
4. reply port — the caller's port, whose features decide e.g. whether ``/`` is a command;
5. slash commands — pre-agent, role-gated; an unknown ``/word`` is ordinary text;
6. queue — one FIFO turn per conversation (``ConversationQueue.submit`` returns at once,
   so a slow turn never blocks the adapter's receive loop, and ``/stop`` never waits
   behind the turn it stops);
7. deliver — the queue's worker runs the executor; while the agent is restarting the
   sender gets "restart in progress" instead.

An empty message (no text, no attachments) gets a short note right after authorization and
never reaches the queue.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from fermix_core.channel import InboundMessage
from fermix_core.commands.router import CommandRouter
from fermix_core.gateway.queue import ConversationQueue, QueueClosedError
from fermix_core.gateway.reply import try_reply_text
from fermix_core.gateway.trust import LazyPolicies, TrustPolicy
from fermix_core.gateway.types import (
    CommandServices,
    IngestOutcome,
    IngestStatus,
    ReplyPort,
    TurnJob,
)
from fermix_core.tool import Trust
from fermix_core.transcription.inbound import (
    NOT_CONFIGURED_REPLY,
    needs_transcription,
    transcribe_inbound,
)

__all__ = [
    "AGENT_UNAVAILABLE_REPLY",
    "EMPTY_MESSAGE_REPLY",
    "VOICE_NEEDS_TRANSCRIPTION_REPLY",
    "Gateway",
    "needs_transcription",
]

log = logging.getLogger("fermix.gateway")

EMPTY_MESSAGE_REPLY = "That message looks empty — send some text or a file."
AGENT_UNAVAILABLE_REPLY = "Restart in progress — try again in a moment."
VOICE_NEEDS_TRANSCRIPTION_REPLY = NOT_CONFIGURED_REPLY


class Gateway:
    """Authorizes, filters and routes inbound messages; one per runtime, shared by channels."""

    def __init__(
        self,
        *,
        policies: Mapping[str, TrustPolicy],
        commands: CommandRouter,
        queue: ConversationQueue,
        services: CommandServices,
        emit: Callable[..., object],
        agent_available: Callable[[], bool] = lambda: True,
        transcriber: Any = None,
        images: Any = None,
    ) -> None:
        # A LazyPolicies builds each channel's policy on first use; anything else is copied.
        self.policies = policies if isinstance(policies, LazyPolicies) else dict(policies)
        self.commands = commands
        self.queue = queue
        self.services = services
        self._emit_fn = emit
        self._agent_available = agent_available
        #: Speech-to-text (:class:`fermix_core.transcription.engine.Transcriber`); ``None``
        #: answers every voice note with "run `fermix setup`".
        self.transcriber = transcriber
        #: The image step: an :class:`~fermix_core.media.images.ImageIntake` or a zero-argument
        #: factory for one (built on the first attachment, so a text-only process never
        #: imports it); ``None`` passes images through untouched (bare unit-test gateways).
        self.images = images

    def policy_for(self, channel: str) -> TrustPolicy | None:
        return self.policies.get(channel)

    async def ingest(
        self, message: InboundMessage, reply: ReplyPort, *, cwd: Path | None = None
    ) -> IngestOutcome:
        """Run *message* through the pipeline; returns how it was disposed of.

        Returns as soon as the message is answered, dropped or queued — never after the
        turn — so adapters can call it from their receive loop. ``cwd`` is honoured only
        for local operator callers: the sandbox admits a request directory for them alone.
        """
        # 1. normalize (and refuse caller bugs before any sender-visible work)
        if not isinstance(message, InboundMessage):
            raise TypeError(
                f"Gateway.ingest takes an InboundMessage, not {type(message).__name__}; "
                "the channel adapter must normalize platform input first"
            )
        features = getattr(reply, "features", None)
        if features is None or not callable(getattr(reply, "send", None)):
            raise TypeError(
                "Gateway.ingest needs a reply port with `features` and an async `send`; "
                f"got {type(reply).__name__}"
            )

        # 2. authorize — before anything else is done on the sender's behalf
        policy = self.policies.get(message.channel)
        trust = policy.authorize(message.sender_id) if policy is not None else None
        if trust is None:
            if policy is None:
                log.warning(
                    "dropped a message on channel %r: no trust policy is configured for it",
                    message.channel,
                )
            else:
                log.debug(
                    "dropped a message from unauthorized sender %s on %s",
                    message.sender_id,
                    message.channel,
                )
            return IngestOutcome(IngestStatus.DROPPED)
        self._emit(
            "channel.message",
            channel=message.channel,
            direction="inbound",
            trust=str(trust),
            attachments=len(message.attachments),
            is_group=message.is_group,
        )

        if message.is_empty:
            await try_reply_text(reply, message, EMPTY_MESSAGE_REPLY)
            return IngestOutcome(IngestStatus.EMPTY, trust=trust)

        # 3. media
        if message.attachments and any(needs_transcription(a) for a in message.attachments):
            transcribed = await transcribe_inbound(
                self.transcriber, message, reply, emit=self._emit
            )
            if transcribed is None:
                return IngestOutcome(IngestStatus.MEDIA_REFUSED, trust=trust)
            message = transcribed
        if message.attachments and self.images is not None:
            if not callable(getattr(self.images, "admit", None)):
                self.images = self.images()
            admitted = await self.images.admit(message, reply)
            if isinstance(admitted, str):
                await try_reply_text(reply, message, admitted)
                return IngestOutcome(IngestStatus.MEDIA_REFUSED, trust=trust)
            message = admitted

        # 4. reply port: its features decide what the rest of the pipeline may do
        turn_cwd = cwd if (policy.local and trust is Trust.OPERATOR) else None

        # 5. slash commands
        if getattr(features, "slash_commands", True):
            parsed = self.commands.parse(message.text)
            if parsed is not None:
                await self.commands.dispatch(
                    parsed,
                    message=message,
                    trust=trust,
                    reply=reply,
                    services=self.services,
                    policy=policy,
                    emit=self._emit,
                    cwd=turn_cwd,
                )
                return IngestOutcome(IngestStatus.COMMAND, command=parsed.name, trust=trust)

        # 6. queue, 7. deliver
        if not self._available():
            return await self._unavailable(message, reply, trust)
        job = TurnJob(message=message, trust=trust, reply=reply, cwd=turn_cwd)
        try:
            await self.queue.submit(job)
        except QueueClosedError:
            return await self._unavailable(message, reply, trust)
        return IngestOutcome(IngestStatus.QUEUED, job=job, trust=trust)

    # ------------------------------------------------------------------ helpers

    def _available(self) -> bool:
        try:
            return bool(self._agent_available())
        except Exception:
            log.exception("agent availability check failed; treating the agent as unavailable")
            return False

    async def _unavailable(
        self, message: InboundMessage, reply: ReplyPort, trust: Trust
    ) -> IngestOutcome:
        self._emit("dispatcher.agent_unavailable", channel=message.channel)
        await try_reply_text(reply, message, AGENT_UNAVAILABLE_REPLY)
        return IngestOutcome(IngestStatus.UNAVAILABLE, trust=trust)

    def _emit(self, name: str, **data: Any) -> None:
        """Telemetry is best-effort: an observer's failure never fails an inbound message."""
        try:
            self._emit_fn(name, **data)
        except Exception:
            log.exception("telemetry emit of %s failed", name)
