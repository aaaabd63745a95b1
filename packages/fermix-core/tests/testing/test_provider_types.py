from __future__ import annotations

import pickle

import pytest
from fermix_core.messages import ImagePart, Message, ToolResult, Turn
from fermix_core.provider import (
    ChatRequest,
    ErrorKind,
    Provider,
    ProviderError,
    StreamEvent,
    StreamEventKind,
)
from pydantic import ValidationError

pytestmark = pytest.mark.anyio

PNG = b"\x89PNG\r\n\x1a\n"


def test_chat_request_defaults() -> None:
    request = ChatRequest(messages=[Message.user("hi")])
    assert request.initial is True
    assert request.inner_retry is True
    assert request.stream is False
    assert request.model is None
    assert request.tools == []


def test_chat_request_needs_messages_and_known_effort() -> None:
    with pytest.raises(ValidationError):
        ChatRequest(messages=[])
    with pytest.raises(ValidationError, match="reasoning_effort"):
        ChatRequest(messages=[Message.user("hi")], reasoning_effort="extreme")
    assert (
        ChatRequest(messages=[Message.user("hi")], reasoning_effort="xhigh").reasoning_effort
        == "xhigh"
    )


def test_chat_request_sees_images_in_tool_results() -> None:
    plain = ChatRequest(messages=[Message.user("hi")])
    assert not plain.has_images
    shot = ToolResult(
        call_id="c", name="browser", content=[ImagePart(media_type="image/png", data=PNG)]
    )
    assert ChatRequest(messages=[Message.user("hi"), Message.tool(shot)]).has_images


def test_on_event_stays_out_of_serialized_requests() -> None:
    request = ChatRequest(messages=[Message.user("hi")], on_event=lambda event: None)
    assert "on_event" not in request.model_dump()


async def test_emit_handles_sync_async_and_missing_callbacks() -> None:
    seen: list[str] = []

    def sync_cb(event: StreamEvent) -> None:
        seen.append("sync:" + event.text)

    async def async_cb(event: StreamEvent) -> None:
        seen.append("async:" + event.text)

    event = StreamEvent(kind=StreamEventKind.TEXT_DELTA, text="x")
    await ChatRequest(messages=[Message.user("a")], on_event=sync_cb).emit(event)
    await ChatRequest(messages=[Message.user("a")], on_event=async_cb).emit(event)
    await ChatRequest(messages=[Message.user("a")]).emit(event)
    assert seen == ["sync:x", "async:x"]


def test_on_event_must_be_callable() -> None:
    with pytest.raises(ValidationError):
        ChatRequest(messages=[Message.user("a")], on_event="print")  # type: ignore[arg-type]


def test_provider_error_carries_classification() -> None:
    error = ProviderError(
        "rate_limit",
        "usage limit reached",
        provider="openai",
        status=429,
        retry_after_seconds=90,
    )
    assert error.kind is ErrorKind.RATE_LIMIT
    assert str(error) == "openai: usage limit reached (rate_limit, HTTP 429, retry after 90s)"
    assert error.pre_response is False
    assert error.visible_output is False
    with pytest.raises(ValueError, match="not a valid ErrorKind"):
        ProviderError("not-a-kind", "x")


def test_provider_error_survives_pickling() -> None:
    error = ProviderError(
        ErrorKind.TIMEOUT,
        "no first byte",
        provider="codex",
        pre_response=True,
        visible_output=False,
    )
    copy = pickle.loads(pickle.dumps(error))  # noqa: S301 - our own bytes
    assert isinstance(copy, ProviderError)
    assert (copy.kind, copy.message, copy.provider, copy.pre_response) == (
        ErrorKind.TIMEOUT,
        "no first byte",
        "codex",
        True,
    )


def test_every_error_kind_from_the_spec_exists() -> None:
    expected = {
        "timeout",
        "transport",
        "connection_unavailable",
        "server_error",
        "overloaded",
        "rate_limit",
        "quota",
        "auth",
        "oauth",
        "context_length",
        "invalid_request",
        "content_filter",
        "unsupported_input",
        "unknown",
    }
    assert {k.value for k in ErrorKind} == expected


class TextOnly(Provider):
    name = "textonly"

    def __init__(self) -> None:
        self.closed = 0

    async def chat(self, request: ChatRequest) -> Turn:
        refusal = self.unsupported_images(request)
        if refusal is not None:
            raise refusal
        return Turn(content="ok", model="t-1")

    async def aclose(self) -> None:
        self.closed += 1


def test_provider_is_abstract() -> None:
    with pytest.raises(TypeError):
        Provider()  # type: ignore[abstract]


async def test_provider_defaults_and_image_gate() -> None:
    async with TextOnly() as provider:
        assert provider.vision() is False
        assert provider.supports_streaming is False
        assert provider.counts_chunks is False
        ok = await provider.chat(ChatRequest(messages=[Message.user("hi")]))
        assert ok.content == "ok"
        image = ImagePart(media_type="image/png", data=PNG)
        with pytest.raises(ProviderError) as info:
            await provider.chat(ChatRequest(messages=[Message.user("see", image)], model="t-1"))
    assert info.value.kind is ErrorKind.UNSUPPORTED_INPUT
    assert info.value.provider == "textonly"
    assert "t-1 cannot read images" in info.value.message
    assert provider.closed == 1
