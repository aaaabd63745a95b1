"""The Responses wire end to end over a real loopback socket: streams, failures, errors."""

from __future__ import annotations

import logging

import pytest
from fermix_core.messages import Message, ToolCall, ToolDefinition
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
from fermix_providers.wires.responses import ResponsesProvider

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("both_clients")]

SECRET = "sk-wire-secret-123"
SPEC = ProviderSpec(
    name="acme",
    factory="x:y",
    default_model="m1",
    env_var="ACME_API_KEY",
    models=(ModelInfo("m1", 100_000, vision=True),),
)
TOOL = ToolDefinition(
    name="lookup",
    description="Look something up.",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}},
)


class Probe(ResponsesProvider):
    timeouts = Timeouts(connect=2.0, read=0.5, write=2.0, pool=2.0)


def probe(server: LoopbackServer) -> Probe:
    return Probe(SPEC, ProviderSettings(name="acme", base_url=server.url, api_key=SECRET))


class Events:
    def __init__(self) -> None:
        self.seen: list[StreamEvent] = []

    async def __call__(self, event: StreamEvent) -> None:
        self.seen.append(event)

    def of(self, kind: StreamEventKind) -> list[StreamEvent]:
        return [e for e in self.seen if e.kind == kind]


def streamed(events: Events | None = None, **kw) -> ChatRequest:
    return ChatRequest(
        messages=[Message.user("hi")], stream=True, on_event=events or Events(), **kw
    )


# SSE building blocks -------------------------------------------------------------------

CREATED = ("response.created", {"type": "response.created", "response": {"id": "resp_7"}})


def delta(text: str, item: str = "msg_1") -> dict:
    return {"type": "response.output_text.delta", "item_id": item, "delta": text}


def message_done(text: str, item: str = "msg_1", index: int = 0) -> dict:
    return {
        "type": "response.output_item.done",
        "output_index": index,
        "item": {
            "type": "message",
            "id": item,
            "role": "assistant",
            "content": [{"type": "output_text", "text": text}],
        },
    }


def completed(output: list | None = None, **usage) -> dict:
    return {
        "type": "response.completed",
        "response": {
            "id": "resp_7",
            "status": "completed",
            "model": "m1-2026",
            "output": output or [],
            "usage": {"input_tokens": 5, "output_tokens": usage.get("out", 2)},
        },
    }


def failed(code: str, message: str) -> dict:
    return {
        "type": "response.failed",
        "response": {
            "id": "resp_7",
            "status": "failed",
            "error": {"code": code, "message": message},
        },
    }


TEXT_STREAM = [
    CREATED,
    delta("Hel"),
    delta("lo."),
    message_done("Hello."),
    completed(),
]


async def test_streamed_text_emits_deltas_and_item_done() -> None:
    events = Events()
    async with LoopbackServer() as server:
        server.queue(Reply(sse=TEXT_STREAM))
        async with probe(server) as provider:
            turn = await provider.chat(streamed(events))
    assert turn.content == "Hello."
    assert turn.model == "m1-2026"
    assert turn.provider_state == {"response_id": "resp_7"}
    assert turn.usage.input_tokens == 5
    assert [e.text for e in events.of(StreamEventKind.TEXT_DELTA)] == ["Hel", "lo."]
    [done] = events.of(StreamEventKind.ITEM_DONE)
    assert (done.item_type, done.text) == ("message", "Hello.")
    [request] = server.requests
    assert request.path == "/responses"
    assert request.json()["stream"] is True
    assert request.header("authorization") == f"Bearer {SECRET}"


async def test_events_named_only_by_the_sse_event_field_are_understood() -> None:
    named = [
        ("response.output_text.delta", {"item_id": "m", "delta": "Hi"}),
        ("response.completed", {"response": {"id": "r", "output": []}}),
    ]
    async with LoopbackServer() as server:
        server.queue(Reply(sse=named))
        async with probe(server) as provider:
            turn = await provider.chat(streamed())
    assert turn.content == "Hi"


async def test_streamed_tool_call_arguments_and_reasoning_summary() -> None:
    events = Events()
    call_item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "lookup"}
    sse = [
        CREATED,
        {
            "type": "response.reasoning_summary_text.delta",
            "item_id": "rs_1",
            "summary_index": 0,
            "delta": "Thinking",
        },
        {
            "type": "response.reasoning_summary_text.done",
            "item_id": "rs_1",
            "summary_index": 0,
            "text": "Thinking about it.",
        },
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "Thinking about it."}],
            },
        },
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {**call_item, "arguments": ""},
        },
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": '{"q":'},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": '"tea"}'},
        {
            "type": "response.function_call_arguments.done",
            "item_id": "fc_1",
            "output_index": 1,
            "arguments": '{"q":"tea"}',
        },
        {
            "type": "response.output_item.done",
            "output_index": 1,
            "item": {**call_item, "arguments": '{"q":"tea"}'},
        },
        completed(),
    ]
    async with LoopbackServer() as server:
        server.queue(Reply(sse=sse))
        async with probe(server) as provider:
            turn = await provider.chat(streamed(events, tools=[TOOL]))
    assert turn.tool_calls == [ToolCall(id="call_1", name="lookup", arguments={"q": "tea"})]
    assert turn.content == ""
    summaries = events.of(StreamEventKind.REASONING_SUMMARY)
    assert [s.text for s in summaries] == ["Thinking about it."], "reported once, not twice"
    assert [e.item_type for e in events.of(StreamEventKind.ITEM_DONE)] == [
        "reasoning",
        "tool_call",
    ]
    assert not events.of(StreamEventKind.TEXT_DELTA)
    body = server.requests[0].json()
    assert body["tools"][0]["name"] == "lookup"


async def test_completed_output_is_authoritative_when_present() -> None:
    final = [{"type": "message", "id": "m", "content": [{"type": "output_text", "text": "Final."}]}]
    async with LoopbackServer() as server:
        server.queue(Reply(sse=[delta("Fin", "m"), completed(final)]))
        async with probe(server) as provider:
            turn = await provider.chat(streamed())
    assert turn.content == "Final."


async def test_not_streaming_when_not_asked_reads_the_json_body() -> None:
    body = {
        "id": "resp_2",
        "status": "completed",
        "model": "m1",
        "output": [{"type": "message", "content": [{"type": "output_text", "text": "Plain."}]}],
    }
    async with LoopbackServer() as server:
        server.queue(Reply(body=body))
        async with probe(server) as provider:
            turn = await provider.chat(ChatRequest(messages=[Message.user("hi")]))
    assert turn.content == "Plain."
    assert server.requests[0].json()["stream"] is False


async def test_events_are_not_reported_unless_streaming_was_asked() -> None:
    events = Events()
    async with LoopbackServer() as server:
        server.queue(Reply(sse=TEXT_STREAM))

        class AlwaysStreams(Probe):
            always_stream = True

        provider = AlwaysStreams(
            SPEC, ProviderSettings(name="acme", base_url=server.url, api_key=SECRET)
        )
        async with provider:
            turn = await provider.chat(ChatRequest(messages=[Message.user("hi")], on_event=events))
    assert turn.content == "Hello."
    assert events.seen == []


# Failures ------------------------------------------------------------------------------


async def test_declared_overload_quotes_the_server_sentence() -> None:
    sentence = "Our servers are currently overloaded. Please try again later."
    async with LoopbackServer() as server:
        server.queue(Reply(sse=[CREATED, failed("server_is_overloaded", sentence)]))
        async with probe(server) as provider:
            with pytest.raises(ProviderError) as info:
                await provider.chat(streamed())
    error = info.value
    assert error.kind is ErrorKind.OVERLOADED
    assert error.message == sentence
    assert error.provider == "acme"
    assert error.visible_output is False


async def test_error_event_with_nothing_generated_is_classified() -> None:
    error_event = {
        "type": "error",
        "code": "rate_limit_exceeded",
        "message": "Rate limit reached for requests. Please try again in 2s.",
        "param": None,
        "sequence_number": 2,
    }
    async with LoopbackServer() as server:
        server.queue(Reply(sse=[CREATED, error_event]))
        async with probe(server) as provider:
            with pytest.raises(ProviderError) as info:
                await provider.chat(streamed())
    assert info.value.kind is ErrorKind.RATE_LIMIT
    assert info.value.retry_after_seconds == 2
    assert info.value.message.startswith("Rate limit reached")


async def test_incomplete_with_nothing_generated_is_an_error() -> None:
    incomplete = {
        "type": "response.incomplete",
        "response": {
            "id": "r",
            "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"},
        },
    }
    async with LoopbackServer() as server:
        server.queue(Reply(sse=[CREATED, incomplete]))
        async with probe(server) as provider:
            with pytest.raises(ProviderError) as info:
                await provider.chat(streamed())
    assert "max_output_tokens" in info.value.message


async def test_cut_stream_without_reason_is_transport() -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(sse=[CREATED, CREATED, completed()], cut_after=1))
        async with probe(server) as provider:
            with pytest.raises(ProviderError) as info:
                await provider.chat(streamed())
    assert info.value.kind is ErrorKind.TRANSPORT
    assert info.value.visible_output is False


async def test_clean_close_without_terminal_or_output_is_transport() -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(sse=[CREATED]))
        async with probe(server) as provider:
            with pytest.raises(ProviderError) as info:
                await provider.chat(streamed())
    assert info.value.kind is ErrorKind.TRANSPORT
    assert "no reason given" in info.value.message


async def test_completed_with_no_output_is_the_models_empty_answer() -> None:
    """``response.completed`` with nothing in it: the loop answers the honest "try again"."""
    async with LoopbackServer() as server:
        server.queue(Reply(sse=[CREATED, completed()]))
        async with probe(server) as provider:
            turn = await provider.chat(streamed())
        assert len(server.requests) == 1
    assert turn.is_empty and turn.tool_calls == []


async def test_pre_response_stall_is_a_measured_timeout() -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(stall=True))
        async with probe(server) as provider:
            with pytest.raises(ProviderError) as info:
                await provider.chat(streamed())
    assert info.value.kind is ErrorKind.TIMEOUT
    assert info.value.pre_response is True


async def test_mid_stream_stall_without_output_is_not_pre_response() -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(sse=[CREATED, completed()], stall_after=1))
        async with probe(server) as provider:
            with pytest.raises(ProviderError) as info:
                await provider.chat(streamed())
    assert info.value.kind is ErrorKind.TIMEOUT
    assert info.value.pre_response is False


async def test_output_then_no_completion_returns_the_output(caplog) -> None:
    caplog.set_level(logging.WARNING, logger="fermix.providers.responses")
    async with LoopbackServer() as server:
        server.queue(Reply(sse=[CREATED, delta("Par"), delta("tial."), message_done("Partial.")]))
        async with probe(server) as provider:
            turn = await provider.chat(streamed())
    assert turn.content == "Partial."
    assert any("without completing" in r.getMessage() for r in caplog.records)


async def test_output_then_cut_returns_the_output() -> None:
    sse = [CREATED, delta("Half an "), delta("answer"), completed()]
    async with LoopbackServer() as server:
        server.queue(Reply(sse=sse, cut_after=3))
        async with probe(server) as provider:
            turn = await provider.chat(streamed())
    assert turn.content == "Half an answer"


async def test_output_then_stall_returns_the_output() -> None:
    sse = [CREATED, message_done("Done item."), completed()]
    async with LoopbackServer() as server:
        server.queue(Reply(sse=sse, stall_after=2))
        async with probe(server) as provider:
            turn = await provider.chat(streamed())
    assert turn.content == "Done item."


async def test_tool_call_with_finished_arguments_survives_a_cut() -> None:
    sse = [
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"type": "function_call", "id": "fc", "call_id": "c1", "name": "lookup"},
        },
        {"type": "response.function_call_arguments.done", "item_id": "fc", "arguments": "{}"},
        completed(),
    ]
    async with LoopbackServer() as server:
        server.queue(Reply(sse=sse, cut_after=2))
        async with probe(server) as provider:
            turn = await provider.chat(streamed(tools=[TOOL]))
    assert turn.tool_calls == [ToolCall(id="c1", name="lookup", arguments={})]


async def test_arguments_done_without_a_copy_uses_the_streamed_deltas() -> None:
    sse = [
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"type": "function_call", "id": "fc", "call_id": "c1", "name": "lookup"},
        },
        {"type": "response.function_call_arguments.delta", "item_id": "fc", "delta": '{"q":'},
        {"type": "response.function_call_arguments.delta", "item_id": "fc", "delta": ' "x"}'},
        {"type": "response.function_call_arguments.done", "item_id": "fc"},
    ]
    async with LoopbackServer() as server:
        server.queue(Reply(sse=sse))
        async with probe(server) as provider:
            turn = await provider.chat(streamed(tools=[TOOL]))
    assert turn.tool_calls == [ToolCall(id="c1", name="lookup", arguments={"q": "x"})]


async def test_half_streamed_tool_call_is_not_returned() -> None:
    sse = [
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"type": "function_call", "id": "fc", "call_id": "c1", "name": "lookup"},
        },
        {"type": "response.function_call_arguments.delta", "item_id": "fc", "delta": '{"q"'},
        completed(),
    ]
    async with LoopbackServer() as server:
        server.queue(Reply(sse=sse, cut_after=2))
        async with probe(server) as provider:
            with pytest.raises(ProviderError) as info:
                await provider.chat(streamed(tools=[TOOL]))
    assert info.value.kind is ErrorKind.TRANSPORT


async def test_declared_failure_inside_an_unfinished_item_is_an_error() -> None:
    events = Events()
    sse = [CREATED, delta("Visible"), failed("server_error", "The server had an error.")]
    async with LoopbackServer() as server:
        server.queue(Reply(sse=sse))
        async with probe(server) as provider:
            with pytest.raises(ProviderError) as info:
                await provider.chat(streamed(events))
    assert info.value.kind is ErrorKind.OVERLOADED
    assert info.value.visible_output is True, "a retry would repeat what the user saw"
    assert events.of(StreamEventKind.TEXT_DELTA)


async def test_declared_failure_after_finished_items_keeps_them() -> None:
    sse = [CREATED, delta("Whole."), message_done("Whole."), failed("server_error", "late")]
    async with LoopbackServer() as server:
        server.queue(Reply(sse=sse))
        async with probe(server) as provider:
            turn = await provider.chat(streamed())
    assert turn.content == "Whole."


async def test_hostile_events_are_survived() -> None:
    sse = [
        {"type": "response.output_text.delta", "delta": None},
        {"type": "response.output_text.delta", "item_id": 7, "delta": "Kept"},
        {"type": "response.output_item.done", "item": "not an item"},
        {"type": "response.output_item.added", "item": ["nope"]},
        {"type": "response.function_call_arguments.done", "item_id": "unknown"},
        {"type": "response.reasoning_summary_text.done", "summary_index": "x", "text": 3},
        {"type": "response.something.new", "whatever": True},
        ["a", "list"],
        {
            "type": "response.output_item.done",
            "output_index": "first",
            "item": {"type": "message", "content": [{"type": "output_text", "text": "Kept"}]},
        },
        {"type": "response.completed", "response": "not an object"},
    ]
    async with LoopbackServer() as server:
        server.queue(Reply(sse=sse))
        async with probe(server) as provider:
            turn = await provider.chat(streamed())
    assert turn.content == "Kept", "the id-less finished item is not doubled by its deltas"


async def test_failed_event_without_details_is_still_classified() -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(sse=[{"type": "response.failed", "response": None}]))
        async with probe(server) as provider:
            with pytest.raises(ProviderError) as info:
                await provider.chat(streamed())
    assert info.value.kind is ErrorKind.SERVER_ERROR
    assert "try again" in info.value.message


async def test_http_errors_are_classified_with_reset_and_no_secret() -> None:
    async with LoopbackServer() as server:
        server.queue(
            Reply(
                status=429,
                headers={"retry-after": "90"},
                body={"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}},
            ),
            Reply(status=503, body={"error": {"message": "Service Unavailable"}}),
            Reply(status=500, body={"error": {"message": "The server had an error"}}),
            Reply(status=401, body={"error": {"message": f"Incorrect API key {SECRET[:6]}..."}}),
        )
        errors = []
        async with probe(server) as provider:
            for _ in range(4):
                with pytest.raises(ProviderError) as info:
                    await provider.chat(streamed())
                errors.append(info.value)
    assert [e.kind for e in errors] == [
        ErrorKind.RATE_LIMIT,
        ErrorKind.OVERLOADED,
        ErrorKind.SERVER_ERROR,
        ErrorKind.AUTH,
    ]
    assert errors[0].retry_after_seconds == 90
    assert all(SECRET not in str(e) and SECRET not in repr(e) for e in errors)


async def test_non_json_events_and_done_sentinel_are_skipped() -> None:
    sse = ["not json", delta("ok"), message_done("ok"), completed(), "[DONE]"]
    async with LoopbackServer() as server:
        server.queue(Reply(sse=sse))
        async with probe(server) as provider:
            turn = await provider.chat(streamed())
    assert turn.content == "ok"


async def test_missing_key_is_a_clear_auth_error_before_any_request() -> None:
    async with LoopbackServer() as server:
        provider = Probe(SPEC, ProviderSettings(name="acme", base_url=server.url))
        async with provider:
            with pytest.raises(ProviderError) as info:
                await provider.chat(streamed())
    assert info.value.kind is ErrorKind.AUTH
    assert "ACME_API_KEY" in info.value.message
    assert server.requests == []
