"""Ollama: keyless requests, the /v1 base, the long receive timeout, vision by family."""

from __future__ import annotations

import pytest
from fermix_core.messages import ImagePart, Message
from fermix_core.provider import ChatRequest, ErrorKind, ProviderError, ProviderSettings
from fermix_core.testing.contracts import ProviderContract, Scenario
from fermix_core.testing.loopback import LoopbackServer, RecordedRequest, Reply
from fermix_providers.http import Timeouts
from fermix_providers.ollama.adapter import RECEIVE_TIMEOUT_SECONDS, OllamaProvider
from fermix_providers.ollama.plugin import SPEC

pytestmark = pytest.mark.anyio

PNG = bytes.fromhex("89504e470d0a1a0a")


def ollama_reply(scenario: Scenario, request: RecordedRequest) -> Reply:
    """Ollama's compatible endpoint: 404 off /v1, OpenAI-shaped answers on it."""
    if not request.path.startswith("/v1/"):
        return Reply(status=404, body="404 page not found")
    body = request.json()
    if scenario is Scenario.ERROR:
        return Reply(
            status=404,
            body={
                "error": {
                    "message": f'model "{body["model"]}" not found, try pulling it first',
                    "type": "api_error",
                }
            },
        )
    answered = any(m["role"] == "tool" for m in body["messages"])
    if scenario is Scenario.TOOL_CALL and not answered:
        call = {
            "id": "call_9x1",
            "index": 0,
            "type": "function",
            "function": {"name": "contract_echo", "arguments": '{"text":"ping"}'},
        }
        if body.get("stream"):
            return Reply(
                sse=[
                    {
                        "model": body["model"],
                        "choices": [
                            {
                                "index": 0,
                                "delta": {"role": "assistant", "content": "", "tool_calls": [call]},
                            }
                        ],
                    },
                    {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
                    "[DONE]",
                ]
            )
        message = {"role": "assistant", "content": "", "tool_calls": [call]}
        return Reply(
            body={
                "model": body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
            }
        )
    if body.get("stream"):
        return Reply(
            sse=[
                {
                    "model": body["model"],
                    "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}}],
                },
                {
                    "choices": [
                        {"index": 0, "delta": {"content": " from local."}, "finish_reason": "stop"}
                    ]
                },
                {"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 4}},
                "[DONE]",
            ]
        )
    message = {"role": "assistant", "content": "Hi from local."}
    return Reply(
        body={
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 4},
        }
    )


def make(base_url: str, **settings) -> OllamaProvider:
    return OllamaProvider(SPEC, ProviderSettings(name="ollama", base_url=base_url, **settings))


class TestOllamaContract(ProviderContract):
    """The default model (qwen3) is text-only, so the contract's image case must fail loud."""

    @pytest.fixture(autouse=True)
    async def _backend(self):
        self.scenario = Scenario.TEXT
        async with LoopbackServer(lambda r: ollama_reply(self.scenario, r)) as server:
            self.server = server
            yield

    def make_provider(self, scenario: Scenario) -> OllamaProvider:
        self.scenario = scenario
        return make(f"{self.server.url}/v1")


class TestOllamaVisionContract(TestOllamaContract):
    """A sized tag of a vision family sees images."""

    model = "gemma3:12b"


async def test_no_authorization_header_even_with_a_key_configured() -> None:
    async with (
        LoopbackServer(lambda r: ollama_reply(Scenario.TEXT, r)) as server,
        make(f"{server.url}/v1", api_key="should-never-be-sent") as provider,
    ):
        await provider.chat(ChatRequest(messages=[Message.user("a")]))
        await provider.chat(ChatRequest(messages=[Message.user("b")], stream=True))
    for sent in server.requests:
        assert sent.header("authorization") is None
        assert "should-never-be-sent" not in repr(sent.headers)
        assert "reasoning_effort" not in sent.json()


async def test_a_bare_server_address_gets_the_v1_path() -> None:
    async with (
        LoopbackServer(lambda r: ollama_reply(Scenario.TEXT, r)) as server,
        make(server.url) as provider,
    ):
        turn = await provider.chat(ChatRequest(messages=[Message.user("a")]))
    assert server.requests[0].path == "/v1/chat/completions"
    assert turn.content == "Hi from local."
    assert turn.model == "qwen3"


def test_default_base_url_and_receive_timeout() -> None:
    provider = OllamaProvider(SPEC, ProviderSettings(name="ollama"))
    assert provider.base_url == "http://localhost:11434/v1"
    assert provider.timeouts.read == RECEIVE_TIMEOUT_SECONDS == 300.0
    short = Timeouts(read=1.0)
    assert make("http://h:11434/v1", extra={"timeouts": short}).timeouts is short


def test_vision_follows_the_catalog_by_family() -> None:
    provider = make("http://localhost:11434/v1")
    assert provider.vision("llama3.2-vision")
    assert provider.vision("gemma3:27b")
    assert provider.vision("gemma3:latest")
    assert not provider.vision("qwen3:8b")
    assert not provider.vision("qwen3")
    assert not provider.vision("some-unknown-model")


async def test_images_by_url_are_refused_before_sending() -> None:
    async with (
        LoopbackServer(lambda r: ollama_reply(Scenario.TEXT, r)) as server,
        make(server.url) as provider,
    ):
        by_url = ImagePart(media_type="image/png", url="https://x.test/a.png")
        with pytest.raises(ProviderError) as info:
            await provider.chat(ChatRequest(messages=[Message.user("see", by_url)], model="gemma3"))
        inline = ImagePart(media_type="image/png", data=PNG)
        await provider.chat(ChatRequest(messages=[Message.user("see", inline)], model="gemma3"))
    assert info.value.kind is ErrorKind.UNSUPPORTED_INPUT
    assert "inline" in info.value.message
    [sent] = server.requests
    assert sent.json()["messages"][0]["content"][1]["image_url"]["url"].startswith(
        "data:image/png;base64,"
    )


async def test_unpulled_model_error_quotes_ollama() -> None:
    async with (
        LoopbackServer(lambda r: ollama_reply(Scenario.ERROR, r)) as server,
        make(server.url) as provider,
    ):
        with pytest.raises(ProviderError) as info:
            await provider.chat(ChatRequest(messages=[Message.user("a")], model="nope"))
    assert info.value.kind is ErrorKind.INVALID_REQUEST
    assert "try pulling it first" in info.value.message
