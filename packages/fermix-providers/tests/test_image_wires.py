"""Images on every wire, over real loopback sockets: a large real picture kept as a history
file reaches each API in that API's own image shape, downscaled to the provider's limits.

* Chat Completions (Ollama here): ``{"type": "image_url", "image_url": {"url": "data:…"}}``
* Responses (OpenAI): ``{"type": "input_image", "image_url": "data:…"}``
* Anthropic Messages: ``{"type": "image", "source": {"type": "base64", "media_type", "data"}}``
"""

from __future__ import annotations

import base64
import io
import os
from pathlib import Path
from typing import Any

import pytest
from fermix_core.messages import ImagePart, Message
from fermix_core.provider import ChatRequest, ErrorKind, ProviderError, ProviderSettings
from fermix_core.testing.loopback import LoopbackServer, RecordedRequest, Reply
from fermix_providers.anthropic.adapter import AnthropicProvider
from fermix_providers.anthropic.plugin import SPEC as ANTHROPIC
from fermix_providers.ollama.adapter import OllamaProvider
from fermix_providers.ollama.plugin import SPEC as OLLAMA
from fermix_providers.openai.adapter import OpenAIProvider
from fermix_providers.openai.plugin import SPEC as OPENAI

PIL = pytest.importorskip("PIL.Image", reason="Pillow is a fermix-core dependency")

pytestmark = pytest.mark.anyio


def photo(path: Path, size: tuple[int, int] = (3000, 2000)) -> Path:
    """A real, noisy JPEG (noise keeps it from compressing to nothing)."""
    width, height = size
    image = PIL.frombytes("RGB", size, os.urandom(width * height * 3))
    image.save(path, format="JPEG", quality=95)
    return path


def decoded(data: str) -> Any:
    return PIL.open(io.BytesIO(base64.b64decode(data)))


def chat_reply(request: RecordedRequest) -> Reply:
    message = {"role": "assistant", "content": "A photo of noise."}
    return Reply(
        body={
            "id": "c1",
            "object": "chat.completion",
            "model": request.json()["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 4},
        }
    )


def responses_reply(request: RecordedRequest) -> Reply:
    item = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "A photo of noise."}],
    }
    return Reply(body={"id": "r1", "status": "completed", "model": "gpt-5.6", "output": [item]})


def anthropic_reply(request: RecordedRequest) -> Reply:
    return Reply(
        body={
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": request.json()["model"],
            "content": [{"type": "text", "text": "A photo of noise."}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 10, "output_tokens": 4},
        }
    )


def history(picture: Path) -> list[Message]:
    part = ImagePart(media_type="image/jpeg", path=str(picture))
    return [Message.user("What is this?", part)]


async def test_chat_completions_sends_a_downscaled_data_url(tmp_path) -> None:
    picture = photo(tmp_path / "big.jpg")
    async with LoopbackServer(chat_reply) as server:
        settings = ProviderSettings(name="ollama", base_url=server.url)
        async with OllamaProvider(OLLAMA, settings) as provider:
            turn = await provider.chat(ChatRequest(messages=history(picture), model="gemma3"))
    assert turn.content == "A photo of noise."
    content = server.requests[0].json()["messages"][0]["content"]
    assert content[0] == {"type": "text", "text": "What is this?"}
    assert content[1]["type"] == "image_url"
    url = content[1]["image_url"]["url"]
    prefix, _, data = url.partition(",")
    assert prefix == "data:image/jpeg;base64"
    image = decoded(data)
    assert max(image.size) == OllamaProvider.image_max_edge == 2048  # from 3000
    assert image.size[0] / image.size[1] == pytest.approx(1.5, rel=0.01)


async def test_responses_sends_a_downscaled_input_image(tmp_path) -> None:
    picture = photo(tmp_path / "big.jpg")
    async with LoopbackServer(responses_reply) as server:
        settings = ProviderSettings(name="openai", base_url=server.url, api_key="sk-test")
        async with OpenAIProvider(OPENAI, settings) as provider:
            await provider.chat(ChatRequest(messages=history(picture), model="gpt-5.6"))
    (item,) = server.requests[0].json()["input"]
    text, image = item["content"]
    assert text == {"type": "input_text", "text": "What is this?"}
    assert set(image) == {"type", "image_url"} and image["type"] == "input_image"
    prefix, _, data = image["image_url"].partition(",")
    assert prefix == "data:image/jpeg;base64"
    assert max(decoded(data).size) == 2048


async def test_anthropic_sends_a_base64_source_within_its_limits(tmp_path) -> None:
    picture = photo(tmp_path / "big.jpg", size=(4000, 3000))
    async with LoopbackServer(anthropic_reply) as server:
        settings = ProviderSettings(
            name="anthropic", base_url=f"{server.url}/v1", api_key="sk-ant-test"
        )
        async with AnthropicProvider(ANTHROPIC, settings) as provider:
            await provider.chat(ChatRequest(messages=history(picture), model="claude-sonnet-4-6"))
    (message,) = server.requests[0].json()["messages"]
    image = next(block for block in message["content"] if block["type"] == "image")
    source = image["source"]
    assert source["type"] == "base64" and source["media_type"] == "image/jpeg"
    assert len(source["data"]) <= 5 * 1024 * 1024  # Anthropic's cap is on the base64 text
    assert max(decoded(source["data"]).size) == 1568


async def test_a_small_image_is_sent_byte_for_byte(tmp_path) -> None:
    small = tmp_path / "small.png"
    PIL.new("RGB", (64, 48), (200, 30, 30)).save(small, format="PNG")
    async with LoopbackServer(chat_reply) as server:
        settings = ProviderSettings(name="ollama", base_url=server.url)
        async with OllamaProvider(OLLAMA, settings) as provider:
            part = ImagePart(media_type="image/png", path=str(small))
            await provider.chat(
                ChatRequest(messages=[Message.user("colour?", part)], model="gemma3")
            )
    url = server.requests[0].json()["messages"][0]["content"][1]["image_url"]["url"]
    assert url == f"data:image/png;base64,{base64.b64encode(small.read_bytes()).decode()}"


async def test_a_model_without_vision_is_named_and_nothing_is_sent(tmp_path) -> None:
    picture = photo(tmp_path / "big.jpg", size=(200, 100))
    async with LoopbackServer(chat_reply) as server:
        settings = ProviderSettings(name="ollama", base_url=server.url, default_model="qwen3")
        async with OllamaProvider(OLLAMA, settings) as provider:
            with pytest.raises(ProviderError) as info:
                await provider.chat(ChatRequest(messages=history(picture)))
    assert info.value.kind is ErrorKind.UNSUPPORTED_INPUT
    assert "qwen3 cannot read images" in info.value.message
    assert "vision_models" in info.value.message
    assert server.requests == []


async def test_vision_models_opens_a_catalog_text_model_to_images(tmp_path) -> None:
    picture = photo(tmp_path / "big.jpg", size=(200, 100))
    async with LoopbackServer(chat_reply) as server:
        settings = ProviderSettings(
            name="ollama",
            base_url=server.url,
            default_model="llava:13b",
            vision_models=("llava:13b",),
        )
        async with OllamaProvider(OLLAMA, settings) as provider:
            await provider.chat(ChatRequest(messages=history(picture)))
    assert server.requests[0].json()["messages"][0]["content"][1]["type"] == "image_url"


async def test_earlier_images_become_a_note_for_a_text_model(tmp_path) -> None:
    """One old picture must not lock a conversation out of a text-only model."""
    picture = photo(tmp_path / "old.jpg", size=(200, 100))
    earlier = history(picture)
    later = [*earlier, Message.assistant("Noise."), Message.user("Thanks, and 2+2?")]
    async with LoopbackServer(chat_reply) as server:
        settings = ProviderSettings(name="ollama", base_url=server.url, default_model="qwen3")
        async with OllamaProvider(OLLAMA, settings) as provider:
            await provider.chat(ChatRequest(messages=later))
    first = server.requests[0].json()["messages"][0]
    assert isinstance(first["content"], str)  # text only: no image part reached the wire
    assert "What is this?" in first["content"]
    assert "[an earlier image is not shown: qwen3 cannot read images]" in first["content"]
