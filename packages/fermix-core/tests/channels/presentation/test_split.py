"""The boundary ladder, code fences, attachments and the platforms' own length measures."""

from __future__ import annotations

import pytest
from fermix_core.channel import AttachmentKind
from fermix_core.channels.presentation import (
    Dialect,
    DialectProfile,
    Renderer,
    dialect_profile,
    present,
    snippet_filename,
    utf16_units,
)


def para(word: str, n: int) -> str:
    return " ".join(f"{word}{i}" for i in range(n)) + "."


def texts(markdown: str, dialect: Dialect = Dialect.PLAIN, limit: int | None = None) -> list[str]:
    return [c.text for c in present(markdown, dialect, limit).chunks]


def test_sections_are_cut_at_their_headings() -> None:
    # Each section fits one message; two do not.
    sections = [f"## Part {n}\n\n{para('w', 45)}\n\n{para('x', 45)}" for n in range(3)]
    chunks = texts("\n\n".join(sections), limit=700)
    assert [c.split("\n", 1)[0] for c in chunks] == ["Part 0", "Part 1", "Part 2"]


def test_small_sections_share_a_message() -> None:
    sections = [f"## Part {n}\n\nshort text {n}." for n in range(6)]
    assert len(texts("\n\n".join(sections), limit=4096)) == 1
    chunks = texts("\n\n".join(sections), limit=64)
    assert all(len(c) <= 64 for c in chunks)
    assert all(c.startswith("Part") for c in chunks)


def test_paragraph_then_line_then_sentence_then_space_then_hard_cut() -> None:
    paragraphs = texts(f"{para('a', 30)}\n\n{para('b', 30)}", limit=200)
    assert paragraphs[0].startswith("a0") and paragraphs[0].endswith("a29.")
    assert all(len(c) <= 200 for c in paragraphs)
    lines = texts("first line here\nsecond line here\nthird", limit=64)
    assert lines == ["first line here\nsecond line here\nthird"]
    lines = texts(("line " * 10 + "\n") * 3, limit=64)
    assert lines[0] == ("line " * 10).strip()
    first, second = "One two three four five six seven eight.", "Nine ten eleven twelve thirteen."
    assert texts(f"{first} {second}", limit=64) == [first, second]
    words = texts("word " * 40, limit=64)
    assert all(c.endswith("word") and len(c) <= 64 for c in words)
    hard = texts("x" * 200, limit=64)
    assert hard == ["x" * 64, "x" * 64, "x" * 64, "x" * 8]


def test_a_heading_is_not_left_alone_at_the_end_of_a_message() -> None:
    chunks = texts(f"intro.\n\n## Title\n\n{para('w', 60)}", limit=120)
    assert not any(c.rstrip().endswith("Title") for c in chunks)


def test_code_fence_is_never_split_and_rides_whole_in_one_message() -> None:
    code = "\n".join(f"line_{i} = {i}" for i in range(8))
    markdown = f"{para('a', 20)}\n\n```py\n{code}\n```\n\n{para('b', 20)}"
    chunks = texts(markdown, Dialect.TELEGRAM, limit=200)
    holding = [c for c in chunks if "line_0" in c]
    assert len(holding) == 1
    assert all(f"line_{i} " in holding[0] for i in range(8))
    assert holding[0].count("<pre>") == holding[0].count("</pre>") == 1


def test_a_code_block_too_big_for_a_message_becomes_an_attachment_after_the_reply() -> None:
    code = "\n".join(f"print({i})" for i in range(600))
    result = present(f"Here it is:\n\n```python\n{code}\n```\n\nDone.", Dialect.DISCORD)
    assert [c.text for c in result.chunks] == [
        "Here it is:\n\n*(code attached: snippet-1.py)*\n\nDone."
    ]
    (attachment,) = result.attachments
    assert attachment.kind is AttachmentKind.DOCUMENT
    assert attachment.filename == "snippet-1.py"
    assert attachment.mime_type == "text/plain"
    assert attachment.data == (code + "\n").encode()


def test_snippet_names_follow_the_fence_language() -> None:
    assert snippet_filename("python", 1) == "snippet-1.py"
    assert snippet_filename("TypeScript", 2) == "snippet-2.ts"
    assert snippet_filename("", 3) == "snippet-3.txt"
    assert snippet_filename("../../etc", 4) == "snippet-4.etc"
    assert snippet_filename("json", 5) == "snippet-5.json"


def test_only_the_first_message_notifies() -> None:
    chunks = present(para("w", 400), Dialect.SLACK, limit=500).chunks
    assert len(chunks) > 2
    assert [c.notify for c in chunks] == [True] + [False] * (len(chunks) - 1)


def test_telegram_counts_utf16_units_after_rendering() -> None:
    # Each 😀 is two UTF-16 units and each & five units once escaped as &amp;.
    text = "😀& " * 600
    chunks = present(text, Dialect.TELEGRAM).chunks
    assert len(chunks) > 1
    assert all(utf16_units(c.text) <= 4096 for c in chunks)
    assert utf16_units(chunks[0].text) > 3900  # filled, not cut at the code-point count
    assert "&amp;" in chunks[0].text


def test_a_hard_cut_never_splits_an_emoji_sequence_or_an_accent() -> None:
    family = "👨\u200d👩\u200d👧\u200d👦"  # one glyph, 11 UTF-16 units
    chunks = present(family * 500, Dialect.TELEGRAM).chunks
    assert len(chunks) > 1
    assert all(c.text.startswith("👨") and c.text.endswith("👦") for c in chunks)
    assert "".join(c.text for c in chunks) == family * 500
    accented = present("e\u0301" * 3000, Dialect.DISCORD).chunks
    assert len(accented) > 1
    assert all(c.text.startswith("e") and c.text.endswith("\u0301") for c in accented)


def test_signal_counts_utf8_bytes() -> None:
    profile = dialect_profile(Dialect.SIGNAL)
    chunks = present("ж " * 3000, Dialect.SIGNAL).chunks  # 9,000 bytes
    assert all(len(c.text.encode()) <= profile.limit for c in chunks)
    assert len(chunks) == 5


def test_formatting_is_closed_in_every_chunk() -> None:
    markdown = "**" + " ".join(f"bold{i}" for i in range(200)) + "**"
    for dialect, mark in [(Dialect.SLACK, "*"), (Dialect.WHATSAPP, "*"), (Dialect.DISCORD, "**")]:
        for chunk in texts(markdown, dialect, limit=300):
            assert chunk.startswith(mark) and chunk.endswith(mark)
    for chunk in texts(markdown, Dialect.TELEGRAM, limit=300):
        assert chunk.startswith("<b>") and chunk.endswith("</b>")


def test_a_long_table_is_cut_between_rows_and_repeats_its_header() -> None:
    rows = "\n".join(f"| item {i} | {i * 3} |" for i in range(60))
    markdown = f"| name | qty |\n|---|--:|\n{rows}"
    chunks = present(markdown, Dialect.TELEGRAM, limit=400).chunks
    assert len(chunks) > 1
    for chunk in chunks:
        assert chunk.text.startswith("<pre>name") and chunk.text.endswith("</pre>")
    assert chunks[0].plain.startswith("name | qty")
    assert chunks[1].plain.startswith("item")  # the plain fallback does not repeat it


def test_a_link_target_longer_than_a_message_is_cut_as_text() -> None:
    url = "https://example.com/" + "a" * 5000
    chunks = present(f"see [this]({url})", Dialect.TELEGRAM).chunks
    assert all(utf16_units(c.text) <= 4096 for c in chunks)
    assert "".join(c.plain for c in chunks).replace(" ", "") == f"seethis:{url}"


def test_a_block_whose_markup_alone_cannot_fit_goes_out_as_plain_text() -> None:
    class Heavy(Renderer):
        name = "heavy"
        formatted = True

        def text(self, text: str) -> str:
            return "".join(f"<{c}>" * 30 for c in text)

    profile = DialectProfile("heavy", Heavy(), 64)
    chunks = present("abc " * 20, profile).chunks
    assert chunks and all(not c.formatted and len(c.text) <= 64 for c in chunks)
    assert "".join(c.text for c in chunks).replace(" ", "") == "abc" * 20


def test_third_party_profile_with_its_own_measure() -> None:
    profile = DialectProfile("tiny", Renderer(), 100, lambda text: len(text) * 2, "half-chars")
    chunks = present("word " * 100, profile).chunks
    assert all(len(c.text) * 2 <= 100 for c in chunks)


def test_dialects_are_named_as_channels_name_them() -> None:
    assert Dialect("telegram_html") is Dialect.TELEGRAM
    assert Dialect("telegram") is Dialect.TELEGRAM
    assert present("**x**", "telegram_html").chunks[0].text == "<b>x</b>"


def test_limit_and_measure_overrides_follow_the_channel_declaration() -> None:
    from fermix_core.channel import Channel
    from fermix_core.channels.presentation import channel_profile

    class Slackish(Channel):
        name, dialect, max_text, text_measure = "slackish", "slack", 100, "chars"

        async def start(self, host):  # pragma: no cover - not started here
            raise NotImplementedError

        async def stop(self) -> None:  # pragma: no cover
            raise NotImplementedError

        async def send(self, message):  # pragma: no cover
            raise NotImplementedError

    profile = channel_profile(Slackish())
    assert profile.limit == 100 and profile.renderer.name == "slack"
    # The stricter of the declared count and the dialect's own: an emoji counts two.
    assert profile.measure("😀") == 2
    chunks = present("😀 " * 200, profile).chunks
    assert all(utf16_units(c.text) <= 100 for c in chunks)
    chars = present("😀 " * 200, Dialect.PLAIN, 100, measure="chars").chunks
    assert all(len(c.text) <= 100 for c in chars)
    assert max(len(c.text) for c in chars) > 60
    with pytest.raises(ValueError, match="chars, utf16, utf8"):
        present("x", Dialect.PLAIN, measure="bytes?")


@pytest.mark.parametrize(
    "markdown",
    [
        "> " * 600 + "deepest",
        "- " * 200 + "deepest",
        "[" * 2000 + "deepest",
        "*a " * 1500 + "deepest",
        "[a](https://e.com/x) " * 800 + "deepest",
        "|a|b|\n|-|-|\n" + "|1|2|\n" * 400 + "\ndeepest",
    ],
    ids=["quotes", "lists", "brackets", "emphasis", "links", "table"],
)
def test_hostile_markdown_is_split_within_the_cap_and_loses_nothing(markdown: str) -> None:
    for dialect in (Dialect.TELEGRAM, Dialect.DISCORD, Dialect.SIGNAL):
        profile = dialect_profile(dialect)
        chunks = present(markdown, dialect).chunks
        assert chunks
        assert all(profile.measure(c.text) <= profile.limit for c in chunks)
        assert "".join(c.plain for c in chunks).rstrip().endswith("deepest")


def test_a_third_party_dialect_is_registered_by_name() -> None:
    from fermix_core.channels.presentation import register_dialect
    from fermix_core.channels.presentation.dialect import _REGISTERED

    class Shouty(Renderer):
        name, formatted = "shouty", True

        def text(self, text: str) -> str:
            return text.upper()

    profile = DialectProfile("shouty-test", Shouty(), 500)
    try:
        register_dialect(profile)
        register_dialect(profile)  # the same profile again is harmless
        assert present("hello **you**", "shouty-test").chunks[0].text == "HELLO YOU"
        with pytest.raises(ValueError, match="already registered"):
            register_dialect(DialectProfile("shouty-test", Shouty(), 100))
        with pytest.raises(ValueError, match="built in"):
            register_dialect(DialectProfile("slack", Shouty(), 100))
    finally:
        _REGISTERED.pop("shouty-test", None)
