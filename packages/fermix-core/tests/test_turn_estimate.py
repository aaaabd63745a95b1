"""The pre-call overflow estimate counts exactly what ``text_length`` counts."""

from __future__ import annotations

import itertools

from fermix_core.messages import ImagePart, Message, TextPart, ToolCall, ToolResult, text_length
from fermix_core.turns import estimate_tokens

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


def _messages() -> list[Message]:
    image = ImagePart(media_type="image/png", data=PNG)
    return [
        Message.system("rules of the house"),
        Message.user("hi"),
        Message.user("two", "parts"),
        Message.user(TextPart(text="a"), TextPart(text=""), TextPart(text="b"), image),
        Message.user(image),
        Message.assistant(),
        Message.assistant("calling", tool_calls=[ToolCall(id="c1", name="clock")]),
        Message.tool(ToolResult(call_id="c1", name="clock", content="12:00")),
        Message.tool(ToolResult(call_id="c2", name="clock", content=["x", "yz", image])),
        Message.tool(ToolResult(call_id="c3", name="clock")),
        Message.user("ünïcødé " * 50),
    ]


def test_the_estimate_matches_text_length_on_every_shape() -> None:
    messages = _messages()
    for size in range(len(messages) + 1):
        for chosen in itertools.combinations(messages, size):
            window = list(chosen)
            expected = sum(map(text_length, window)) // 4 + 4 * len(window)
            assert estimate_tokens(window) == expected
    assert all(text_length(m) == len(m.text) for m in messages)
