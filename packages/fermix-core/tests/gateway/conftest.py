"""Fakes for gateway and queue tests: an executor steered by anyio events, command
services over the real queue, and a recording telemetry sink.

The executor never sleeps: a test decides when a turn may finish by setting its gate,
and waits for "turn X has started" on an event, so every ordering claim is causal.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from fermix_core.channel import ConversationKey, InboundMessage, OutboundMessage
from fermix_core.commands.plugin import fermix_commands
from fermix_core.commands.router import CommandRouter
from fermix_core.gateway.gateway import Gateway
from fermix_core.gateway.queue import ConversationQueue
from fermix_core.gateway.reply import ChannelReplyPort, features_of
from fermix_core.gateway.trust import TrustPolicy
from fermix_core.gateway.types import StopReport, TurnJob
from fermix_core.testing import MemoryChannel, StubChannelHost


class GatedExecutor:
    """A TurnExecutor whose turns wait on per-text gates and reply ``re: <text>``."""

    def __init__(self) -> None:
        self.started: list[TurnJob] = []
        self.finished: list[TurnJob] = []
        self.stopped: list[TurnJob] = []
        self.cancelled: list[TurnJob] = []
        self._gates: dict[str, anyio.Event] = {}
        self._started_events: dict[str, anyio.Event] = {}
        self.fail_on: set[str] = set()
        #: Extra awaitable a turn runs after starting (e.g. wait for another turn).
        self.during: dict[str, Any] = {}

    def gate(self, text: str) -> anyio.Event:
        """Hold every turn whose text is *text* until the returned event is set."""
        return self._gates.setdefault(text, anyio.Event())

    def _started(self, text: str) -> anyio.Event:
        return self._started_events.setdefault(text, anyio.Event())

    async def wait_started(self, text: str) -> None:
        await self._started(text).wait()

    def started_texts(self) -> list[str]:
        return [job.message.text for job in self.started]

    def finished_texts(self) -> list[str]:
        return [job.message.text for job in self.finished]

    async def run_turn(self, job: TurnJob) -> None:
        text = job.message.text
        self.started.append(job)
        self._started(text).set()
        try:
            if text in self.during:
                await self.during[text]()
            gate = self._gates.get(text)
            if gate is not None:
                await gate.wait()
        except anyio.get_cancelled_exc_class():
            self.cancelled.append(job)
            raise
        if text in self.fail_on:
            raise RuntimeError(f"turn {text!r} blew up")
        await job.reply.send(
            OutboundMessage(
                chat_id=job.message.chat_id, thread_id=job.message.thread_id, text=f"re: {text}"
            )
        )
        job.result = f"re: {text}"
        self.finished.append(job)

    async def on_stopped(self, job: TurnJob) -> None:
        self.stopped.append(job)


@dataclass
class FakeServices:
    """CommandServices over a real queue; the rest records what handlers asked for."""

    queue: ConversationQueue
    cleared: list[ConversationKey] = field(default_factory=list)
    compacted: list[ConversationKey] = field(default_factory=list)
    background_jobs: list[TurnJob] = field(default_factory=list)
    background_full: bool = False
    tasks: list[dict] = field(default_factory=list)

    async def clear_conversation(self, key: ConversationKey) -> None:
        self.cleared.append(key)

    async def compact_conversation(self, key: ConversationKey) -> str:
        self.compacted.append(key)
        return "Compacted 12 messages into a summary."

    async def start_background(self, job: TurnJob) -> str | None:
        if self.background_full:
            return None
        self.background_jobs.append(job)
        await self.queue.submit(job)
        return f"bg{len(self.background_jobs)}"

    def background_tasks(self, key: ConversationKey) -> list[dict]:
        return list(self.tasks)

    async def stop_conversation(self, key: ConversationKey) -> StopReport:
        return await self.queue.stop(key)

    async def submit_turn(self, job: TurnJob) -> None:
        await self.queue.submit(job)


class Events:
    """A telemetry sink: ``emit(name, **data)`` recorded in order."""

    def __init__(self) -> None:
        self.items: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, name: str, **data: Any) -> None:
        self.items.append((name, data))

    def named(self, name: str) -> list[dict[str, Any]]:
        return [data for n, data in self.items if n == name]

    def names(self) -> list[str]:
        return [n for n, _ in self.items]


@dataclass
class Rig:
    """A gateway wired to a real queue, a MemoryChannel reply port and the fakes."""

    gateway: Gateway
    queue: ConversationQueue
    executor: GatedExecutor
    services: FakeServices
    events: Events
    channel: MemoryChannel
    port: ChannelReplyPort
    available: list[bool]

    def message(
        self,
        text: str = "hi",
        *,
        sender: str = "owner",
        chat: str = "chat",
        thread: str | None = None,
        channel: str | None = None,
        **extra: Any,
    ) -> InboundMessage:
        return InboundMessage(
            channel=channel or self.channel.name,
            chat_id=chat,
            thread_id=thread,
            sender_id=sender,
            text=text,
            message_id=f"in-{len(self.channel.inbound) + len(self.channel.sent)}",
            **extra,
        )

    async def ingest(self, text: str = "hi", **kw: Any):
        return await self.gateway.ingest(self.message(text, **kw), self.port)


def make_router() -> CommandRouter:
    return CommandRouter(fermix_commands())


@pytest.fixture
def executor() -> GatedExecutor:
    return GatedExecutor()


@pytest.fixture
def events() -> Events:
    return Events()


@pytest.fixture
def default_policies() -> dict[str, TrustPolicy]:
    return {
        "tg": TrustPolicy(
            owner_id="owner",
            allowed_ids=("guest", "helper"),
            command_allowlist=("helper",),
            channel="tg",
        ),
        "cli": TrustPolicy.local_surface("cli"),
    }


@pytest.fixture
async def rig(
    executor: GatedExecutor, events: Events, default_policies: dict[str, TrustPolicy]
) -> AsyncIterator[Rig]:
    channel = MemoryChannel("tg")

    await channel.start(StubChannelHost("tg"))  # tests ingest directly
    port = ChannelReplyPort(channel, features_of(channel))
    available = [True]
    async with ConversationQueue(executor) as queue:
        services = FakeServices(queue)
        gateway = Gateway(
            policies=default_policies,
            commands=make_router(),
            queue=queue,
            services=services,
            emit=events,
            agent_available=lambda: available[0],
        )
        yield Rig(gateway, queue, executor, services, events, channel, port, available)
        # Release anything a test left gated so shutdown is prompt.
        for gate in executor._gates.values():
            gate.set()
