from __future__ import annotations

import base64
import json

import pytest
from fermix_core.messages import (
    ImagePart,
    Message,
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolResult,
    Turn,
    Usage,
    parts_text,
    text_length,
)
from pydantic import ValidationError

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe\x00"


def test_user_constructor_turns_strings_into_parts() -> None:
    image = ImagePart(media_type="image/png", data=PNG)
    message = Message.user("what is this?", image)
    assert message.role == "user"
    assert message.content == [TextPart(text="what is this?"), image]
    assert message.text == "what is this?"
    assert message.images == [image]


def test_history_round_trips_through_json_with_binary_images() -> None:
    call = ToolCall(id="c1", name="browser", arguments={"action": "screenshot"})
    shot = ImagePart(media_type="image/png", data=PNG)
    history = [
        Message.system("Be brief."),
        Message.user("look", ImagePart(media_type="image/jpeg", url="https://example.test/a.jpg")),
        Message.assistant("taking a screenshot", tool_calls=[call]),
        Message.tool(ToolResult(call_id="c1", name="browser", content=["done", shot])),
    ]
    payload = json.dumps([m.model_dump(mode="json") for m in history])
    restored = [Message.model_validate(item) for item in json.loads(payload)]
    assert restored == history
    assert restored[3].images[0].data == PNG


def test_image_part_needs_exactly_one_source() -> None:
    with pytest.raises(ValidationError, match="exactly one of data"):
        ImagePart(media_type="image/png")
    with pytest.raises(ValidationError, match="exactly one of data"):
        ImagePart(media_type="image/png", data=PNG, url="https://example.test/x.png")
    with pytest.raises(ValidationError, match="empty"):
        ImagePart(media_type="image/png", data=b"")


@pytest.mark.parametrize("media_type", ["text/plain", "image/", "", "application/png"])
def test_image_part_rejects_non_image_media_types(media_type: str) -> None:
    with pytest.raises(ValidationError, match="image/"):
        ImagePart(media_type=media_type, data=PNG)


def test_image_base64_and_data_url() -> None:
    image = ImagePart(media_type="IMAGE/PNG", data=PNG)
    assert image.media_type == "image/png"
    assert base64.b64decode(image.base64()) == PNG
    assert image.data_url() == f"data:image/png;base64,{image.base64()}"
    remote = ImagePart(media_type="image/png", url="https://example.test/x.png")
    with pytest.raises(ValueError, match="url"):
        remote.base64()


def test_image_bytes_stay_out_of_repr() -> None:
    image = ImagePart(media_type="image/png", data=PNG * 1000)
    assert "PNG" not in repr(image)


def test_role_shapes_are_enforced() -> None:
    call = ToolCall(id="c1", name="x")
    with pytest.raises(ValidationError, match="only assistant"):
        Message(role="user", content="hi", tool_calls=[call])
    with pytest.raises(ValidationError, match="needs tool_result"):
        Message(role="tool", content="result")
    with pytest.raises(ValidationError, match="only tool messages"):
        Message(role="user", tool_result=ToolResult(call_id="c1", name="x"))
    with pytest.raises(ValidationError, match="text only"):
        Message(role="system", content=[ImagePart(media_type="image/png", data=PNG)])
    with pytest.raises(ValidationError):
        Message(role="moderator", content="hi")  # type: ignore[arg-type]


def test_role_shapes_are_enforced_on_messages_read_back_from_json() -> None:
    with pytest.raises(ValidationError, match="only assistant"):
        Message.model_validate_json(
            '{"role":"user","content":[{"type":"text","text":"hi"}],'
            '"tool_calls":[{"id":"c1","name":"x"}]}'
        )
    with pytest.raises(ValidationError, match="needs tool_result"):
        Message.model_validate({"role": "tool", "content": "result"})


def test_built_messages_pass_through_containers_unchanged() -> None:
    """A request holding built messages keeps those very objects (already checked once)."""
    from fermix_core.provider import ChatRequest

    history = [Message.system("rules"), Message.user("hi", "there"), Message.assistant("yo")]
    request = ChatRequest(messages=history)
    assert all(a is b for a, b in zip(request.messages, history, strict=True))
    assert [p.text for p in history[1].content] == ["hi", "there"]
    assert Message.user("", "x").content == [TextPart(text="x")]


def test_messages_are_frozen() -> None:
    message = Message.user("hi")
    with pytest.raises(ValidationError):
        message.role = "assistant"  # type: ignore[misc]


def test_tool_message_text_comes_from_its_result() -> None:
    message = Message.tool(ToolResult(call_id="c1", name="x", content="42 degrees", is_error=False))
    assert message.text == "42 degrees"
    assert not message.is_empty


@pytest.mark.parametrize(
    ("message", "empty"),
    [
        (Message.user(""), True),
        (Message.user("  \n "), True),
        (Message.assistant(), True),
        (Message.user("hi"), False),
        (Message.user(ImagePart(media_type="image/png", data=PNG)), False),
        (Message.assistant(tool_calls=[ToolCall(id="c", name="x")]), False),
        (Message.user(" ", "\t"), True),
        (Message.user(" ", "x"), False),
        (Message.user(" ", ImagePart(media_type="image/png", data=PNG)), False),
    ],
)
def test_message_is_empty(message: Message, empty: bool) -> None:
    assert message.is_empty is empty


def test_tool_call_arguments_decode_json_strings() -> None:
    assert ToolCall(id="c", name="x", arguments='{"city": "Oslo"}').arguments == {"city": "Oslo"}
    assert ToolCall(id="c", name="x", arguments="").arguments == {}
    assert ToolCall(id="c", name="x", arguments=None).arguments == {}


@pytest.mark.parametrize(
    ("raw", "message"),
    [("{not json", "not valid JSON"), ("[1, 2]", "JSON object"), ('"text"', "JSON object")],
)
def test_tool_call_rejects_malformed_arguments(raw: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        ToolCall(id="c", name="x", arguments=raw)


def test_tool_call_needs_id_and_name() -> None:
    with pytest.raises(ValidationError):
        ToolCall(id="", name="x")
    with pytest.raises(ValidationError):
        ToolCall(id="c", name="")


def test_tool_definition_from_model_and_name_rules() -> None:
    from pydantic import BaseModel

    class Args(BaseModel):
        city: str

    definition = ToolDefinition.from_model("weather_now", "Weather now.", Args)
    assert definition.parameters["type"] == "object"
    assert "city" in definition.parameters["properties"]
    with pytest.raises(ValidationError, match="1-64 letters"):
        ToolDefinition(name="has space", description="x")
    with pytest.raises(ValidationError, match="1-64 letters"):
        ToolDefinition(name="x" * 65, description="x")
    with pytest.raises(ValidationError, match="'object'"):
        ToolDefinition(name="x", parameters={"type": "string"})


def test_usage_adds_up_and_refuses_negatives() -> None:
    total = Usage(input_tokens=10, output_tokens=2, cached_input_tokens=4) + Usage(
        input_tokens=5, output_tokens=1, reasoning_tokens=3
    )
    assert total == Usage(
        input_tokens=15, output_tokens=3, cached_input_tokens=4, reasoning_tokens=3
    )
    assert total.total_tokens == 18
    with pytest.raises(ValidationError):
        Usage(input_tokens=-1)
    with pytest.raises(TypeError):
        _ = Usage() + 3  # type: ignore[operator]


def test_turn_is_empty_and_to_message() -> None:
    assert Turn(model="m").is_empty
    assert Turn(content="   ", model="m").is_empty
    assert not Turn(content="hi", model="m").is_empty
    call = ToolCall(id="c", name="x", arguments={"a": 1})
    turn = Turn(tool_calls=[call], model="m")
    assert not turn.is_empty
    message = turn.to_message()
    assert message.role == "assistant"
    assert message.tool_calls == [call]
    assert message.content == []
    with pytest.raises(ValidationError):
        Turn(content="no model")  # type: ignore[call-arg]


TEXT_SHAPES = [
    Message.user("hello"),
    Message.user(""),
    Message.user(TextPart(text="")),
    Message.user(ImagePart(media_type="image/png", data=PNG)),
    Message.user(ImagePart(media_type="image/png", data=PNG), "caption"),
    Message.user("a", TextPart(text=""), "b", ImagePart(media_type="image/png", url="u"), "c"),
    Message.user("ünïcødé 🎉", "\n\n"),
    Message.system("x" * 10_000),
    Message.assistant(tool_calls=[ToolCall(id="c1", name="t")]),
    Message.tool(ToolResult(call_id="c1", name="t", content=["one", "", "two"])),
    Message.tool(ToolResult(call_id="c1", name="t", content=[])),
]


@pytest.mark.parametrize("message", TEXT_SHAPES)
def test_text_length_is_the_length_of_the_text(message: Message) -> None:
    assert text_length(message) == len(message.text)


def test_parts_text_of_one_part_is_that_part() -> None:
    assert parts_text([TextPart(text="only")]) == "only"
    assert parts_text([TextPart(text="")]) == ""
    assert parts_text([ImagePart(media_type="image/png", data=PNG)]) == ""
    assert parts_text([TextPart(text="a"), TextPart(text=""), TextPart(text="b")]) == "a\n\nb"


def test_adding_a_zero_usage_keeps_the_other_side() -> None:
    some = Usage(input_tokens=3, output_tokens=1, cached_input_tokens=2, reasoning_tokens=5)
    assert Usage() + some == some and some + Usage() == some
    assert Usage() + Usage() == Usage()
    assert some + some == Usage(
        input_tokens=6, output_tokens=2, cached_input_tokens=4, reasoning_tokens=10
    )
    only_reasoning = Usage(reasoning_tokens=1)
    assert only_reasoning + only_reasoning == Usage(reasoning_tokens=2)


def test_usage_counts_are_its_model_dump() -> None:
    usage = Usage(input_tokens=3, output_tokens=4, cached_input_tokens=1, reasoning_tokens=2)
    assert usage.counts() == usage.model_dump()
    assert list(usage.counts()) == list(Usage.model_fields)
    assert Usage().counts() == dict.fromkeys(Usage.model_fields, 0)


def _same(built, validated) -> None:
    """Built without validation, yet indistinguishable from the validated instance."""
    assert type(built) is type(validated)
    assert built == validated
    try:
        expected = hash(validated)
    except TypeError:  # list fields: neither is hashable
        with pytest.raises(TypeError):
            hash(built)
    else:
        assert hash(built) == expected
    assert built.model_dump_json() == validated.model_dump_json()
    assert built.model_fields_set == validated.model_fields_set
    assert type(built).model_validate_json(built.model_dump_json()) == validated
    assert built.model_copy(update={}) == validated


def test_built_parts_and_messages_equal_their_validated_forms() -> None:
    from fermix_core.messages import text_part

    image = ImagePart(media_type="image/png", data=PNG)
    call = ToolCall(id="c1", name="clock", arguments={"tz": "UTC"})
    _same(text_part("hi"), TextPart(text="hi"))
    _same(text_part(""), TextPart(text=""))
    for parts in ([], [TextPart(text="a")], [TextPart(text="a"), image], [image]):
        _same(Message.of_parts("user", parts), Message.user(*parts))
        _same(Message.of_parts("assistant", parts), Message(role="assistant", content=parts))
    for content, calls in (("", []), ("done", []), ("", [call]), ("calling", [call, call])):
        turn = Turn(content=content, tool_calls=calls, model="m")
        _same(turn.to_message(), Message.assistant(content, tool_calls=calls))
    for content, is_error in (([], False), ([TextPart(text="42")], False), ([image], True)):
        result = ToolResult.of("c1", "clock", content, is_error)
        _same(result, ToolResult(call_id="c1", name="clock", content=content, is_error=is_error))
        _same(Message.tool(result), Message(role="tool", tool_result=result))


def test_the_unvalidated_paths_fall_back_to_validation_for_anything_unbuilt() -> None:
    from fermix_core.messages import text_part

    image = ImagePart(media_type="image/png", data=PNG)
    # Strings and dicts are coerced or checked as before; bad shapes still fail loudly.
    assert Message.of_parts("user", ["hi", {"type": "text", "text": "x"}]) == Message.user(  # type: ignore[list-item]
        "hi", TextPart(text="x")
    )
    with pytest.raises(ValidationError, match="text only"):
        Message.of_parts("system", [image])
    with pytest.raises(ValidationError):
        Message.of_parts("user", [42])  # type: ignore[list-item]
    with pytest.raises(ValidationError):
        text_part(None)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        ToolResult.of("", "clock", [], False)
    with pytest.raises(ValidationError):
        ToolResult.of("c1", "clock", [object()], False)
    assert ToolResult.of("c1", "clock", "plain", False).content == [TextPart(text="plain")]  # type: ignore[arg-type]
    odd = Turn.model_construct(content="x", tool_calls=[{"id": "c9", "name": "clock"}], model="m")
    assert odd.to_message().tool_calls == [ToolCall(id="c9", name="clock")]
    built = Message.of_parts("user", [TextPart(text="a")])
    with pytest.raises(ValidationError):
        built.role = "assistant"  # type: ignore[misc]


def test_has_images_on_one_part_and_many() -> None:
    image = ImagePart(media_type="image/png", data=PNG)
    assert Message.user(image).has_images and not Message.user("hi").has_images
    assert Message.user("hi", image).has_images and not Message.user("a", "b").has_images
    assert not Message.user().has_images
    tool = Message.tool(ToolResult(call_id="c1", name="x", content=[image]))
    assert tool.has_images


def test_module_constants_made_without_validation_equal_validated_ones() -> None:
    """Constants made at import without a validation round (so importing builds no
    validator) are the objects validation would make: equal, same fields set, same hash
    and JSON."""
    from fermix_core.agent import loop
    from fermix_core.memory import scope
    from fermix_core.memory.backend import MemoryFilter
    from fermix_core.messages import TextPart, Usage

    pairs = [
        (loop._NO_OUTPUT, TextPart(text="(the tool returned no output)")),
        (loop._NO_USAGE, Usage()),
        (scope._NOTHING, MemoryFilter(empty=True)),
    ]
    for made, validated in pairs:
        assert made == validated and hash(made) == hash(validated)
        assert made.model_fields_set == validated.model_fields_set
        assert made.model_dump_json() == validated.model_dump_json()
