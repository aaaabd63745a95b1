"""Streaming is not Codex-only: each wire, over a real loopback SSE server, into a chat.

A real runtime (installed plugins, real provider adapters and routing) is pointed at a
loopback server speaking the Chat Completions (OpenRouter), Anthropic Messages and OpenAI
Responses streams. A channel turn asks for a stream, the adapter reports its deltas and
reasoning summaries, and the MemoryChannel ends up showing exactly the answer — the 💭
status line having come and gone.
"""

from __future__ import annotations

import anyio
import pytest
from fermix_core.api import Fermix
from fermix_core.channel import InboundMessage
from fermix_core.gateway.reply import ChannelReplyPort, features_of
from fermix_core.hookspecs import hookimpl
from fermix_core.testing import MemoryChannel, StubChannelHost
from fermix_core.testing.loopback import LoopbackServer, Reply

pytestmark = pytest.mark.anyio

ANSWER = "Streaming reaches every wire. Each piece arrives as the model writes it."
PIECES = [ANSWER[i : i + 12] for i in range(0, len(ANSWER), 12)]


def chat_completions_stream() -> list:
    def chunk(delta=None, finish=None):
        return {
            "id": "gen-1",
            "object": "chat.completion.chunk",
            "model": "openai/gpt-5",
            "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}],
        }

    detail = {"type": "reasoning.summary", "format": "openai-responses-v1", "index": 0}
    return [
        chunk({"role": "assistant", "content": ""}),
        chunk({"reasoning_details": [{**detail, "summary": "**Checking"}]}),
        chunk({"reasoning_details": [{**detail, "summary": " the wires**"}]}),
        *(chunk({"content": piece}) for piece in PIECES),
        chunk(finish="stop"),
        "[DONE]",
    ]


def anthropic_stream() -> list:
    def block(index, start, deltas):
        return [
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            ),
            *(
                ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
                for d in deltas
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]

    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 5, "output_tokens": 1},
    }
    return [
        ("message_start", {"type": "message_start", "message": message}),
        *block(
            0,
            {"type": "thinking", "thinking": "", "signature": ""},
            [
                {"type": "thinking_delta", "thinking": "**Checking the wires**\n\nLooking."},
                {"type": "signature_delta", "signature": "sig"},
            ],
        ),
        *block(
            1,
            {"type": "text", "text": ""},
            [{"type": "text_delta", "text": piece} for piece in PIECES],
        ),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 20},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]


def responses_stream() -> list:
    reasoning = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "**Checking the wires**"}],
    }
    message = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "content": [{"type": "output_text", "text": ANSWER}],
    }
    return [
        {"type": "response.created", "response": {"id": "resp_1"}},
        {"type": "response.output_item.done", "output_index": 0, "item": reasoning},
        *(
            {"type": "response.output_text.delta", "item_id": "msg_1", "delta": piece}
            for piece in PIECES
        ),
        {"type": "response.output_item.done", "output_index": 1, "item": message},
        {
            "type": "response.completed",
            "response": {
                "id": "resp_1",
                "status": "completed",
                "model": "gpt-5.5",
                "output": [reasoning, message],
                "usage": {"input_tokens": 5, "output_tokens": 20},
            },
        },
    ]


WIRES = {
    "openrouter": ("/chat/completions", chat_completions_stream),
    "anthropic": ("/messages", anthropic_stream),
    "openai": ("/responses", responses_stream),
}


class Observer:
    def __init__(self) -> None:
        self.phases: list[tuple[str, str | None]] = []

    @hookimpl
    def fermix_event(self, event):
        if event.name == "channel.stream":
            self.phases.append((event.data["phase"], event.data.get("kind")))


async def run_turn(fx, streaming: str) -> MemoryChannel:
    channel = MemoryChannel("telegram")
    await channel.start(StubChannelHost(channel.name))
    port = ChannelReplyPort(channel, features_of(channel, streaming=streaming))
    message = InboundMessage(channel="telegram", chat_id="chat", sender_id="1", text="stream?")
    outcome = await fx.service.gateway.ingest(message, port)
    with anyio.fail_after(20):
        await outcome.job.done.wait()
    return channel


@pytest.mark.parametrize("provider", sorted(WIRES))
async def test_each_wire_streams_into_the_chat(fermix_home, provider) -> None:
    path, stream = WIRES[provider]
    observer = Observer()
    async with LoopbackServer() as server:
        server.queue(Reply(sse=stream()), Reply(sse=stream()))
        config = {
            "fermix_core": {
                "providers": {
                    provider: {"primary": True, "api_key": "sk-loopback", "base_url": server.url}
                },
                "memory": {"review_enabled": False},
            },
            "fermix_channels": {"telegram": {"owner_user_id": "1"}},
        }
        async with Fermix.open(
            fermix_home, config=config, plugins=[("test.observer", observer)]
        ) as fx:
            channels = [await run_turn(fx, mode) for mode in ("draft", "block")]
    for request in server.requests:
        assert request.path == path
        assert request.json()["stream"] is True
    assert len(server.requests) == 2
    for channel in channels:
        assert channel.visible("chat") == [ANSWER]
        status = channel.sent[0]
        assert status.text == "💭 Checking the wires" and status.silent
    assert observer.phases.count(("open", "status")) == 2
    assert observer.phases.count(("discard", "status")) == 2
