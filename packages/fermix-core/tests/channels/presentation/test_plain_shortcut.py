"""A reply of plain lines skips the Markdown parser: the blocks must be exactly the parser's."""

from __future__ import annotations

import os

import pytest
from fermix_core.channels.presentation.parse import _SURROGATE, _parse, _plain_paragraph, parse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SETTINGS = settings(
    max_examples=int(os.environ.get("FERMIX_HYPOTHESIS_EXAMPLES", "200")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

#: Plain characters, and every one that means something to Markdown at a line's start or
#: inside it, control and Unicode spaces, astral characters.
ALPHABET = [
    *"abcxyzABC019 .,:;!?'\"()/@$%^{}",
    *"*_~`[]<>&|#=+-\\\n\r\t\x00\x0b\x0c\x1c\x7f",
    "\u00a0",
    "\u2028",
    "\u3000",
    "😀",
    "中",
    "é",
    "\ud800",
]
texts = st.text(alphabet=st.sampled_from(ALPHABET), max_size=80)
lines = st.lists(
    st.text(alphabet=st.sampled_from([*"abc019 .:!?()", "😀", "é"]), min_size=1, max_size=30),
    min_size=1,
    max_size=6,
).map("\n".join)


@SETTINGS
@given(st.one_of(texts, lines))
def test_the_shortcut_gives_exactly_what_markdown_it_gives(text: str) -> None:
    clean = _SURROGATE.sub("\ufffd", text)  # what parse() hands on
    shortcut = _plain_paragraph(clean)
    if shortcut is not None:
        assert shortcut == _parse(clean)
    assert parse(text) == _parse(clean)


@pytest.mark.parametrize(
    "text",
    ["re: flood 15550000001 3", "ok", "Done.", "2026 was fine", "line one\nline two", "é 😀 中"],
)
def test_plain_replies_take_the_shortcut(text: str) -> None:
    assert _plain_paragraph(text) is not None
    assert _plain_paragraph(text) == _parse(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        " indented",
        "trailing ",
        "1. a list",
        "3) a list",
        "# heading",
        "> quote",
        "- item",
        "+ item",
        "a *b*",
        "a _b_",
        "a ~~b~~",
        "a `b`",
        "[a](b)",
        "<https://example.com>",
        "a &amp; b",
        "a \\* b",
        "a | b",
        "one\n\ntwo",
        "title\n===",
        "title\n---",
        "tab\there",
        "nul\x00",
        "cr\r\nlf",
        "x" * 2001,
    ],
)
def test_anything_markdown_could_mean_goes_to_the_parser(text: str) -> None:
    assert _plain_paragraph(text) is None
