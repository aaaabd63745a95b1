"""Request building and buffered-response parsing of the Responses wire (plain functions)."""

from __future__ import annotations

import copy
import json

import pytest
from fermix_core.messages import ImagePart, Message, ToolCall, ToolDefinition, ToolResult
from fermix_core.provider import ErrorKind, ProviderError
from fermix_providers.wires.responses import (
    declared_error,
    function_tools,
    input_items,
    parse_response,
    split_instructions,
    strip_slash_enums,
)

PNG = b"\x89PNG\r\n\x1a\n-fake-but-bytes"


def test_leading_system_messages_become_instructions() -> None:
    messages = [
        Message.system("You are Fermix."),
        Message.system("Be brief."),
        Message.user("hi"),
        Message.system("Late note."),
    ]
    instructions, rest = split_instructions(messages)
    assert instructions == "You are Fermix.\n\nBe brief."
    assert [m.role for m in rest] == ["user", "system"]
    items = input_items(rest, provider="p")
    assert items[1] == {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": "Late note."}],
    }
    assert input_items(rest, provider="p", system_role="system")[1]["role"] == "system"


def test_no_system_prompt_means_empty_instructions() -> None:
    instructions, rest = split_instructions([Message.user("hi")])
    assert instructions == ""
    assert len(rest) == 1


def test_user_images_become_input_image_parts() -> None:
    inline = ImagePart(media_type="image/png", data=PNG)
    linked = ImagePart(media_type="image/jpeg", url="https://example.test/cat.jpg")
    [item] = input_items([Message.user("what is this?", inline, linked)], provider="p")
    assert item["role"] == "user"
    assert item["content"] == [
        {"type": "input_text", "text": "what is this?"},
        {"type": "input_image", "image_url": inline.data_url()},
        {"type": "input_image", "image_url": "https://example.test/cat.jpg"},
    ]


def test_text_only_request_shape_has_no_image_traces() -> None:
    [item] = input_items([Message.user("hello")], provider="p")
    assert item == {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "hello"}],
    }


def test_assistant_turns_and_tool_calls_round_trip() -> None:
    call = ToolCall(id="call_1", name="search", arguments={"q": "café", "n": 2})
    items = input_items(
        [Message.user("look it up"), Message.assistant("Searching.", tool_calls=[call])],
        provider="p",
    )
    assert items[1] == {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Searching."}],
    }
    assert items[2]["type"] == "function_call"
    assert items[2]["call_id"] == "call_1"
    assert items[2]["name"] == "search"
    assert json.loads(items[2]["arguments"]) == {"q": "café", "n": 2}


def test_silent_assistant_turn_sends_only_its_calls() -> None:
    call = ToolCall(id="c", name="t", arguments={})
    items = input_items([Message.assistant(tool_calls=[call])], provider="p")
    assert [i["type"] for i in items] == ["function_call"]


def test_tool_result_images_follow_the_run_of_outputs() -> None:
    shot = ImagePart(media_type="image/png", data=PNG)
    calls = [ToolCall(id="a", name="browser", arguments={}), ToolCall(id="b", name="clock")]
    history = [
        Message.user("screenshot and time"),
        Message.assistant(tool_calls=calls),
        Message.tool(ToolResult(call_id="a", name="browser", content=["Took it.", shot])),
        Message.tool(ToolResult(call_id="b", name="clock", content="12:00")),
        Message.user("thanks"),
    ]
    items = input_items(history, provider="p")
    kinds = [(i.get("type"), i.get("role")) for i in items]
    assert kinds == [
        ("message", "user"),
        ("function_call", None),
        ("function_call", None),
        ("function_call_output", None),
        ("function_call_output", None),
        ("message", "user"),
        ("message", "user"),
    ]
    first_output = items[3]["output"]
    assert first_output.startswith("Took it.")
    assert "1 image(s)" in first_output
    assert items[4]["output"] == "12:00"
    image_turn = items[5]["content"]
    assert image_turn[0]["type"] == "input_text"
    assert "browser" in image_turn[0]["text"]
    assert image_turn[1] == {"type": "input_image", "image_url": shot.data_url()}
    assert items[6]["content"] == [{"type": "input_text", "text": "thanks"}]


def test_image_only_tool_result_and_errors_and_empty_results() -> None:
    shot = ImagePart(media_type="image/png", data=PNG)
    items = input_items(
        [
            Message.tool(ToolResult(call_id="a", name="cam", content=[shot])),
            Message.tool(ToolResult(call_id="b", name="fail", content="boom", is_error=True)),
            Message.tool(ToolResult(call_id="c", name="noop")),
        ],
        provider="p",
    )
    assert items[0]["output"].startswith("[1 image(s)")
    assert items[1]["output"] == "Tool error: boom"
    assert items[2]["output"] == "(no output)"
    assert items[3]["role"] == "user"  # the picture, after all outputs


def test_assistant_image_fails_loud() -> None:
    image = ImagePart(media_type="image/png", data=PNG)
    with pytest.raises(ProviderError) as info:
        input_items([Message.assistant("look", image)], provider="p")
    assert info.value.kind is ErrorKind.UNSUPPORTED_INPUT


def test_empty_messages_are_not_sent() -> None:
    items = input_items(
        [Message.user(""), Message.assistant("  "), Message.system(" "), Message.user("x")],
        provider="p",
    )
    assert len(items) == 1


def test_function_tools_are_non_strict_and_schema_hook_applies() -> None:
    tool = ToolDefinition(
        name="pick",
        description="Pick one.",
        parameters={"type": "object", "properties": {"m": {"type": "string"}}},
    )
    [plain] = function_tools([tool])
    assert plain == {
        "type": "function",
        "name": "pick",
        "description": "Pick one.",
        "parameters": tool.parameters,
        "strict": False,
    }
    [hooked] = function_tools([tool], lambda s: {**s, "x": 1})
    assert hooked["parameters"]["x"] == 1


def test_strip_slash_enums_is_deep_and_does_not_mutate() -> None:
    schema = {
        "type": "object",
        "properties": {
            "model": {"type": "string", "enum": ["gpt-5", "openai/gpt-5", "x-ai/grok"]},
            "only_slashes": {"type": "string", "enum": ["a/b", "c/d"]},
            "enum": {"type": "array", "items": {"enum": ["ok", "no/pe", 3]}},
            "nested": {"anyOf": [{"enum": ["p/q", "r"]}, {"type": "null"}]},
        },
    }
    before = copy.deepcopy(schema)
    cleaned = strip_slash_enums(schema)
    assert schema == before
    props = cleaned["properties"]
    assert props["model"]["enum"] == ["gpt-5"]
    assert "enum" not in props["only_slashes"]
    assert props["only_slashes"]["type"] == "string"
    assert props["enum"]["items"]["enum"] == ["ok", 3]
    assert props["nested"]["anyOf"][0]["enum"] == ["r"]


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (
            {
                "code": "server_is_overloaded",
                "message": "Our servers are currently overloaded. Please try again later.",
            },
            ErrorKind.OVERLOADED,
        ),
        ({"code": "server_error", "message": "An error occurred."}, ErrorKind.OVERLOADED),
        (
            {"code": "rate_limit_exceeded", "message": "Rate limit reached. Try again in 20s."},
            ErrorKind.RATE_LIMIT,
        ),
        ({"code": "usage_limit_reached", "message": "Limit."}, ErrorKind.QUOTA),
        (
            {"code": "context_length_exceeded", "message": "Your input exceeds the context."},
            ErrorKind.CONTEXT_LENGTH,
        ),
        (
            {"code": "invalid_prompt", "message": "Your prompt was flagged."},
            ErrorKind.CONTENT_FILTER,
        ),
        ({"code": "invalid_value", "message": "Bad tool schema."}, ErrorKind.INVALID_REQUEST),
        ({"code": "mystery", "message": "Something odd."}, ErrorKind.SERVER_ERROR),
        ({"error": {"code": "server_error", "message": "nested"}}, ErrorKind.OVERLOADED),
    ],
)
def test_declared_failures_are_classified(error, kind) -> None:
    found = declared_error("openai_codex", error)
    assert found.kind is kind
    assert found.provider == "openai_codex"


def test_declared_failure_quotes_the_sentence_and_reads_waits() -> None:
    sentence = "Our servers are currently overloaded. Please try again later."
    error = declared_error("openai_codex", {"code": "server_is_overloaded", "message": sentence})
    assert error.message == sentence
    assert sentence in str(error)
    limited = declared_error(
        "p", {"code": "rate_limit_exceeded", "message": "Please try again in 1.5s."}
    )
    assert limited.retry_after_seconds == 1.5
    quota = declared_error("p", {"code": "usage_limit_reached", "resets_in_seconds": 600})
    assert quota.retry_after_seconds == 600
    silent = declared_error("p", None)
    assert silent.kind is ErrorKind.SERVER_ERROR
    assert "try again" in silent.message


# --------------------------------------------------------------------------- buffered


def _response(*output, status="completed", **extra):
    return {
        "id": "resp_1",
        "object": "response",
        "status": status,
        "model": "gpt-5.6-2026",
        "output": list(output),
        "usage": {
            "input_tokens": 30,
            "input_tokens_details": {"cached_tokens": 10},
            "output_tokens": 7,
            "output_tokens_details": {"reasoning_tokens": 3},
            "total_tokens": 37,
        },
        **extra,
    }


MESSAGE = {
    "type": "message",
    "id": "msg_1",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "Hello there.", "annotations": []}],
}
CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_9",
    "name": "search",
    "arguments": '{"q": "x"}',
}
REASONING = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "…"}]}


def test_buffered_text_tool_call_and_usage() -> None:
    turn = parse_response(_response(REASONING, MESSAGE, CALL), provider="openai", model="gpt-5.6")
    assert turn.content == "Hello there."
    assert turn.tool_calls == [ToolCall(id="call_9", name="search", arguments={"q": "x"})]
    assert turn.model == "gpt-5.6-2026"
    assert turn.provider_state == {"response_id": "resp_1"}
    assert turn.usage.input_tokens == 30
    assert turn.usage.cached_input_tokens == 10
    assert turn.usage.output_tokens == 7
    assert turn.usage.reasoning_tokens == 3


def test_buffered_refusal_is_the_answer() -> None:
    refusal = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "refusal", "refusal": "I can't help with that."}],
    }
    assert parse_response(_response(refusal), provider="p", model="m").content == (
        "I can't help with that."
    )


def test_buffered_failures_are_errors_and_a_completed_empty_answer_is_empty() -> None:
    failed = _response(
        status="failed", error={"code": "server_error", "message": "The server had an error."}
    )
    with pytest.raises(ProviderError) as info:
        parse_response(failed, provider="p", model="m")
    assert info.value.kind is ErrorKind.OVERLOADED
    assert info.value.message == "The server had an error."

    # The model finished normally and said nothing: its (empty) answer, for the loop to
    # judge — the honest "try again", like the other wires — not a server error to retry.
    empty = parse_response(_response(REASONING), provider="p", model="m")
    assert empty.is_empty and empty.model == "gpt-5.6-2026"
    # A body that never says it completed, with nothing in it, is still not an answer.
    with pytest.raises(ProviderError) as info:
        parse_response(_response(REASONING, status="in_progress"), provider="p", model="m")
    assert info.value.kind is ErrorKind.SERVER_ERROR

    truncated = _response(status="incomplete", incomplete_details={"reason": "max_output_tokens"})
    with pytest.raises(ProviderError) as info:
        parse_response(truncated, provider="p", model="m")
    assert "max_output_tokens" in info.value.message

    filtered = _response(status="incomplete", incomplete_details={"reason": "content_filter"})
    with pytest.raises(ProviderError) as info:
        parse_response(filtered, provider="p", model="m")
    assert info.value.kind is ErrorKind.CONTENT_FILTER

    with pytest.raises(ProviderError):
        parse_response(["not", "an", "object"], provider="p", model="m")


def test_incomplete_with_output_returns_it() -> None:
    turn = parse_response(
        _response(MESSAGE, status="incomplete", incomplete_details={"reason": "max_output_tokens"}),
        provider="p",
        model="m",
    )
    assert turn.content == "Hello there."


def test_malformed_tool_arguments_are_a_classified_error() -> None:
    broken = {**CALL, "arguments": '{"q": '}
    with pytest.raises(ProviderError) as info:
        parse_response(_response(broken), provider="p", model="m")
    assert info.value.kind is ErrorKind.SERVER_ERROR
    assert "search" in info.value.message
