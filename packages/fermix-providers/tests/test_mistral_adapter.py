"""Mistral: strict-validator wire shape, nine-character tool-call ids, the contract."""

from __future__ import annotations

import re

import pytest
from fermix_core.messages import Message, ToolCall, ToolResult
from fermix_core.provider import ChatRequest, ErrorKind, ProviderError, ProviderSettings
from fermix_core.testing.contracts import ProviderContract, Scenario
from fermix_core.testing.loopback import LoopbackServer, RecordedRequest, Reply
from fermix_providers.mistral.adapter import MistralProvider, mistral_call_id
from fermix_providers.mistral.plugin import SPEC

pytestmark = pytest.mark.anyio

SECRET = "mistral-test-secret-key"
VALID = re.compile(r"[A-Za-z0-9]{9}")


def strict_reply(scenario: Scenario, request: RecordedRequest) -> Reply:
    """A backend as strict as Mistral's validator about the things the adapter controls."""
    body = request.json()
    if "stream_options" in body or "reasoning_effort" in body:
        bad = "stream_options" if "stream_options" in body else "reasoning_effort"
        detail = [
            {
                "type": "extra_forbidden",
                "loc": ["body", bad],
                "msg": "Extra inputs are not permitted",
            }
        ]
        return Reply(status=422, body={"object": "error", "message": {"detail": detail}})
    for message in body["messages"]:
        ids = [c["id"] for c in message.get("tool_calls", [])]
        if message["role"] == "tool":
            ids.append(message["tool_call_id"])
        if message.get("tool_calls") and "content" in message and not message["content"]:
            return Reply(
                status=400,
                body={
                    "object": "error",
                    "message": "Assistant message must have either content or tool_calls",
                },
            )
        for call_id in ids:
            if not VALID.fullmatch(call_id):
                text = f"Tool call id was {call_id} but must be a-z, A-Z, 0-9, with a length of 9."
                return Reply(status=400, body={"object": "error", "message": text})
    if scenario is Scenario.ERROR:
        return Reply(status=401, body={"message": "Unauthorized", "request_id": "r1"})
    answered = any(m["role"] == "tool" for m in body["messages"])
    if scenario is Scenario.TOOL_CALL and not answered:
        call = {
            "id": "D681PevKs",
            "function": {"name": "contract_echo", "arguments": '{"text": "ping"}'},
        }
        if body.get("stream"):
            # Mistral sends each call whole, usage on the last chunk, unasked.
            return Reply(
                sse=[
                    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
                    {
                        "choices": [
                            {
                                "index": 0,
                                "delta": {"tool_calls": [{**call, "index": 0}]},
                                "finish_reason": "tool_calls",
                            }
                        ],
                        "usage": {"prompt_tokens": 30, "completion_tokens": 9},
                    },
                    "[DONE]",
                ]
            )
        message = {"role": "assistant", "content": "", "tool_calls": [call]}
        return Reply(
            body={
                "model": body["model"],
                "choices": [{"message": message, "finish_reason": "tool_calls"}],
            }
        )
    if body.get("stream"):
        return Reply(
            sse=[
                {
                    "model": body["model"],
                    "choices": [{"index": 0, "delta": {"content": "Bonjour"}}],
                },
                {
                    "choices": [{"index": 0, "delta": {"content": " !"}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 8, "completion_tokens": 3},
                },
                "[DONE]",
            ]
        )
    message = {"role": "assistant", "content": "Bonjour !"}
    return Reply(
        body={
            "model": body["model"],
            "choices": [{"message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 8, "completion_tokens": 3},
        }
    )


def make(server: LoopbackServer, **settings) -> MistralProvider:
    settings.setdefault("api_key", SECRET)
    return MistralProvider(SPEC, ProviderSettings(name="mistral", base_url=server.url, **settings))


class TestMistralContract(ProviderContract):
    secret = SECRET

    @pytest.fixture(autouse=True)
    async def _backend(self):
        self.scenario = Scenario.TEXT
        async with LoopbackServer(lambda r: strict_reply(self.scenario, r)) as server:
            self.server = server
            yield

    def make_provider(self, scenario: Scenario) -> MistralProvider:
        self.scenario = scenario
        return make(self.server)


def test_call_ids_map_stably_onto_nine_alphanumerics() -> None:
    assert mistral_call_id("D681PevKs") == "D681PevKs"
    mapped = mistral_call_id("call_abc123_from_openai")
    assert VALID.fullmatch(mapped)
    assert mistral_call_id("call_abc123_from_openai") == mapped, "stable across replays"
    others = {mistral_call_id(f"toolu_{i:04d}") for i in range(500)}
    assert len(others) == 500
    assert all(VALID.fullmatch(i) for i in others)


async def test_foreign_history_is_accepted_and_calls_still_pair_up() -> None:
    """History written by another provider (after a failover) replays cleanly."""
    foreign = [
        ToolCall(id="toolu_01A09q90qw90lq917835lq9", name="contract_echo", arguments={"text": "a"}),
        ToolCall(id="call_Xy_2", name="contract_echo", arguments={"text": "b"}),
    ]
    history = [
        Message.user("echo twice"),
        Message.assistant("", tool_calls=foreign),
        Message.tool(ToolResult(call_id=foreign[0].id, name="contract_echo", content="a")),
        Message.tool(ToolResult(call_id=foreign[1].id, name="contract_echo", content="b")),
    ]
    async with (
        LoopbackServer(lambda r: strict_reply(Scenario.TEXT, r)) as server,
        make(server) as provider,
    ):
        turn = await provider.chat(ChatRequest(messages=history, stream=True))
    assert turn.content == "Bonjour !"
    messages = server.requests[0].json()["messages"]
    sent_ids = [c["id"] for c in messages[1]["tool_calls"]]
    assert "content" not in messages[1]
    assert [messages[2]["tool_call_id"], messages[3]["tool_call_id"]] == sent_ids
    assert len(set(sent_ids)) == 2


async def test_no_stream_options_no_effort_no_attribution_and_usage_arrives_anyway() -> None:
    async with (
        LoopbackServer(lambda r: strict_reply(Scenario.TEXT, r)) as server,
        make(server, reasoning_effort="high") as provider,
    ):
        turn = await provider.chat(
            ChatRequest(messages=[Message.user("salut")], stream=True, reasoning_effort="low")
        )
    [sent] = server.requests
    body = sent.json()
    assert body["stream"] is True
    assert "stream_options" not in body
    assert "reasoning_effort" not in body
    assert sent.header("authorization") == f"Bearer {SECRET}"
    assert sent.header("http-referer") is None
    assert sent.header("x-title") is None
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (8, 3)


async def test_validation_errors_quote_the_nested_sentence() -> None:
    detail = [
        {"type": "missing", "loc": ["body", "messages", 0, "content"], "msg": "Field required"}
    ]
    async with LoopbackServer() as server:
        server.queue(Reply(status=422, body={"object": "error", "message": {"detail": detail}}))
        async with make(server) as provider:
            with pytest.raises(ProviderError) as info:
                await provider.chat(ChatRequest(messages=[Message.user("x")]))
    assert info.value.kind is ErrorKind.INVALID_REQUEST
    assert info.value.message == "body.messages.0.content: Field required"


async def test_the_strict_backend_rejects_what_the_plain_wire_would_send() -> None:
    """Guards the test backend itself: without Mistral's rules the same history is refused."""
    from fermix_providers.wires.chat_completions import ChatCompletionsProvider

    call = ToolCall(id="call_Xy_2", name="contract_echo", arguments={"text": "b"})
    history = [
        Message.user("echo"),
        Message.assistant(tool_calls=[call]),
        Message.tool(ToolResult(call_id=call.id, name="contract_echo", content="b")),
    ]
    async with LoopbackServer(lambda r: strict_reply(Scenario.TEXT, r)) as server:
        plain = ChatCompletionsProvider(
            SPEC, ProviderSettings(name="mistral", base_url=server.url, api_key=SECRET)
        )
        async with plain:
            with pytest.raises(ProviderError) as info:
                await plain.chat(ChatRequest(messages=history))
            with pytest.raises(ProviderError) as streamed:
                await plain.chat(ChatRequest(messages=[Message.user("x")], stream=True))
    assert "Tool call id was call_Xy_2" in info.value.message
    assert streamed.value.message == "body.stream_options: Extra inputs are not permitted"
