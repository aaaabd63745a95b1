"""The ``openai`` provider over a real loopback socket: contract, efforts, images, routing."""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator

import pytest
from fermix_core.messages import ImagePart, Message, ToolCall, ToolResult
from fermix_core.provider import ChatRequest, ErrorKind, ProviderError, ProviderSettings
from fermix_core.testing.contracts import ProviderContract, Scenario
from fermix_core.testing.loopback import LoopbackServer, RecordedRequest, Reply
from fermix_providers.http import Timeouts
from fermix_providers.openai.adapter import OpenAIProvider
from fermix_providers.openai.plugin import SPEC

pytestmark = pytest.mark.anyio

SECRET = "sk-openai-secret-999"
PNG = b"\x89PNG\r\n\x1a\n-bytes"
FAST = Timeouts(connect=2.0, read=0.5, write=2.0, pool=2.0)


def settings(server: LoopbackServer, **kw) -> ProviderSettings:
    extra = {"timeouts": FAST, **kw.pop("extra", {})}
    return ProviderSettings(
        name="openai", base_url=server.url, api_key=kw.pop("api_key", SECRET), extra=extra, **kw
    )


def text_reply(request: RecordedRequest, text: str = "Hello from the loopback.") -> Reply:
    """Answer in the form the request asked for: SSE when streaming, JSON otherwise."""
    item = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }
    response = {"id": "resp_1", "status": "completed", "model": "gpt-5.6", "output": [item]}
    if not request.json().get("stream"):
        return Reply(body=response)
    return Reply(
        sse=[
            {"type": "response.output_text.delta", "item_id": "msg_1", "delta": text[:5]},
            {"type": "response.output_text.delta", "item_id": "msg_1", "delta": text[5:]},
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {"type": "response.completed", "response": {**response, "output": []}},
        ]
    )


def call_reply(request: RecordedRequest) -> Reply:
    item = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_echo",
        "name": "contract_echo",
        "arguments": '{"text": "ping"}',
    }
    response = {"id": "resp_2", "status": "completed", "model": "gpt-5.6", "output": [item]}
    if not request.json().get("stream"):
        return Reply(body=response)
    return Reply(
        sse=[
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {"type": "response.completed", "response": response},
        ]
    )


def backend(scenario: Scenario):
    def handle(request: RecordedRequest) -> Reply:
        if scenario == Scenario.ERROR:
            return Reply(status=500, body={"error": {"message": "The server had an error"}})
        items = request.json().get("input", [])
        answered = any(i.get("type") == "function_call_output" for i in items)
        if scenario == Scenario.TOOL_CALL and not answered:
            return call_reply(request)
        return text_reply(request)

    return handle


class TestOpenAIContract(ProviderContract):
    secret = SECRET

    @pytest.fixture(autouse=True)
    async def _servers(self) -> AsyncIterator[None]:
        self.servers: list[LoopbackServer] = []
        yield
        for server in self.servers:
            await server.__aexit__(None, None, None)

    async def make_provider(self, scenario: Scenario) -> OpenAIProvider:
        server = LoopbackServer(backend(scenario))
        await server.__aenter__()
        self.servers.append(server)
        return OpenAIProvider(SPEC, settings(server))


def request(*messages: Message, **kw) -> ChatRequest:
    return ChatRequest(messages=list(messages) or [Message.user("hi")], **kw)


async def test_default_wire_is_responses_with_bearer_key() -> None:
    async with (
        LoopbackServer(text_reply) as server,
        OpenAIProvider(SPEC, settings(server)) as provider,
    ):
        turn = await provider.chat(request(Message.system("Be brief."), Message.user("hi")))
    assert provider.wire == "responses"
    assert turn.content == "Hello from the loopback."
    [sent] = server.requests
    assert sent.path == "/responses"
    assert sent.header("authorization") == f"Bearer {SECRET}"
    body = sent.json()
    assert body["model"] == "gpt-5.6"
    assert body["instructions"] == "Be brief."
    assert "reasoning" not in body, "no effort configured, none requested: server default"
    assert "store" not in body


@pytest.mark.parametrize(
    ("model", "configured", "requested", "sent"),
    [
        ("gpt-5.6", None, "max", "max"),
        ("gpt-5.4", None, "max", "xhigh"),  # the model's ceiling
        ("gpt-5.4-mini", "high", None, "high"),  # configured default
        ("gpt-5.5", "high", "none", "none"),  # the request wins
        ("gpt-9-unknown", None, "max", "max"),  # no catalog ceiling: passed through
    ],
)
async def test_effort_mapping(model, configured, requested, sent) -> None:
    async with LoopbackServer(text_reply) as server:
        provider = OpenAIProvider(SPEC, settings(server, reasoning_effort=configured))
        async with provider:
            await provider.chat(request(model=model, reasoning_effort=requested))
    reasoning = server.requests[0].json()["reasoning"]
    assert reasoning == {"effort": sent}, "no summary is requested on the Platform API"


async def test_bogus_configured_effort_is_an_invalid_request() -> None:
    async with LoopbackServer(text_reply) as server:
        provider = OpenAIProvider(SPEC, settings(server, reasoning_effort="turbo"))
        async with provider:
            with pytest.raises(ProviderError) as info:
                await provider.chat(request())
    assert info.value.kind is ErrorKind.INVALID_REQUEST
    assert server.requests == []


async def test_images_inbound_and_in_tool_results_reach_the_wire() -> None:
    image = ImagePart(media_type="image/png", data=PNG)
    shot = ToolResult(call_id="call_1", name="browser", content=["Screenshot:", image])
    history = [
        Message.user("What is this?", image),
        Message.assistant(tool_calls=[ToolCall(id="call_1", name="browser", arguments={})]),
        Message.tool(shot),
    ]
    async with (
        LoopbackServer(text_reply) as server,
        OpenAIProvider(SPEC, settings(server)) as provider,
    ):
        await provider.chat(request(*history, stream=True))
    items = server.requests[0].json()["input"]
    assert items[0]["content"][1] == {
        "type": "input_image",
        "image_url": image.data_url(),
    }
    assert items[2]["type"] == "function_call_output"
    assert "image" in items[2]["output"]
    assert items[3]["role"] == "user"
    assert items[3]["content"][-1]["image_url"] == image.data_url()


async def test_images_to_a_model_without_vision_fail_before_sending() -> None:
    image = ImagePart(media_type="image/png", data=PNG)
    async with (
        LoopbackServer(text_reply) as server,
        OpenAIProvider(SPEC, settings(server)) as provider,
    ):
        with pytest.raises(ProviderError) as info:
            await provider.chat(request(Message.user("see", image), model="text-only-9"))
    assert info.value.kind is ErrorKind.UNSUPPORTED_INPUT
    assert server.requests == []


async def test_buffered_stall_is_a_timeout_that_never_claims_pre_response() -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(stall=True))
        async with OpenAIProvider(SPEC, settings(server)) as provider:
            with pytest.raises(ProviderError) as info:
                await provider.chat(request())
    assert info.value.kind is ErrorKind.TIMEOUT
    assert info.value.pre_response is False


async def test_missing_key_names_the_env_var() -> None:
    async with (
        LoopbackServer(text_reply) as server,
        OpenAIProvider(SPEC, settings(server, api_key=None)) as provider,
    ):
        with pytest.raises(ProviderError) as info:
            await provider.chat(request())
    assert info.value.kind is ErrorKind.AUTH
    assert "OPENAI_API_KEY" in info.value.message


async def test_unknown_wire_is_refused_with_the_choices() -> None:
    with pytest.raises(ProviderError) as info:
        OpenAIProvider(SPEC, ProviderSettings(name="openai", api_key=SECRET, wire="grpc"))
    assert "responses, chat_completions" in info.value.message


@pytest.mark.skipif(
    importlib.util.find_spec("fermix_providers.wires.chat_completions") is None,
    reason="the Chat Completions wire is not installed",
)
async def test_chat_completions_wire_delegates_and_shares_one_client() -> None:
    completion = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-5.6",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Via chat completions."},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
    }
    async with LoopbackServer() as server:
        server.queue(Reply(body=completion))
        provider = OpenAIProvider(SPEC, settings(server, wire="chat_completions"))
        assert provider.delegate is not None
        assert provider.client is provider.delegate.client
        async with provider:
            turn = await provider.chat(request())
        assert provider.client.is_closed
    assert provider.name == "openai"
    assert turn.content == "Via chat completions."
    [sent] = server.requests
    assert sent.path == "/chat/completions"
    assert sent.header("authorization") == f"Bearer {SECRET}"
