"""OpenRouter: attribution headers, no effort field, vendor-prefixed models, the contract."""

from __future__ import annotations

import pytest
from fermix_core.messages import ImagePart, Message
from fermix_core.provider import ChatRequest, ErrorKind, ProviderError, ProviderSettings
from fermix_core.testing.contracts import ProviderContract, Scenario
from fermix_core.testing.loopback import LoopbackServer, RecordedRequest, Reply
from fermix_providers.openrouter.adapter import OpenRouterProvider
from fermix_providers.openrouter.plugin import SPEC

pytestmark = pytest.mark.anyio

SECRET = "sk-or-v1-test-secret"
PNG = bytes.fromhex("89504e470d0a1a0a")


def contract_reply(scenario: Scenario, request: RecordedRequest) -> Reply:
    """A Chat Completions backend for the provider contract, buffered or streamed."""
    body = request.json()
    if scenario is Scenario.ERROR:
        return Reply(
            status=502, body={"error": {"code": 502, "message": "Provider returned error"}}
        )
    answered = any(m["role"] == "tool" for m in body["messages"])
    if scenario is Scenario.TOOL_CALL and not answered:
        call = {"id": "call_c1", "type": "function", "function": {"name": "contract_echo"}}
        if body.get("stream"):
            return Reply(
                sse=[
                    {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, **call}]}}]},
                    {
                        "choices": [
                            {
                                "index": 0,
                                "delta": {
                                    "tool_calls": [
                                        {"index": 0, "function": {"arguments": '{"text":"ping"}'}}
                                    ]
                                },
                                "finish_reason": "tool_calls",
                            }
                        ]
                    },
                    "[DONE]",
                ]
            )
        call["function"]["arguments"] = '{"text": "ping"}'
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return Reply(body={"model": body["model"], "choices": [{"message": message}]})
    if body.get("stream"):
        return Reply(
            sse=[
                {"model": body["model"], "choices": [{"index": 0, "delta": {"content": "Hello"}}]},
                {
                    "choices": [
                        {"index": 0, "delta": {"content": " there."}, "finish_reason": "stop"}
                    ]
                },
                {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}},
                "[DONE]",
            ]
        )
    message = {"role": "assistant", "content": "Hello there."}
    return Reply(
        body={
            "model": body["model"],
            "choices": [{"message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2},
        }
    )


def make(server: LoopbackServer, **settings) -> OpenRouterProvider:
    settings.setdefault("api_key", SECRET)
    return OpenRouterProvider(
        SPEC, ProviderSettings(name="openrouter", base_url=server.url, **settings)
    )


class TestOpenRouterContract(ProviderContract):
    secret = SECRET

    @pytest.fixture(autouse=True)
    async def _backend(self):
        self.scenario = Scenario.TEXT
        async with LoopbackServer(lambda r: contract_reply(self.scenario, r)) as server:
            self.server = server
            yield

    def make_provider(self, scenario: Scenario) -> OpenRouterProvider:
        self.scenario = scenario
        return make(self.server)


class TestOpenRouterContractOnAFreeVariant(TestOpenRouterContract):
    """A routing variant of a catalog model keeps its vision; a stray model has none."""

    model = "anthropic/claude-sonnet-4.6:free"


async def test_attribution_headers_and_bearer_on_every_request() -> None:
    async with (
        LoopbackServer(lambda r: contract_reply(Scenario.TEXT, r)) as server,
        make(server) as provider,
    ):
        await provider.chat(ChatRequest(messages=[Message.user("a")]))
        await provider.chat(ChatRequest(messages=[Message.user("b")], stream=True))
    assert len(server.requests) == 2
    for sent in server.requests:
        assert sent.path == "/chat/completions"
        assert sent.header("http-referer") == "https://fermix.sh"
        assert sent.header("x-title") == "Fermix"
        assert sent.header("authorization") == f"Bearer {SECRET}"


async def test_no_reasoning_effort_field_ever() -> None:
    async with (
        LoopbackServer(lambda r: contract_reply(Scenario.TEXT, r)) as server,
        make(server, reasoning_effort="high") as provider,
    ):
        await provider.chat(ChatRequest(messages=[Message.user("a")], reasoning_effort="max"))
        await provider.chat(
            ChatRequest(messages=[Message.user("b")], reasoning_effort="low", stream=True)
        )
    for sent in server.requests:
        body = sent.json()
        assert "reasoning_effort" not in body
        assert "reasoning" not in body


async def test_vendor_prefixed_model_is_sent_as_configured() -> None:
    async with (
        LoopbackServer(lambda r: contract_reply(Scenario.TEXT, r)) as server,
        make(server, default_model="openai/gpt-5.5") as provider,
    ):
        turn = await provider.chat(ChatRequest(messages=[Message.user("a")]))
        await provider.chat(ChatRequest(messages=[Message.user("b")], model="x-ai/grok-4"))
    assert [r.json()["model"] for r in server.requests] == ["openai/gpt-5.5", "x-ai/grok-4"]
    assert turn.model == "openai/gpt-5.5"


async def test_vision_follows_the_catalog_per_model() -> None:
    image = ImagePart(media_type="image/png", data=PNG)
    async with (
        LoopbackServer(lambda r: contract_reply(Scenario.TEXT, r)) as server,
        make(server) as provider,
    ):
        assert provider.vision("anthropic/claude-opus-4.6")
        assert provider.vision("anthropic/claude-opus-4.6:nitro")
        assert not provider.vision("meta-llama/llama-3.3-70b-instruct")
        assert not provider.vision("someone/unknown-model"), "unknown models fail loud"
        with pytest.raises(ProviderError) as info:
            await provider.chat(
                ChatRequest(
                    messages=[Message.user("see", image)],
                    model="meta-llama/llama-3.3-70b-instruct",
                )
            )
    assert info.value.kind is ErrorKind.UNSUPPORTED_INPUT
    assert server.requests == []
