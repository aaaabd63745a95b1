"""Fakes for command tests: a recording reply port and recording command services."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from fermix_core.channel import ConversationKey, InboundMessage, OutboundMessage, SentMessage
from fermix_core.commands.plugin import fermix_commands
from fermix_core.commands.router import CommandRouter
from fermix_core.gateway.trust import TrustPolicy
from fermix_core.gateway.types import ChannelFeatures, StopReport, TurnJob


class RecordingPort:
    features = ChannelFeatures()

    def __init__(self) -> None:
        self.sent: list[OutboundMessage] = []

    async def send(self, message: OutboundMessage) -> SentMessage:
        self.sent.append(message)
        return SentMessage(message_id=f"s{len(self.sent)}")

    @property
    def texts(self) -> list[str]:
        return [m.text for m in self.sent]


@dataclass
class RecordingServices:
    stop_report: StopReport = field(default_factory=lambda: StopReport(False, 0))
    background_result: str | None = "t1"
    tasks: list[dict] = field(default_factory=list)
    compact_text: str = "Compacted 10 messages."
    calls: list[tuple[str, Any]] = field(default_factory=list)

    async def clear_conversation(self, key: ConversationKey) -> None:
        self.calls.append(("clear", key))

    async def compact_conversation(self, key: ConversationKey) -> str:
        self.calls.append(("compact", key))
        return self.compact_text

    async def start_background(self, job: TurnJob) -> str | None:
        self.calls.append(("background", job))
        return self.background_result

    def background_tasks(self, key: ConversationKey) -> list[dict]:
        self.calls.append(("tasks", key))
        return self.tasks

    async def stop_conversation(self, key: ConversationKey) -> StopReport:
        self.calls.append(("stop", key))
        return self.stop_report

    async def submit_turn(self, job: TurnJob) -> None:
        self.calls.append(("submit", job))


class Events:
    def __init__(self) -> None:
        self.items: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, name: str, **data: Any) -> None:
        self.items.append((name, data))

    def named(self, name: str) -> list[dict[str, Any]]:
        return [d for n, d in self.items if n == name]


@dataclass
class Runner:
    """Parses and dispatches one text the way the gateway would, for a given sender."""

    router: CommandRouter
    services: RecordingServices
    port: RecordingPort
    events: Events
    policy: TrustPolicy

    def message(self, text: str, sender: str = "owner", **extra: Any) -> InboundMessage:
        return InboundMessage(
            channel=self.policy.channel or "tg",
            chat_id="chat",
            sender_id=sender,
            text=text,
            message_id="in1",
            **extra,
        )

    async def run(self, text: str, sender: str = "owner", **extra: Any):
        message = self.message(text, sender, **extra)
        trust = self.policy.authorize(sender)
        assert trust is not None, f"{sender} is not authorized in this test policy"
        parsed = self.router.parse(text)
        assert parsed is not None, f"{text!r} is not a command"
        return await self.router.dispatch(
            parsed,
            message=message,
            trust=trust,
            reply=self.port,
            services=self.services,
            policy=self.policy,
            emit=self.events,
        )

    @property
    def last(self) -> str:
        return self.port.texts[-1]


@pytest.fixture
def runner() -> Runner:
    policy = TrustPolicy(
        owner_id="owner",
        allowed_ids=("guest", "helper"),
        command_allowlist=("helper",),
        channel="tg",
    )
    return Runner(
        CommandRouter(fermix_commands()), RecordingServices(), RecordingPort(), Events(), policy
    )
