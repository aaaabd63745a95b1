from __future__ import annotations

from collections.abc import Callable

import pytest
from fermix_core.messages import ImagePart, Message, ToolCall, Turn, Usage
from fermix_core.provider import ChatRequest, ErrorKind, ProviderError, StreamEvent
from fermix_core.testing import (
    FunctionProvider,
    ScriptedProvider,
    ScriptExhausted,
    reply,
    tool_call,
    tool_calls,
)

pytestmark = pytest.mark.anyio


def ask(text: str, **kwargs: object) -> ChatRequest:
    return ChatRequest(messages=[Message.user(text)], **kwargs)  # type: ignore[arg-type]


async def test_scripted_answers_in_order_and_records_requests() -> None:
    provider = ScriptedProvider(["first", tool_call("search", {"q": "x"}), reply("third")])
    one = await provider.chat(ask("a"))
    two = await provider.chat(ask("b", model="big-model"))
    three = await provider.chat(ask("c"))
    assert one.content == "first"
    assert one.model == "scripted-model"
    assert two.tool_calls == [ToolCall(id="call_search", name="search", arguments={"q": "x"})]
    assert two.model == "big-model", "an empty scripted model takes the requested one"
    assert three.content == "third"
    assert [r.messages[-1].text for r in provider.requests] == ["a", "b", "c"]
    assert provider.last_request.messages[-1].text == "c"
    assert provider.remaining == 0


async def test_scripted_keeps_explicit_turn_fields() -> None:
    turn = Turn(
        content="x", model="pinned", usage=Usage(input_tokens=3), provider_state={"id": "r1"}
    )
    provider = ScriptedProvider([turn])
    assert await provider.chat(ask("a", model="other")) == turn


async def test_running_out_of_script_fails_loudly_with_context() -> None:
    provider = ScriptedProvider(["only one"], name="mock")
    await provider.chat(ask("hello"))
    with pytest.raises(ScriptExhausted) as info:
        await provider.chat(ask("what about this?"))
    message = str(info.value)
    assert "got call 2 but only 1 replies were scripted" in message
    assert "what about this?" in message
    assert isinstance(info.value, AssertionError)


async def test_scripted_errors_are_raised_and_attributed() -> None:
    provider = ScriptedProvider(
        [ProviderError(ErrorKind.OVERLOADED, "busy", pre_response=True), "recovered"], name="mock"
    )
    with pytest.raises(ProviderError) as info:
        await provider.chat(ask("a"))
    assert info.value.provider == "mock"
    assert info.value.pre_response is True
    assert (await provider.chat(ask("a"))).content == "recovered"


async def test_script_items_are_type_checked() -> None:
    with pytest.raises(TypeError, match="script item"):
        ScriptedProvider([{"content": "x"}])  # type: ignore[list-item]


async def test_recorded_requests_do_not_change_when_the_caller_appends() -> None:
    provider = ScriptedProvider(["ok"])
    history = [Message.user("one")]
    request = ChatRequest(messages=history)
    await provider.chat(request)
    request.messages.append(Message.user("two"))
    assert [m.text for m in provider.requests[0].messages] == ["one"]


async def test_text_only_fake_refuses_images_without_consuming_the_script() -> None:
    provider = ScriptedProvider(["fine"], vision=False)
    image = ImagePart(media_type="image/png", data=b"\x89PNG")
    with pytest.raises(ProviderError) as info:
        await provider.chat(ChatRequest(messages=[Message.user("see", image)]))
    assert info.value.kind is ErrorKind.UNSUPPORTED_INPUT
    assert provider.remaining == 1
    assert len(provider.requests) == 1


async def test_streaming_emits_deltas_then_item_done() -> None:
    events: list[StreamEvent] = []
    provider = ScriptedProvider([tool_call("look", content="Let me  check that.")])
    turn = await provider.chat(ask("a", stream=True, on_event=events.append))
    deltas = [e.text for e in events if e.kind == "text_delta"]
    assert len(deltas) > 1
    assert "".join(deltas) == turn.content == "Let me  check that."
    assert [(e.kind, e.item_type) for e in events if e.kind == "item_done"] == [
        ("item_done", "message"),
        ("item_done", "tool_call"),
    ]


async def test_no_events_without_stream_flag() -> None:
    events: list[StreamEvent] = []
    await ScriptedProvider(["hi there"]).chat(ask("a", on_event=events.append))
    assert events == []


async def test_closed_provider_refuses_calls() -> None:
    provider = ScriptedProvider(["x"])
    await provider.aclose()
    with pytest.raises(ProviderError) as info:
        await provider.chat(ask("a"))
    assert info.value.kind is ErrorKind.CONNECTION_UNAVAILABLE


def test_tool_calls_helper_builds_unique_ids() -> None:
    turn = tool_calls(("a", {}), ("a", {"x": 1}), ToolCall(id="own", name="b"))
    assert [c.id for c in turn.tool_calls] == ["call_1_a", "call_2_a", "own"]


@pytest.mark.parametrize("make_async", [False, True])
async def test_function_provider_sync_and_async(make_async: bool) -> None:
    def sync_fn(request: ChatRequest) -> str:
        return f"echo {request.messages[-1].text}"

    async def async_fn(request: ChatRequest) -> str:
        return sync_fn(request)

    fn: Callable[[ChatRequest], object] = async_fn if make_async else sync_fn
    provider = FunctionProvider(fn, model="fn-1")  # type: ignore[arg-type]
    turn = await provider.chat(ask("ping"))
    assert turn.content == "echo ping"
    assert turn.model == "fn-1"
    assert len(provider.requests) == 1


async def test_function_provider_rejects_bad_returns_and_attributes_errors() -> None:
    provider = FunctionProvider(lambda request: 42, name="fn")  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="return a Turn or a str"):
        await provider.chat(ask("a"))

    def fail(request: ChatRequest) -> Turn:
        raise ProviderError(ErrorKind.QUOTA, "out of credits")

    failing = FunctionProvider(fail, name="fn")
    with pytest.raises(ProviderError) as info:
        await failing.chat(ask("a"))
    assert info.value.provider == "fn"
    with pytest.raises(TypeError):
        FunctionProvider("not callable")  # type: ignore[arg-type]


async def test_scripted_provider_fixture(
    scripted_provider: Callable[..., ScriptedProvider],
) -> None:
    provider = scripted_provider("hello", name="fixture", vision=False)
    assert provider.name == "fixture"
    assert provider.vision() is False
    assert (await provider.chat(ask("x"))).content == "hello"
