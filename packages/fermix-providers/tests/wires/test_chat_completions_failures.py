"""How the Chat Completions wire fails: HTTP errors, errors inside a 200, cuts and stalls."""

from __future__ import annotations

import pytest
from fermix_core.messages import Message
from fermix_core.provider import ChatRequest, ErrorKind, ProviderError, ProviderSettings
from fermix_core.specs import ModelInfo, ProviderSpec
from fermix_core.testing.loopback import LoopbackServer, Reply
from fermix_providers.http import Timeouts
from fermix_providers.wires.chat_completions import ChatCompletionsProvider

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("both_clients")]

SECRET = "sk-gateway-secret-456"
SPEC = ProviderSpec(
    name="gateway",
    factory="fermix_providers.wires.chat_completions:ChatCompletionsProvider",
    default_model="gw-large",
    models=(ModelInfo("gw-large", 128_000),),
)


class Quick(ChatCompletionsProvider):
    timeouts = Timeouts(connect=2.0, read=0.4, write=2.0, pool=2.0)


def chunk(delta=None, finish=None):
    return {"choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}


async def fail(server: LoopbackServer, *, stream: bool) -> ProviderError:
    provider = Quick(SPEC, ProviderSettings(name="gateway", base_url=server.url, api_key=SECRET))
    try:
        with pytest.raises(ProviderError) as info:
            await provider.chat(ChatRequest(messages=[Message.user("Hi")], stream=stream))
    finally:
        await provider.aclose()
    error = info.value
    assert error.provider == "gateway"
    for text in (str(error), repr(error), error.message):
        assert SECRET not in text
    return error


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("reply", "kind", "wait"),
    [
        (
            Reply(
                status=429,
                headers={"x-ratelimit-reset-requests": "2m0s"},
                body={"error": {"message": "Rate limit reached for requests"}},
            ),
            ErrorKind.RATE_LIMIT,
            120,
        ),
        (
            Reply(
                status=429,
                headers={"retry-after": "30"},
                body={
                    "error": {"code": "insufficient_quota", "message": "You exceeded your quota"}
                },
            ),
            ErrorKind.QUOTA,
            30,
        ),
        (Reply(status=500, body={"error": {"message": "boom"}}), ErrorKind.SERVER_ERROR, None),
        (Reply(status=503, body="<html>down</html>"), ErrorKind.OVERLOADED, None),
        (
            Reply(
                status=400,
                body={
                    "error": {
                        "code": "context_length_exceeded",
                        "message": "This model's maximum context length is 128000 tokens",
                    }
                },
            ),
            ErrorKind.CONTEXT_LENGTH,
            None,
        ),
        (
            Reply(status=401, body={"error": {"message": f"Incorrect API key {SECRET[:6]}..."}}),
            ErrorKind.AUTH,
            None,
        ),
    ],
)
async def test_http_errors_are_classified(stream, reply, kind, wait) -> None:
    async with LoopbackServer() as server:
        server.queue(reply)
        error = await fail(server, stream=stream)
    assert error.kind is kind
    assert error.retry_after_seconds == wait
    assert error.pre_response is False
    assert error.visible_output is False


@pytest.mark.parametrize(
    ("declared", "kind", "quoted"),
    [
        # OpenRouter: a numeric code that stands for an HTTP status.
        ({"code": 502, "message": "Provider returned error"}, ErrorKind.SERVER_ERROR, True),
        ({"code": "503", "message": "Upstream overloaded"}, ErrorKind.OVERLOADED, True),
        ({"code": "rate_limit_exceeded", "message": "Slow down"}, ErrorKind.RATE_LIMIT, True),
        (
            {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens"},
            ErrorKind.CONTEXT_LENGTH,
            True,
        ),
        ({"message": ""}, ErrorKind.SERVER_ERROR, False),
    ],
)
async def test_error_declared_inside_a_200_stream(declared, kind, quoted) -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(sse=[{"error": declared, "choices": []}]))
        error = await fail(server, stream=True)
    assert error.kind is kind
    assert error.status is None, "the HTTP status was 200; the kind carries the meaning"
    if quoted:
        assert error.message == declared["message"], "the provider's own sentence is quoted"
    else:
        assert "without saying why" in error.message


async def test_error_after_visible_text_is_marked_visible() -> None:
    async with LoopbackServer() as server:
        server.queue(
            Reply(
                sse=[
                    chunk({"content": "Half an ans"}),
                    {
                        "error": {"code": 502, "message": "Provider disconnected"},
                        "choices": [{"index": 0, "delta": {}, "finish_reason": "error"}],
                    },
                ]
            )
        )
        error = await fail(server, stream=True)
    assert error.kind is ErrorKind.SERVER_ERROR
    assert error.visible_output is True


async def test_finish_reason_error_without_an_error_object() -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(sse=[chunk({"content": "x"}), chunk(finish="error"), "[DONE]"]))
        error = await fail(server, stream=True)
    assert error.kind is ErrorKind.SERVER_ERROR
    assert error.visible_output is True


@pytest.mark.parametrize(
    "body",
    [
        {"error": {"message": "The server is overloaded, try again later"}},
        {"object": "error", "message": "Engine overloaded", "code": 503},
    ],
)
async def test_error_declared_in_a_buffered_200(body) -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(body=body))
        error = await fail(server, stream=False)
    assert error.kind is ErrorKind.OVERLOADED


@pytest.mark.parametrize(
    "body",
    [
        {"choices": []},
        ["not", "an", "object"],
        {
            "choices": [
                {"index": 0, "message": {"content": None}, "finish_reason": "content_filter"}
            ]
        },
    ],
)
async def test_unusable_buffered_answers(body) -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(body=body))
        error = await fail(server, stream=False)
    assert error.kind in (ErrorKind.SERVER_ERROR, ErrorKind.CONTENT_FILTER)
    if isinstance(body, dict) and body["choices"]:
        assert error.kind is ErrorKind.CONTENT_FILTER


async def test_buffered_body_that_is_not_json() -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(body="<html>gateway page</html>"))
        error = await fail(server, stream=False)
    assert error.kind is ErrorKind.SERVER_ERROR


@pytest.mark.parametrize(
    ("call", "finish", "needle"),
    [
        (
            {"id": "c1", "function": {"name": "echo", "arguments": '{"text": "cut'}},
            "length",
            "limit",
        ),
        ({"id": "c1", "function": {"name": "echo", "arguments": "[1, 2]"}}, "tool_calls", "JSON"),
        ({"id": "c1", "function": {"arguments": "{}"}}, "tool_calls", "without a function name"),
    ],
)
async def test_broken_tool_calls_fail_with_a_reason(call, finish, needle) -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(sse=[chunk({"tool_calls": [{"index": 0, **call}]}, finish), "[DONE]"]))
        error = await fail(server, stream=True)
    assert error.kind is ErrorKind.SERVER_ERROR
    assert needle in error.message


async def test_cut_stream_is_a_transport_error_with_visible_output() -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(sse=[chunk({"content": "Hel"}), chunk({"content": "lo"})], cut_after=1))
        error = await fail(server, stream=True)
    assert error.kind is ErrorKind.TRANSPORT
    assert error.visible_output is True
    assert error.pre_response is False


async def test_pre_response_stall_is_a_measured_pre_response_timeout() -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(stall=True))
        error = await fail(server, stream=True)
    assert error.kind is ErrorKind.TIMEOUT
    assert error.pre_response is True
    assert error.visible_output is False


async def test_mid_stream_stall_is_not_pre_response() -> None:
    async with LoopbackServer() as server:
        server.queue(
            Reply(sse=[chunk({"content": "Hel"}), chunk({"content": "lo"})], stall_after=1)
        )
        error = await fail(server, stream=True)
    assert error.kind is ErrorKind.TIMEOUT
    assert error.pre_response is False
    assert error.visible_output is True


async def test_buffered_stall_never_claims_pre_response() -> None:
    async with LoopbackServer() as server:
        server.queue(Reply(stall=True))
        error = await fail(server, stream=False)
    assert error.kind is ErrorKind.TIMEOUT
    assert error.pre_response is False


async def test_refused_connection_is_a_pre_response_transport_error() -> None:
    async with LoopbackServer() as server:
        pass
    error = await fail(server, stream=True)
    assert error.kind is ErrorKind.TRANSPORT
    assert error.pre_response is True


async def test_gateway_validation_errors_name_the_field() -> None:
    """FastAPI-style gateways answer 422 with a ``detail`` list instead of a sentence."""
    detail = [{"loc": ["body", "messages", 1, "content"], "msg": "field required"}]
    async with LoopbackServer() as server:
        server.queue(Reply(status=422, body={"detail": detail}))
        error = await fail(server, stream=False)
    assert error.kind is ErrorKind.INVALID_REQUEST
    assert error.message == "body.messages.1.content: field required"
