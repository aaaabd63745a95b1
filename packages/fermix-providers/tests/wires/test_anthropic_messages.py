"""The Anthropic Messages wire end to end: what goes out, what comes back, how it fails.

Everything runs against a real loopback HTTP server; request shapes are asserted on the
JSON the server actually received.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest
from fermix_core.messages import ImagePart, Message, ToolCall, ToolDefinition, ToolResult
from fermix_core.provider import ChatRequest, ErrorKind, ProviderError, ProviderSettings
from fermix_core.testing.loopback import LoopbackServer, RecordedRequest, Reply
from fermix_providers.anthropic.adapter import AnthropicProvider
from fermix_providers.anthropic.plugin import SPEC
from fermix_providers.http import Timeouts
from fermix_providers.wires.anthropic_messages import (
    MAX_CACHE_BREAKPOINTS,
    AssistantEcho,
    ToolNames,
    WireOptions,
    build_body,
    error_from_event,
    model_version,
    supports_adaptive_thinking,
    usage_from,
)

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("both_clients")]

MODEL = "claude-sonnet-4-6"
KEY = "sk-ant-api03-wire-test-secret"
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c63000100000500010d0a2db40000000049454e44ae426082"
)
WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
SCREENSHOT = ToolDefinition(name="screenshot", description="Capture the screen.")


class Fast(AnthropicProvider):
    buffered_timeouts = Timeouts(connect=2.0, read=0.5, write=2.0, pool=2.0)
    stream_timeouts = Timeouts(connect=2.0, read=0.5, write=2.0, pool=2.0)


def make(server: LoopbackServer, **settings: Any) -> Fast:
    settings.setdefault("api_key", KEY)
    return Fast(SPEC, ProviderSettings(name="anthropic", base_url=f"{server.url}/v1", **settings))


def message(*content: dict, stop: str = "end_turn", usage: dict | None = None) -> dict:
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": list(content),
        "stop_reason": stop,
        "usage": usage or {"input_tokens": 11, "output_tokens": 4},
    }


def text(*pieces: str) -> tuple[dict, list[dict]]:
    return {"type": "text", "text": ""}, [{"type": "text_delta", "text": p} for p in pieces]


def tool(call_id: str, name: str, *json_parts: str) -> tuple[dict, list[dict]]:
    start = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
    return start, [{"type": "input_json_delta", "partial_json": p} for p in json_parts]


def thinking(words: str, signature: str) -> tuple[dict, list[dict]]:
    return {"type": "thinking", "thinking": "", "signature": ""}, [
        {"type": "thinking_delta", "thinking": words},
        {"type": "signature_delta", "signature": signature},
    ]


def sse(*blocks: tuple[dict, list[dict]], stop: str | None = "end_turn", end: bool = True):
    events: list[Any] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_s1",
                    "type": "message",
                    "role": "assistant",
                    "model": MODEL,
                    "content": [],
                    "stop_reason": None,
                    "usage": {
                        "input_tokens": 5,
                        "cache_read_input_tokens": 40,
                        "cache_creation_input_tokens": 2,
                        "output_tokens": 1,
                    },
                },
            },
        ),
        ("ping", {"type": "ping"}),
    ]
    for index, (start, deltas) in enumerate(blocks):
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        )
        for delta in deltas:
            events.append(
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    if stop is not None:
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 9},
                },
            )
        )
    if end:
        events.append(("message_stop", {"type": "message_stop"}))
    return events


def cache_marks(body: dict) -> list[str]:
    """Where the request put cache_control, as readable paths."""
    found = []
    for i, t in enumerate(body.get("tools", [])):
        if "cache_control" in t:
            found.append(f"tools[{i}]")
    for i, b in enumerate(body.get("system", [])):
        if "cache_control" in b:
            found.append(f"system[{i}]")
    for m, msg in enumerate(body["messages"]):
        for b, block in enumerate(msg["content"]):
            if "cache_control" in block:
                assert block["cache_control"] == {"type": "ephemeral"}
                assert block["type"] not in ("thinking", "redacted_thinking")
                found.append(f"messages[{m}][{b}]")
    return found


async def run(server: LoopbackServer, request: ChatRequest, **settings: Any):
    provider = make(server, **settings)
    try:
        return await provider.chat(request)
    finally:
        await provider.aclose()


# =========================================================================== requests


async def test_buffered_request_shape_and_usage() -> None:
    usage = {
        "input_tokens": 10,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 20,
        "output_tokens": 6,
    }
    async with LoopbackServer() as server:
        server.queue(Reply(body=message({"type": "text", "text": "Hello!"}, usage=usage)))
        turn = await run(
            server, ChatRequest(messages=[Message.system("Be brief."), Message.user("Hi")])
        )
    [sent] = server.requests
    assert sent.path == "/v1/messages"
    assert sent.header("x-api-key") == KEY
    assert sent.header("anthropic-version") == "2023-06-01"
    assert sent.header("authorization") is None
    body = sent.json()
    assert body["model"] == MODEL
    assert body["max_tokens"] == 16384
    assert "stream" not in body
    assert body["system"] == [
        {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}
    ]
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Hi", "cache_control": {"type": "ephemeral"}}],
        }
    ]
    assert turn.content == "Hello!"
    assert turn.model == MODEL
    assert turn.usage.input_tokens == 130
    assert turn.usage.cached_input_tokens == 120
    assert turn.usage.output_tokens == 6
    assert turn.provider_state["message_id"] == "msg_01"


async def test_images_are_base64_or_url_blocks_in_the_user_turn() -> None:
    inline = ImagePart(media_type="image/png", data=PNG)
    linked = ImagePart(media_type="image/jpeg", url="https://example.org/cat.jpg")
    async with LoopbackServer() as server:
        server.queue(Reply(body=message({"type": "text", "text": "A cat."})))
        await run(server, ChatRequest(messages=[Message.user("What is this?", inline, linked)]))
    [turn] = server.requests[0].json()["messages"]
    assert turn["content"][0] == {"type": "text", "text": "What is this?"}
    assert turn["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": inline.base64()},
    }
    assert turn["content"][2]["source"] == {"type": "url", "url": "https://example.org/cat.jpg"}


async def test_tool_result_images_go_inside_the_tool_result_content() -> None:
    shot = ImagePart(media_type="image/png", data=PNG)
    history = [
        Message.user("Take a screenshot."),
        Message.assistant(tool_calls=[ToolCall(id="toolu_1", name="screenshot")]),
        Message.tool(ToolResult(call_id="toolu_1", name="screenshot", content=["Done.", shot])),
        Message.tool(
            ToolResult(call_id="toolu_2", name="screenshot", content="boom", is_error=True)
        ),
    ]
    async with LoopbackServer() as server:
        server.queue(Reply(body=message({"type": "text", "text": "I see a desktop."})))
        await run(server, ChatRequest(messages=history, tools=[SCREENSHOT], initial=False))
    body = server.requests[0].json()
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"][0]["type"] == "tool_use"
    first, second = body["messages"][2]["content"]
    assert first["type"] == "tool_result" and first["tool_use_id"] == "toolu_1"
    assert [b["type"] for b in first["content"]] == ["text", "image"]
    assert first["content"][1]["source"]["data"] == shot.base64()
    assert "is_error" not in first
    assert second["is_error"] is True
    assert second["content"][0]["text"] == "boom"


async def test_images_on_a_text_only_model_fail_loud_without_a_request() -> None:
    async with LoopbackServer() as server:
        provider = make(server)
        request = ChatRequest(
            model="gpt-4o-mini",  # not a Claude id: nothing says it can read images
            messages=[Message.user("look", ImagePart(media_type="image/png", data=PNG))],
        )
        with pytest.raises(ProviderError) as info:
            await provider.chat(request)
        await provider.aclose()
    assert info.value.kind is ErrorKind.UNSUPPORTED_INPUT
    assert server.requests == []


async def test_cache_breakpoints_on_every_request_within_the_limit() -> None:
    histories = [
        [Message.user("Hi")],
        [Message.system("Rules."), Message.user("Hi")],
        [
            Message.system("Rules."),
            Message.system("More rules."),
            Message.user("Weather?"),
            Message.assistant(
                "Checking.",
                tool_calls=[ToolCall(id="toolu_w", name="get_weather", arguments={"city": "Oslo"})],
            ),
            Message.tool(ToolResult(call_id="toolu_w", name="get_weather", content="-3C")),
        ],
    ]
    async with LoopbackServer() as server:
        for _ in histories:
            server.queue(Reply(body=message({"type": "text", "text": "ok"})))
        for history in histories:
            await run(server, ChatRequest(messages=history, tools=[SCREENSHOT, WEATHER]))
    marks = [cache_marks(r.json()) for r in server.requests]
    assert marks[0] == ["tools[1]", "messages[0][0]"]
    assert marks[1] == ["tools[1]", "system[0]", "messages[0][0]"]
    assert marks[2] == ["tools[1]", "system[1]", "messages[1][1]", "messages[2][0]"]
    assert all(len(m) <= MAX_CACHE_BREAKPOINTS for m in marks)


@pytest.mark.parametrize(
    ("model", "effort", "configured", "thinking", "sent_effort"),
    [
        ("claude-sonnet-4-6", "medium", None, True, "medium"),
        ("claude-opus-4-6", "max", None, True, "max"),
        ("claude-sonnet-4-6", "none", None, True, "low"),  # Anthropic's floor is low
        ("claude-sonnet-4-6", None, "xhigh", True, "xhigh"),  # from the provider block
        ("claude-sonnet-4-6", None, None, True, None),  # server default (high)
        ("claude-haiku-4-5", "high", None, False, None),  # older model: nothing sent
        ("claude-3-7-sonnet-20250219", "low", None, False, None),
    ],
)
async def test_adaptive_thinking_and_effort(
    model: str, effort: str | None, configured: str | None, thinking: bool, sent_effort: str | None
) -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(body=message({"type": "text", "text": "ok"})))
        await run(
            server,
            ChatRequest(messages=[Message.user("Think.")], model=model, reasoning_effort=effort),
            reasoning_effort=configured,
        )
    body = server.requests[0].json()
    assert body["model"] == model
    assert ("thinking" in body) is thinking
    if thinking:
        assert body["thinking"] == {"type": "adaptive"}
    if sent_effort is None:
        assert "output_config" not in body
    else:
        assert body["output_config"] == {"effort": sent_effort}


# =========================================================================== streaming


async def test_streamed_text_emits_deltas_that_add_up() -> None:
    events: list = []
    async with LoopbackServer() as server:
        server.queue(Reply(sse=sse(text("Hel", "lo, ", "world."))))
        turn = await run(
            server,
            ChatRequest(messages=[Message.user("Hi")], stream=True, on_event=events.append),
        )
    sent = server.requests[0]
    assert sent.json()["stream"] is True
    assert sent.json()["max_tokens"] == 32768
    assert sent.header("accept") == "text/event-stream"
    deltas = [e.text for e in events if e.kind == "text_delta"]
    assert deltas == ["Hel", "lo, ", "world."]
    assert turn.content == "Hello, world."
    assert [(e.kind, e.item_type, e.text) for e in events if e.kind == "item_done"] == [
        ("item_done", "message", "Hello, world.")
    ]
    assert turn.usage.input_tokens == 47 and turn.usage.cached_input_tokens == 42
    assert turn.usage.output_tokens == 9
    assert turn.provider_state["stop_reason"] == "end_turn"


async def test_streamed_tool_use_then_continuation_echoes_the_thinking_turn() -> None:
    events: list = []
    first = sse(
        thinking("The user wants weather; call the tool.", "sig-abc"),
        text("Let me check."),
        tool("toolu_9", "get_weather", '{"ci', 'ty": "Os', 'lo"}'),
        stop="tool_use",
    )
    async with LoopbackServer() as server:
        server.queue(Reply(sse=first), Reply(sse=sse(text("It is -3C in Oslo."))))
        provider = make(server)
        history = [Message.system("Helpful."), Message.user("Weather in Oslo?")]
        turn = await provider.chat(
            ChatRequest(messages=history, tools=[WEATHER], stream=True, on_event=events.append)
        )
        assert turn.content == "Let me check."
        assert turn.tool_calls == [
            ToolCall(id="toolu_9", name="get_weather", arguments={"city": "Oslo"})
        ]
        result = ToolResult(call_id="toolu_9", name="get_weather", content="-3C")
        history += [turn.to_message(), Message.tool(result)]
        final = await provider.chat(
            ChatRequest(messages=history, tools=[WEATHER], stream=True, initial=False)
        )
        await provider.aclose()
    assert final.content == "It is -3C in Oslo."
    kinds = [(e.kind.value, e.item_type) for e in events if e.kind != "text_delta"]
    assert kinds == [
        ("reasoning_summary", None),
        ("item_done", "reasoning"),
        ("item_done", "message"),
        ("item_done", "tool_call"),
    ]
    body = server.requests[1].json()
    assert body["thinking"] == {"type": "adaptive"}
    assistant = body["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["content"][0] == {
        "type": "thinking",
        "thinking": "The user wants weather; call the tool.",
        "signature": "sig-abc",
    }
    assert assistant["content"][1] == {"type": "text", "text": "Let me check."}
    assert assistant["content"][2]["input"] == {"city": "Oslo"}
    assert body["messages"][2]["content"][0]["type"] == "tool_result"


async def test_continuation_of_an_unknown_tool_turn_drops_thinking() -> None:
    """After a restart mid-loop the thinking blocks are gone; the API needs them or no
    thinking at all, so the request goes without."""
    history = [
        Message.user("Weather?"),
        Message.assistant(tool_calls=[ToolCall(id="toolu_x", name="get_weather", arguments={})]),
        Message.tool(ToolResult(call_id="toolu_x", name="get_weather", content="sunny")),
    ]
    async with LoopbackServer() as server:
        server.queue(Reply(body=message({"type": "text", "text": "Sunny."})))
        await run(
            server,
            ChatRequest(messages=history, tools=[WEATHER], reasoning_effort="high", initial=False),
        )
    body = server.requests[0].json()
    assert "thinking" not in body
    assert body["output_config"] == {"effort": "high"}
    assert body["messages"][1]["content"] == [
        {
            "type": "tool_use",
            "id": "toolu_x",
            "name": "get_weather",
            "input": {},
            "cache_control": {"type": "ephemeral"},
        }
    ]


async def test_text_blocks_split_by_thinking_read_as_paragraphs_in_both_modes() -> None:
    events: list = []
    blocks = (text("First."), thinking("hmm", "s1"), text("Second."))
    async with LoopbackServer() as server:
        server.queue(Reply(sse=sse(*blocks)))
        server.queue(
            Reply(
                body=message(
                    {"type": "text", "text": "First."},
                    {"type": "thinking", "thinking": "hmm", "signature": "s1"},
                    {"type": "text", "text": "Second."},
                )
            )
        )
        streamed = await run(
            server, ChatRequest(messages=[Message.user("Go")], stream=True, on_event=events.append)
        )
        buffered = await run(server, ChatRequest(messages=[Message.user("Go")]))
    assert streamed.content == buffered.content == "First.\n\nSecond."
    assert "".join(e.text for e in events if e.kind == "text_delta") == streamed.content


# =========================================================================== failures


async def test_overloaded_529_quotes_the_server() -> None:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    async with LoopbackServer() as server:
        server.queue(Reply(status=529, body=body, headers={"retry-after": "3"}))
        with pytest.raises(ProviderError) as info:
            await run(server, ChatRequest(messages=[Message.user("Hi")]))
    assert info.value.kind is ErrorKind.OVERLOADED
    assert info.value.message == "Overloaded"
    assert info.value.status == 529
    assert info.value.retry_after_seconds == 3


async def test_rate_limit_reads_retry_after_and_the_anthropic_reset_headers() -> None:
    limited = {"type": "error", "error": {"type": "rate_limit_error", "message": "Slow down."}}
    reset = (datetime.now(UTC) + timedelta(minutes=10)).isoformat().replace("+00:00", "Z")
    async with LoopbackServer() as server:
        server.queue(
            Reply(status=429, body=limited, headers={"retry-after": "17"}),
            Reply(status=429, body=limited, headers={"anthropic-ratelimit-tokens-reset": reset}),
        )
        errors = []
        for _ in range(2):
            with pytest.raises(ProviderError) as info:
                await run(server, ChatRequest(messages=[Message.user("Hi")]))
            errors.append(info.value)
    assert all(e.kind is ErrorKind.RATE_LIMIT for e in errors)
    assert errors[0].retry_after_seconds == 17
    assert errors[1].retry_after_seconds is not None
    assert 0 < errors[1].retry_after_seconds <= 600


@pytest.mark.parametrize(
    ("status", "sentence", "kind"),
    [
        (400, "prompt is too long: 210000 tokens > 200000 maximum", ErrorKind.CONTEXT_LENGTH),
        (400, "Your credit balance is too low to access the Anthropic API.", ErrorKind.QUOTA),
        (400, "messages.0.content: field required", ErrorKind.INVALID_REQUEST),
        (401, "invalid x-api-key", ErrorKind.AUTH),
        (500, "Internal server error", ErrorKind.SERVER_ERROR),
    ],
)
async def test_http_errors_are_classified(status: int, sentence: str, kind: ErrorKind) -> None:
    body = {"type": "error", "error": {"type": "invalid_request_error", "message": sentence}}
    async with LoopbackServer() as server:
        server.queue(Reply(status=status, body=body))
        with pytest.raises(ProviderError) as info:
            await run(server, ChatRequest(messages=[Message.user("Hi")]))
    assert info.value.kind is kind
    assert info.value.message == sentence
    assert KEY not in str(info.value)
    assert len(server.requests) == 1, "no retry inside the adapter for an API-key call"


async def test_error_event_mid_stream_after_visible_text() -> None:
    events = sse(text("Partial answer"), stop=None, end=False)
    events.append(
        ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    )
    async with LoopbackServer() as server:
        server.queue(Reply(sse=events))
        with pytest.raises(ProviderError) as info:
            await run(server, ChatRequest(messages=[Message.user("Hi")], stream=True))
    assert info.value.kind is ErrorKind.OVERLOADED
    assert info.value.message == "Overloaded"
    assert info.value.visible_output is True


async def test_error_event_before_any_text_is_not_visible() -> None:
    payload = {"type": "error", "error": {"type": "api_error", "message": "Internal error"}}
    async with LoopbackServer() as server:
        server.queue(Reply(sse=[("error", payload)]))
        with pytest.raises(ProviderError) as info:
            await run(server, ChatRequest(messages=[Message.user("Hi")], stream=True))
    assert info.value.kind is ErrorKind.SERVER_ERROR
    assert info.value.visible_output is False


async def test_cut_stream_after_text_is_a_visible_transport_error() -> None:
    events = sse(text("Some", " words", " here"))
    async with LoopbackServer() as server:
        server.queue(Reply(sse=events, cut_after=5))
        with pytest.raises(ProviderError) as info:
            await run(server, ChatRequest(messages=[Message.user("Hi")], stream=True))
    assert info.value.kind is ErrorKind.TRANSPORT
    assert info.value.visible_output is True
    assert info.value.pre_response is False


async def test_cut_before_any_chunk_is_measured_pre_response() -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(sse=sse(text("x")), cut_after=0))
        with pytest.raises(ProviderError) as info:
            await run(server, ChatRequest(messages=[Message.user("Hi")], stream=True))
    assert info.value.kind is ErrorKind.TRANSPORT
    assert info.value.pre_response is True
    assert info.value.visible_output is False


async def test_stream_that_ends_without_a_stop_reason_is_a_transport_error() -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(sse=sse(text("half"), stop=None, end=False)))
        with pytest.raises(ProviderError) as info:
            await run(server, ChatRequest(messages=[Message.user("Hi")], stream=True))
    assert info.value.kind is ErrorKind.TRANSPORT
    assert info.value.visible_output is True


async def test_stream_that_finished_but_missed_message_stop_keeps_its_answer() -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(sse=sse(text("Complete answer."), end=False)))
        turn = await run(server, ChatRequest(messages=[Message.user("Hi")], stream=True))
    assert turn.content == "Complete answer."


async def test_pre_response_stall_is_a_measured_timeout_only_when_streaming() -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(stall=True), Reply(stall=True))
        with pytest.raises(ProviderError) as streamed:
            await run(server, ChatRequest(messages=[Message.user("Hi")], stream=True))
        with pytest.raises(ProviderError) as buffered:
            await run(server, ChatRequest(messages=[Message.user("Hi")]))
        server.release()
    assert streamed.value.kind is ErrorKind.TIMEOUT
    assert streamed.value.pre_response is True
    assert buffered.value.kind is ErrorKind.TIMEOUT
    assert buffered.value.pre_response is False


async def test_tool_call_cut_by_the_output_cap_is_a_typed_error() -> None:
    truncated = sse(tool("toolu_c", "get_weather", '{"city": "Os'), stop="max_tokens")
    async with LoopbackServer() as server:
        server.queue(Reply(sse=truncated))
        with pytest.raises(ProviderError) as info:
            await run(
                server, ChatRequest(messages=[Message.user("Hi")], tools=[WEATHER], stream=True)
            )
    assert info.value.kind is ErrorKind.UNKNOWN
    assert "get_weather" in info.value.message


async def test_refusal_with_nothing_said_is_a_content_filter_error() -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(body=message(stop="refusal")))
        with pytest.raises(ProviderError) as info:
            await run(server, ChatRequest(messages=[Message.user("Hi")]))
    assert info.value.kind is ErrorKind.CONTENT_FILTER


async def test_error_object_in_a_200_body_and_non_object_json() -> None:
    declared = {"type": "error", "error": {"type": "overloaded_error", "message": "Busy now"}}
    async with LoopbackServer() as server:
        server.queue(Reply(body=declared), Reply(body=[1, 2, 3]))
        with pytest.raises(ProviderError) as first:
            await run(server, ChatRequest(messages=[Message.user("Hi")]))
        with pytest.raises(ProviderError) as second:
            await run(server, ChatRequest(messages=[Message.user("Hi")]))
    assert (first.value.kind, first.value.message) == (ErrorKind.OVERLOADED, "Busy now")
    assert second.value.kind is ErrorKind.SERVER_ERROR


async def test_hostile_stream_events_are_survived() -> None:
    """Garbage data lines, events with wrong shapes and unknown block types never crash."""
    events: list[Any] = [
        "this is not json",
        ("message_start", {"type": "message_start", "message": ["not", "a", "dict"]}),
        {"type": "content_block_delta", "index": "zero", "delta": {"type": "text_delta"}},
        {"type": "content_block_delta", "index": 7, "delta": None},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "server_thing"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text"}},
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "text_delta", "text": "Fine."},
        },
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": "lots"},
        {"type": "message_stop"},
    ]
    async with LoopbackServer() as server:
        server.queue(Reply(sse=events))
        turn = await run(server, ChatRequest(messages=[Message.user("Hi")], stream=True))
    assert turn.content == "Fine."
    assert turn.model == MODEL  # fell back to the requested model


async def test_concurrent_calls_keep_their_own_mode_headers() -> None:
    """Per-call state is task-local: a streamed and a buffered call in flight together."""
    async with LoopbackServer() as server:

        def answer(request: RecordedRequest) -> Reply:
            if request.json().get("stream"):
                return Reply(sse=sse(text("streamed")))
            return Reply(body=message({"type": "text", "text": "buffered"}))

        server.handler = answer
        provider = make(server)
        results: dict[str, str] = {}

        async def one(stream: bool) -> None:
            turn = await provider.chat(ChatRequest(messages=[Message.user("Hi")], stream=stream))
            results["stream" if stream else "plain"] = turn.content

        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(one, True)
                tg.start_soon(one, False)
        await provider.aclose()
    assert results == {"stream": "streamed", "plain": "buffered"}
    for request in server.requests:
        streaming = bool(request.json().get("stream"))
        assert (request.header("accept") == "text/event-stream") is streaming


# =========================================================================== codec units


def test_model_versions_and_adaptive_thinking() -> None:
    assert model_version("claude-sonnet-4-6") == (4, 6)
    assert model_version("claude-3-7-sonnet-20250219") == (3, 7)
    assert model_version("claude-opus-4-20250514") == (4, 0)
    assert model_version("claude-opus-4-1-20250805") == (4, 1)
    assert model_version("claude-mythos-preview") is None
    assert model_version("gpt-5.6") is None
    assert supports_adaptive_thinking("claude-opus-4-6")
    assert supports_adaptive_thinking("claude-opus-5")
    assert not supports_adaptive_thinking("claude-haiku-4-5")
    assert not supports_adaptive_thinking("claude-opus-4-5-20251101")


def test_prefixed_tool_names_stay_within_the_wire_limit_and_round_trip() -> None:
    long = ToolDefinition(name="t" * 64)
    names = ToolNames("mcp_", [WEATHER, long])
    assert names.to_wire("get_weather") == "mcp_get_weather"
    wired = names.to_wire(long.name)
    assert len(wired) == 64 and wired.startswith("mcp_")
    assert names.from_wire(wired) == long.name
    assert names.from_wire("mcp_get_weather") == "get_weather"
    assert names.from_wire("mcp_unknown") == "unknown"
    assert ToolNames().to_wire("get_weather") == "get_weather"


def test_echo_memory_is_bounded_and_exact() -> None:
    echo = AssistantEcho(limit=2)
    for n in range(3):
        echo.remember([{"type": "tool_use", "id": f"t{n}", "name": "x", "input": {}}])
    assert len(echo) == 2
    assert echo.recall(["t0"]) is None
    replay = echo.recall(["t2"])
    assert replay == [{"type": "tool_use", "id": "t2", "name": "x", "input": {}}]
    replay[0]["cache_control"] = {"type": "ephemeral"}
    assert "cache_control" not in echo.recall(["t2"])[0], "recall hands out copies"
    assert echo.recall(["t2", "t9"]) is None, "a different set of calls is a different turn"
    assert echo.recall([]) is None


def test_thinking_blocks_never_take_a_cache_mark() -> None:
    echo = AssistantEcho()
    echo.remember(
        [
            {"type": "thinking", "thinking": "plan", "signature": "s"},
            {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {}},
        ]
    )
    request = ChatRequest(
        messages=[
            Message.user("Weather?"),
            Message.assistant(tool_calls=[ToolCall(id="t1", name="get_weather")]),
            Message.tool(ToolResult(call_id="t1", name="get_weather", content="ok")),
        ]
    )
    body = build_body(request, WireOptions(model=MODEL, thinking=True), ToolNames(), echo)
    thinking_block, tool_use = body["messages"][1]["content"]
    assert "cache_control" not in thinking_block
    assert tool_use["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in echo.recall(["t1"])[1], "the memory itself is untouched"


def test_a_request_with_nothing_to_send_is_refused() -> None:
    request = ChatRequest(messages=[Message.system("only rules"), Message.user("   ")])
    with pytest.raises(ProviderError) as info:
        build_body(request, WireOptions(model=MODEL), ToolNames(), AssistantEcho())
    assert info.value.kind is ErrorKind.INVALID_REQUEST


def test_usage_and_error_event_mapping() -> None:
    usage = usage_from({"input_tokens": 3, "cache_read_input_tokens": None, "output_tokens": 2})
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == (3, 0, 2)
    assert usage_from({"input_tokens": -5, "output_tokens": True}).total_tokens == 0
    cases = {
        "overloaded_error": ErrorKind.OVERLOADED,
        "rate_limit_error": ErrorKind.RATE_LIMIT,
        "billing_error": ErrorKind.QUOTA,
        "authentication_error": ErrorKind.AUTH,
        "something_new": ErrorKind.SERVER_ERROR,
    }
    for name, kind in cases.items():
        error = error_from_event("anthropic", {"error": {"type": name, "message": "m"}})
        assert error.kind is kind
    too_long = error_from_event(
        "anthropic",
        {"error": {"type": "invalid_request_error", "message": "prompt is too long"}},
    )
    assert too_long.kind is ErrorKind.CONTEXT_LENGTH
    anonymous = error_from_event("anthropic", {"type": "error", "error": "weird"})
    assert anonymous.message and anonymous.kind is ErrorKind.SERVER_ERROR
