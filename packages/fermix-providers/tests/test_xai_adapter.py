"""The ``xai`` provider over a real loopback socket: efforts, schema enums, both auth modes."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import pytest
from fermix_core.messages import ImagePart, Message, ToolDefinition
from fermix_core.provider import ChatRequest, ErrorKind, ProviderError, ProviderSettings
from fermix_core.specs import ModelInfo
from fermix_core.testing.contracts import ProviderContract, Scenario
from fermix_core.testing.loopback import LoopbackServer, RecordedRequest, Reply
from fermix_providers.http import Timeouts
from fermix_providers.xai.adapter import XAIProvider, takes_effort
from fermix_providers.xai.plugin import SPEC

pytestmark = pytest.mark.anyio

SECRET = "xai-secret-key-777"
FAST = Timeouts(connect=2.0, read=0.5, write=2.0, pool=2.0)


class FakeTokens:
    def __init__(self, *tokens: str) -> None:
        self.tokens = list(tokens)
        self.current = self.tokens.pop(0)
        self.refreshes = 0

    async def access_token(self) -> str:
        return self.current

    async def refresh(self) -> str:
        self.refreshes += 1
        self.current = self.tokens.pop(0)
        return self.current


def xai(server: LoopbackServer, **kw) -> XAIProvider:
    extra = {"timeouts": FAST, **kw.pop("extra", {})}
    kw.setdefault("api_key", SECRET)
    return XAIProvider(SPEC, ProviderSettings(name="xai", base_url=server.url, extra=extra, **kw))


def oauth(server: LoopbackServer, tokens: FakeTokens) -> XAIProvider:
    return xai(server, api_key=None, auth_mode="oauth", extra={"token_source": tokens})


def answer(request: RecordedRequest, text: str = "Grok here.") -> Reply:
    item = {"type": "message", "id": "m", "content": [{"type": "output_text", "text": text}]}
    response = {"id": "r", "status": "completed", "model": "grok-4", "output": [item]}
    if not request.json().get("stream"):
        return Reply(body=response)
    return Reply(
        sse=[
            {"type": "response.output_text.delta", "item_id": "m", "delta": text},
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {"type": "response.completed", "response": response},
        ]
    )


def backend(scenario: Scenario):
    def handle(request: RecordedRequest) -> Reply:
        if scenario == Scenario.ERROR:
            return Reply(status=503, body={"error": "Service temporarily unavailable"})
        answered = any(i.get("type") == "function_call_output" for i in request.json()["input"])
        if scenario == Scenario.TOOL_CALL and not answered:
            call = {
                "type": "function_call",
                "id": "fc",
                "call_id": "call_x",
                "name": "contract_echo",
                "arguments": '{"text":"ping"}',
            }
            return Reply(body={"id": "r", "status": "completed", "output": [call]})
        return answer(request)

    return handle


class TestXAIContract(ProviderContract):
    secret = SECRET

    @pytest.fixture(autouse=True)
    async def _servers(self) -> AsyncIterator[None]:
        self.servers: list[LoopbackServer] = []
        yield
        for server in self.servers:
            await server.__aexit__(None, None, None)

    async def make_provider(self, scenario: Scenario) -> XAIProvider:
        server = LoopbackServer(backend(scenario))
        await server.__aenter__()
        self.servers.append(server)
        return xai(server)


@pytest.mark.parametrize(
    ("model", "effort", "sent"),
    [
        ("grok-4", "high", None),  # Grok 4 rejects the parameter
        ("grok-4-1-fast-reasoning", "low", None),  # reasoning chosen by variant
        ("grok-4-1-fast-non-reasoning", "low", None),
        ("grok-code-fast-1", "medium", None),
        ("grok-3-mini", "high", "high"),  # documented as effort-configurable
        ("grok-4.3", "none", "none"),  # unknown to the catalog: passed through
        ("grok-4.3", "xhigh", "high"),  # above xAI's ceiling: clamped
    ],
)
async def test_effort_is_sent_only_to_models_that_take_it(model, effort, sent) -> None:
    async with LoopbackServer(answer) as server, xai(server) as provider:
        await provider.chat(
            ChatRequest(messages=[Message.user("hi")], model=model, reasoning_effort=effort)
        )
    body = server.requests[0].json()
    if sent is None:
        assert "reasoning" not in body
    else:
        assert body["reasoning"] == {"effort": sent}


def test_takes_effort_trusts_a_catalog_ceiling() -> None:
    spec = dataclasses.replace(
        SPEC, models=(ModelInfo("grok-4", 256_000, vision=True, max_effort="high"),)
    )
    assert takes_effort(spec, "grok-4")
    assert not takes_effort(SPEC, "grok-4")
    assert not takes_effort(SPEC, "grok-4-0709")


async def test_slash_enum_values_are_stripped_from_tool_schemas() -> None:
    tool = ToolDefinition(
        name="route",
        description="Pick a model.",
        parameters={
            "type": "object",
            "properties": {
                "model": {"type": "string", "enum": ["grok-4", "x-ai/grok-4", "openai/gpt-5"]},
                "mode": {"type": "string", "enum": ["a/b"]},
            },
        },
    )
    async with LoopbackServer(answer) as server, xai(server) as provider:
        await provider.chat(ChatRequest(messages=[Message.user("hi")], tools=[tool]))
    props = server.requests[0].json()["tools"][0]["parameters"]["properties"]
    assert props["model"]["enum"] == ["grok-4"]
    assert props["mode"] == {"type": "string"}
    assert tool.parameters["properties"]["model"]["enum"][1] == "x-ai/grok-4", "not mutated"


async def test_api_key_mode_sends_the_key_and_system_turns_stay_system() -> None:
    history = [Message.system("Be Grok."), Message.user("hi"), Message.system("Mid-chat note.")]
    async with LoopbackServer(answer) as server, xai(server) as provider:
        turn = await provider.chat(ChatRequest(messages=history, stream=True))
    assert turn.content == "Grok here."
    [sent] = server.requests
    assert sent.path == "/responses"
    assert sent.header("authorization") == f"Bearer {SECRET}"
    body = sent.json()
    assert body["instructions"] == "Be Grok."
    assert body["input"][1]["role"] == "system"


async def test_images_reach_vision_models_and_fail_loud_elsewhere() -> None:
    image = ImagePart(media_type="image/png", data=b"\x89PNG-bytes")
    async with LoopbackServer(answer) as server, xai(server) as provider:
        await provider.chat(ChatRequest(messages=[Message.user("see", image)]))
        with pytest.raises(ProviderError) as info:
            await provider.chat(
                ChatRequest(messages=[Message.user("see", image)], model="grok-code-fast-1")
            )
    assert info.value.kind is ErrorKind.UNSUPPORTED_INPUT
    assert len(server.requests) == 1
    content = server.requests[0].json()["input"][0]["content"]
    assert content[1]["type"] == "input_image"


async def test_oauth_mode_uses_the_grok_login() -> None:
    tokens = FakeTokens("grok-token")
    async with LoopbackServer(answer) as server, oauth(server, tokens) as provider:
        await provider.chat(ChatRequest(messages=[Message.user("hi")]))
    assert server.requests[0].header("authorization") == "Bearer grok-token"


async def test_oauth_403_means_no_api_access_and_is_not_refreshed() -> None:
    tokens = FakeTokens("grok-token", "never-used")
    async with LoopbackServer() as server:
        server.queue(Reply(status=403, body={"error": "Forbidden: no API access"}))
        async with oauth(server, tokens) as provider:
            with pytest.raises(ProviderError) as info:
                await provider.chat(ChatRequest(messages=[Message.user("hi")]))
    error = info.value
    assert error.kind is ErrorKind.AUTH
    assert error.status == 403
    assert "Grok subscription does not include API access" in error.message
    assert 'auth_mode = "api_key"' in error.message
    assert tokens.refreshes == 0
    assert len(server.requests) == 1
    assert "grok-token" not in str(error)


async def test_oauth_401_refreshes_once_then_gives_up_as_oauth() -> None:
    tokens = FakeTokens("a", "b")
    refused = Reply(status=401, body={"error": "unauthorized"})
    async with LoopbackServer() as server:
        server.queue(refused, refused)
        async with oauth(server, tokens) as provider:
            with pytest.raises(ProviderError) as info:
                await provider.chat(ChatRequest(messages=[Message.user("hi")]))
    assert info.value.kind is ErrorKind.OAUTH
    assert tokens.refreshes == 1
    assert "fermix auth login --provider xai" in info.value.message


async def test_api_key_403_stays_a_plain_auth_error() -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(status=403, body={"error": "The API key is blocked"}))
        async with xai(server) as provider:
            with pytest.raises(ProviderError) as info:
                await provider.chat(ChatRequest(messages=[Message.user("hi")]))
    assert info.value.kind is ErrorKind.AUTH
    assert info.value.message == "The API key is blocked"
