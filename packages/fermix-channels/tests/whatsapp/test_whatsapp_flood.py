"""A flood: 1,000 signed deliveries for 50 chats, concurrently, with Meta's redeliveries.

Through the real pieces — the WhatsApp adapter built by the channel runtime, the durable
seen-ids record in a real memory.db, the real gateway and conversation queue, the outbound
port, the loopback Graph API — with a turn executor that answers at once. Every delivery is
answered 200, each chat's turns run in the order its messages were sent, nothing is lost
and nothing runs twice.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import httpx
import pytest
from fermix_channels.whatsapp.plugin import SPEC
from fermix_core.channel import OutboundMessage, WebhookRequest
from fermix_core.channels.idempotency import SeenIds
from fermix_core.channels.runtime import ChannelRuntime
from fermix_core.commands.router import CommandRouter
from fermix_core.gateway.gateway import Gateway
from fermix_core.gateway.queue import ConversationQueue
from fermix_core.gateway.trust import TrustPolicy
from fermix_core.home import FermixHome

pytestmark = pytest.mark.anyio

fg = sys.modules["fermix_channels_tests_fake_graph"]

CHATS = 50
PER_CHAT = 20
SENDERS = [f"1666{i:07d}" for i in range(CHATS)]


class Sections:
    def __init__(self, section: Any) -> None:
        self.value = section

    def section(self, path: str) -> Any:
        return self.value if path == "fermix_channels.whatsapp" else None


class Echo:
    """A TurnExecutor that answers each turn at once, recording the order turns ran."""

    def __init__(self) -> None:
        self.ran: dict[str, list[str]] = {s: [] for s in SENDERS}

    async def run_turn(self, job: Any) -> None:
        message = job.message
        self.ran[message.chat_id].append(message.text)
        await job.reply.send(OutboundMessage(chat_id=message.chat_id, text=f"re: {message.text}"))

    async def on_stopped(self, job: Any) -> None:
        return None


@pytest.mark.slow
async def test_a_flood_keeps_order_loses_nothing_and_runs_nothing_twice(graph, tmp_path) -> None:
    config = fg.whatsapp_config(graph, owner_user_id=SENDERS[0], allowed_sender_ids=SENDERS[1:])
    executor = Echo()
    statuses: dict[int, int] = {}
    async with (
        await SeenIds.open(tmp_path / "memory.db") as seen,
        ConversationQueue(executor) as queue,
    ):
        gateway = Gateway(
            policies={"whatsapp": TrustPolicy.from_section(config, channel="whatsapp")},
            commands=CommandRouter(),
            queue=queue,
            services=None,  # type: ignore[arg-type]
            emit=lambda *a, **k: None,
        )
        async with httpx.AsyncClient() as http:
            runtime = ChannelRuntime(
                [SPEC],
                config=Sections(config),
                gateway=gateway,
                home=FermixHome(tmp_path),
                http=http,
                seen_ids=seen,
            )
            async with runtime.running():
                await runtime.wait_for("whatsapp", "ready")
                ((_, route),) = runtime.webhook_routes()

                async def chat(index: int, sender: str) -> None:
                    for n in range(PER_CHAT):
                        mid = f"wamid.F{index}.{n}"
                        body = fg.delivery(fg.value([fg.text_message(sender, f"m{n}", mid)]))
                        request = WebhookRequest(
                            "POST", route.path, {}, fg.signed_headers(body), body
                        )
                        for _ in range(2 if n % 4 == 0 else 1):  # a redelivery now and then
                            answer = await route.handler(request)
                            statuses[answer.status] = statuses.get(answer.status, 0) + 1

                async with anyio.create_task_group() as tg:
                    for index, sender in enumerate(SENDERS):
                        tg.start_soon(chat, index, sender)
                with anyio.fail_after(60):
                    await queue.join()
                    while graph.text_total < CHATS * PER_CHAT:
                        await graph.changed.wait()
    expected = [f"m{n}" for n in range(PER_CHAT)]
    assert statuses == {200: CHATS * PER_CHAT + CHATS * PER_CHAT // 4}
    assert all(executor.ran[s] == expected for s in SENDERS)
    assert all(graph.texts(s) == [f"re: {t}" for t in expected] for s in SENDERS)
    assert graph.text_total == CHATS * PER_CHAT
