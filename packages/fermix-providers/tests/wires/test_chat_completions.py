"""The Chat Completions wire against a real loopback HTTP server: encoding and answers."""

from __future__ import annotations

import pytest
from fermix_core.messages import (
    ImagePart,
    Message,
    ToolCall,
    ToolDefinition,
    ToolResult,
)
from fermix_core.provider import (
    ChatRequest,
    ErrorKind,
    ProviderError,
    ProviderSettings,
    StreamEvent,
    StreamEventKind,
)
from fermix_core.specs import ModelInfo, ProviderSpec
from fermix_core.testing.loopback import LoopbackServer, Reply
from fermix_providers.http import Timeouts
from fermix_providers.wires.chat_completions import (
    ChatCompletionsProvider,
    content_text,
    parse_usage,
)

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("both_clients")]

SECRET = "sk-gateway-secret-123"
PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452")

SPEC = ProviderSpec(
    name="gateway",
    factory="fermix_providers.wires.chat_completions:ChatCompletionsProvider",
    reasoning_efforts=("none", "low", "medium", "high", "xhigh", "max"),
    config_keys=frozenset({"primary", "default_model", "base_url", "api_key", "reasoning_effort"}),
    default_model="gw-large",
    models=(
        ModelInfo("gw-large", 128_000, vision=True, max_effort="high"),
        ModelInfo("gw-text", 32_000, vision=False),
    ),
)

ECHO = ToolDefinition(
    name="echo",
    description="Echo text.",
    parameters={"type": "object", "properties": {"text": {"type": "string"}}},
)


def provider(server: LoopbackServer, **settings) -> ChatCompletionsProvider:
    settings.setdefault("api_key", SECRET)
    return ChatCompletionsProvider(
        SPEC, ProviderSettings(name="gateway", base_url=server.url, **settings)
    )


def completion(content="Hello.", *, tool_calls=None, finish="stop", usage=None, model="gw-large"):
    message = {"role": "assistant", "content": content}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage or {"prompt_tokens": 12, "completion_tokens": 3},
    }


def chunk(delta=None, finish=None, **extra):
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "gw-large-2026",
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}],
        **extra,
    }


def request(*messages: Message, **kwargs) -> ChatRequest:
    return ChatRequest(messages=list(messages), **kwargs)


# --------------------------------------------------------------------------- encoding


async def test_buffered_text_turn_and_request_shape() -> None:
    async with LoopbackServer() as server:
        server.queue(
            Reply(
                body=completion(
                    usage={
                        "prompt_tokens": 40,
                        "completion_tokens": 7,
                        "prompt_tokens_details": {"cached_tokens": 32},
                        "completion_tokens_details": {"reasoning_tokens": 5},
                    }
                )
            )
        )
        async with provider(server) as p:
            turn = await p.chat(request(Message.system("Be brief."), Message.user("Hi")))
    [sent] = server.requests
    assert sent.method == "POST"
    assert sent.path == "/chat/completions"
    assert sent.header("authorization") == f"Bearer {SECRET}"
    assert sent.json() == {
        "model": "gw-large",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
        ],
    }
    assert turn.content == "Hello."
    assert turn.model == "gw-large"
    assert turn.tool_calls == []
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (40, 7)
    assert (turn.usage.cached_input_tokens, turn.usage.reasoning_tokens) == (32, 5)


async def test_assistant_tool_calls_omit_the_content_key_and_tool_results_pair_up() -> None:
    call = ToolCall(id="call_1", name="echo", arguments={"text": "ping"})
    history = [
        Message.user("Echo ping."),
        Message.assistant("Let me echo that.", tool_calls=[call]),
        Message.tool(ToolResult(call_id="call_1", name="echo", content="ping")),
        Message.assistant("Done: ping."),
        Message.user(""),  # empty: never sent
        Message.user("And now?"),
    ]
    async with LoopbackServer() as server:
        server.queue(Reply(body=completion()))
        async with provider(server) as p:
            await p.chat(request(*history, tools=[ECHO]))
    body = server.requests[0].json()
    assistant = body["messages"][1]
    assert "content" not in assistant, "no content key may sit beside tool_calls"
    assert assistant["tool_calls"] == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "echo", "arguments": '{"text": "ping"}'},
        }
    ]
    assert body["messages"][2] == {"role": "tool", "tool_call_id": "call_1", "content": "ping"}
    assert body["messages"][3] == {"role": "assistant", "content": "Done: ping."}
    assert [m["role"] for m in body["messages"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "echo",
                "parameters": ECHO.parameters,
                "description": "Echo text.",
            },
        }
    ]


async def test_images_become_data_urls_and_tool_images_follow_the_tool_run() -> None:
    shot = ImagePart(media_type="image/png", data=PNG)
    calls = [ToolCall(id="a", name="browser", arguments={}), ToolCall(id="b", name="echo")]
    history = [
        Message.user("Look:", ImagePart(media_type="image/jpeg", url="https://x.test/cat.jpg")),
        Message.assistant(tool_calls=calls),
        Message.tool(ToolResult(call_id="a", name="browser", content=[shot])),
        Message.tool(ToolResult(call_id="b", name="echo", content="", is_error=True)),
        Message.user("Well?"),
    ]
    async with LoopbackServer() as server:
        server.queue(Reply(body=completion()))
        async with provider(server) as p:
            await p.chat(request(*history))
    messages = server.requests[0].json()["messages"]
    assert messages[0]["content"] == [
        {"type": "text", "text": "Look:"},
        {"type": "image_url", "image_url": {"url": "https://x.test/cat.jpg"}},
    ]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "user", "user"]
    assert messages[2]["tool_call_id"] == "a"
    assert "1 image" in messages[2]["content"]
    assert messages[3] == {
        "role": "tool",
        "tool_call_id": "b",
        "content": "Error (the tool gave no details)",
    }
    images = messages[4]["content"]
    assert images[0]["type"] == "text" and "browser" in images[0]["text"]
    assert images[1] == {"type": "image_url", "image_url": {"url": shot.data_url()}}
    assert messages[5] == {"role": "user", "content": "Well?"}


async def test_images_to_a_text_only_model_fail_loud_before_any_request() -> None:
    async with LoopbackServer() as server, provider(server) as p:
        with pytest.raises(ProviderError) as info:
            await p.chat(
                request(
                    Message.user("what is it?", ImagePart(media_type="image/png", data=PNG)),
                    model="gw-text",
                )
            )
    assert info.value.kind is ErrorKind.UNSUPPORTED_INPUT
    assert server.requests == []


async def test_effort_is_clamped_to_the_model_ceiling_and_request_effort_wins() -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(body=completion()), Reply(body=completion()), Reply(body=completion()))
        async with provider(server, reasoning_effort="max") as p:
            await p.chat(request(Message.user("a")))
            await p.chat(request(Message.user("b"), reasoning_effort="low"))
        async with provider(server) as p:
            await p.chat(request(Message.user("c")))
    efforts = [r.json().get("reasoning_effort") for r in server.requests]
    assert efforts == ["high", "low", None]


# --------------------------------------------------------------------------- streaming


async def test_stream_text_deltas_usage_and_item_done() -> None:
    events: list[StreamEvent] = []
    async with LoopbackServer() as server:
        server.queue(
            Reply(
                chunks=[": keep-alive comment\n\n"],
                sse=[
                    chunk({"role": "assistant", "content": ""}),
                    chunk({"content": "Hel"}),
                    "not json at all",
                    chunk({"content": "lo!"}),
                    chunk(finish="stop"),
                    {
                        "id": "chatcmpl-1",
                        "choices": [],
                        "usage": {"prompt_tokens": 9, "completion_tokens": 2},
                    },
                    "[DONE]",
                ],
            )
        )
        async with provider(server) as p:
            turn = await p.chat(request(Message.user("Hi"), stream=True, on_event=events.append))
    body = server.requests[0].json()
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert turn.content == "Hello!"
    assert turn.model == "gw-large-2026"
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (9, 2)
    assert [(e.kind, e.text) for e in events] == [
        (StreamEventKind.TEXT_DELTA, "Hel"),
        (StreamEventKind.TEXT_DELTA, "lo!"),
        (StreamEventKind.ITEM_DONE, "Hello!"),
    ]
    assert events[-1].item_type == "message"


def summary(piece: str, index: int = 0) -> dict:
    """A delta carrying one OpenRouter reasoning-summary piece (and the raw mirror field)."""
    detail = {"type": "reasoning.summary", "summary": piece, "format": "openai-responses-v1"}
    return {"content": "", "reasoning": piece, "reasoning_details": [{**detail, "index": index}]}


async def test_streamed_reasoning_summaries_are_reported_once_each_and_kept_out_of_the_answer():
    events: list[StreamEvent] = []
    async with LoopbackServer() as server:
        server.queue(
            Reply(
                sse=[
                    chunk(summary("**Reading")),
                    chunk(summary(" the question**")),
                    chunk(summary("**Planning**", index=1)),
                    chunk({"reasoning_details": [{"type": "reasoning.encrypted", "data": "x"}]}),
                    chunk({"content": "Forty-two."}),
                    chunk(finish="stop"),
                    "[DONE]",
                ]
            )
        )
        async with provider(server) as p:
            turn = await p.chat(request(Message.user("Hi"), stream=True, on_event=events.append))
    assert turn.content == "Forty-two."
    assert [(e.kind, e.text) for e in events] == [
        (StreamEventKind.REASONING_SUMMARY, "**Reading the question**"),
        (StreamEventKind.REASONING_SUMMARY, "**Planning**"),
        (StreamEventKind.TEXT_DELTA, "Forty-two."),
        (StreamEventKind.ITEM_DONE, "Forty-two."),
    ]


async def test_a_summary_still_open_when_a_tool_call_starts_or_the_stream_ends_is_reported():
    events: list[StreamEvent] = []
    call = {"index": 0, "id": "call_a", "type": "function"}
    async with LoopbackServer() as server:
        server.queue(
            Reply(
                sse=[
                    chunk(summary("**Looking it up**")),
                    chunk(
                        {"tool_calls": [{**call, "function": {"name": "echo", "arguments": "{}"}}]}
                    ),
                    chunk(finish="tool_calls"),
                    "[DONE]",
                ]
            ),
            Reply(sse=[chunk(summary("**Only thinking**")), chunk(finish="length"), "[DONE]"]),
        )
        async with provider(server) as p:
            turn = await p.chat(
                request(Message.user("go"), tools=[ECHO], stream=True, on_event=events.append)
            )
            assert [c.name for c in turn.tool_calls] == ["echo"]
            assert [(e.kind, e.text) for e in events] == [
                (StreamEventKind.REASONING_SUMMARY, "**Looking it up**"),
                (StreamEventKind.ITEM_DONE, ""),
            ]
            events.clear()
            empty = await p.chat(request(Message.user("go"), stream=True, on_event=events.append))
    assert empty.content == "" and not empty.tool_calls  # the loop answers "try again"
    assert [(e.kind, e.text) for e in events] == [
        (StreamEventKind.REASONING_SUMMARY, "**Only thinking**")
    ]


async def test_streamed_tool_call_fragments_are_assembled_by_index() -> None:
    events: list[StreamEvent] = []

    async def collect(event: StreamEvent) -> None:
        events.append(event)

    first = {"index": 0, "id": "call_a", "type": "function"}
    second = {"index": 1, "id": "call_b", "type": "function"}
    async with LoopbackServer() as server:
        server.queue(
            Reply(
                sse=[
                    chunk({"content": "Checking both."}),
                    chunk(
                        {"tool_calls": [{**first, "function": {"name": "echo", "arguments": ""}}]}
                    ),
                    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"te'}}]}),
                    chunk(
                        {"tool_calls": [{**second, "function": {"name": "echo", "arguments": "{"}}]}
                    ),
                    chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'xt": "a"}'}}]}),
                    chunk(
                        {"tool_calls": [{"index": 1, "function": {"arguments": '"text": "b"}'}}]}
                    ),
                    chunk(finish="tool_calls"),
                    "[DONE]",
                ]
            )
        )
        async with provider(server) as p:
            turn = await p.chat(
                request(Message.user("Echo a and b"), tools=[ECHO], stream=True, on_event=collect)
            )
    assert turn.content == "Checking both."
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [
        ("call_a", "echo", {"text": "a"}),
        ("call_b", "echo", {"text": "b"}),
    ]
    kinds = [(e.kind, e.item_type) for e in events]
    assert kinds == [
        (StreamEventKind.TEXT_DELTA, None),
        (StreamEventKind.ITEM_DONE, "message"),
        (StreamEventKind.ITEM_DONE, "tool_call"),
        (StreamEventKind.ITEM_DONE, "tool_call"),
    ], "commentary before the tool calls is closed as its own item"


async def test_whole_tool_calls_without_index_and_without_id() -> None:
    """Some servers send each call complete, with no ``index``, or with no ``id`` at all."""
    async with LoopbackServer() as server:
        server.queue(
            Reply(
                sse=[
                    chunk(
                        {
                            "tool_calls": [
                                {
                                    "id": "AbC123xyz",
                                    "function": {"name": "echo", "arguments": "{}"},
                                },
                                {"function": {"name": "echo", "arguments": {"text": "obj"}}},
                            ]
                        },
                        finish="tool_calls",
                    ),
                    "[DONE]",
                ]
            )
        )
        async with provider(server) as p:
            turn = await p.chat(request(Message.user("go"), tools=[ECHO], stream=True))
    first, second = turn.tool_calls
    assert (first.id, first.arguments) == ("AbC123xyz", {})
    assert second.arguments == {"text": "obj"}, "object arguments are taken as they are"
    assert second.id and second.id != first.id


async def test_buffered_tool_calls_and_generated_ids() -> None:
    calls = [
        {
            "id": "call_x",
            "type": "function",
            "function": {"name": "echo", "arguments": '{"text":"x"}'},
        },
        {"type": "function", "function": {"name": "echo", "arguments": ""}},
    ]
    async with LoopbackServer() as server:
        server.queue(Reply(body=completion(None, tool_calls=calls, finish="tool_calls")))
        async with provider(server) as p:
            turn = await p.chat(request(Message.user("go"), tools=[ECHO]))
    assert turn.content == ""
    assert turn.tool_calls[0].arguments == {"text": "x"}
    assert turn.tool_calls[1].arguments == {}
    generated = turn.tool_calls[1].id
    assert len(generated) == 9 and generated.isalnum(), "valid on every wire, Mistral included"


async def test_stream_without_finish_marker_keeps_what_arrived() -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(sse=[chunk({"content": "partial but usable"})]))
        async with provider(server) as p:
            turn = await p.chat(request(Message.user("Hi"), stream=True))
    assert turn.content == "partial but usable"


@pytest.mark.parametrize("tail", [[], ["[DONE]"]])
async def test_stream_that_ends_with_nothing_is_a_transport_close(tail) -> None:
    """No output and no finish reason is a cut, never an empty answer — even after [DONE]."""
    async with LoopbackServer() as server:
        server.queue(Reply(sse=[chunk({"role": "assistant"}), *tail]))
        async with provider(server) as p:
            with pytest.raises(ProviderError) as info:
                await p.chat(request(Message.user("Hi"), stream=True))
    assert info.value.kind is ErrorKind.TRANSPORT
    assert info.value.visible_output is False


async def test_a_declared_empty_answer_is_returned_as_empty() -> None:
    """A finish reason with no text is the model's own (empty) answer, for the loop to judge."""
    async with LoopbackServer() as server:
        server.queue(Reply(sse=[chunk({"content": ""}, finish="stop"), "[DONE]"]))
        async with provider(server) as p:
            turn = await p.chat(request(Message.user("Hi"), stream=True))
    assert turn.is_empty


# --------------------------------------------------------------------------- small helpers


def test_content_text_reads_strings_lists_and_nulls() -> None:
    assert content_text(None) == ""
    assert content_text("hi") == "hi"
    assert (
        content_text([{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "ok"}])
        == "ok"
    )
    assert content_text(["a", {"text": "b"}, 3]) == "ab"
    assert content_text(42) == ""


def test_parse_usage_tolerates_junk() -> None:
    assert parse_usage(None).total_tokens == 0
    usage = parse_usage({"prompt_tokens": -3, "completion_tokens": "7", "prompt_tokens_details": 1})
    assert usage.total_tokens == 0


async def test_timeouts_can_be_overridden_per_instance() -> None:
    fast = Timeouts(connect=1.0, read=0.25, write=1.0, pool=1.0)
    async with LoopbackServer() as server:
        p = provider(server, extra={"timeouts": fast})
        assert p.timeouts is fast
        await p.aclose()


async def test_index_less_fragments_without_id_or_name_continue_the_last_call() -> None:
    async with LoopbackServer() as server:
        server.queue(
            Reply(
                sse=[
                    chunk(
                        {
                            "tool_calls": [
                                {"id": "c1", "function": {"name": "echo", "arguments": '{"te'}}
                            ]
                        }
                    ),
                    chunk({"tool_calls": [{"function": {"arguments": 'xt": "é"}'}}]}),
                    chunk(finish="tool_calls"),
                    "[DONE]",
                ]
            )
        )
        async with provider(server) as p:
            turn = await p.chat(request(Message.user("go"), tools=[ECHO], stream=True))
    [call] = turn.tool_calls
    assert (call.id, call.arguments) == ("c1", {"text": "é"})


async def test_streamed_content_filter_with_nothing_shown_is_classified() -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(sse=[chunk(finish="content_filter"), "[DONE]"]))
        async with provider(server) as p:
            with pytest.raises(ProviderError) as info:
                await p.chat(request(Message.user("Hi"), stream=True))
    assert info.value.kind is ErrorKind.CONTENT_FILTER


async def test_non_ascii_arguments_travel_unescaped() -> None:
    call = ToolCall(id="c1", name="echo", arguments={"text": "café ☕"})
    history = [
        Message.user("x"),
        Message.assistant(tool_calls=[call]),
        Message.tool(ToolResult(call_id="c1", name="echo", content="ok")),
    ]
    async with LoopbackServer() as server:
        server.queue(Reply(body=completion()))
        async with provider(server) as p:
            await p.chat(request(*history))
    sent = server.requests[0].json()["messages"][1]["tool_calls"][0]["function"]["arguments"]
    assert sent == '{"text": "café ☕"}'
