"""The cutters the stream controller uses on partial Markdown."""

from __future__ import annotations

from fermix_core.channels.presentation import (
    Dialect,
    block_cut,
    present,
    rendered_length,
    seal_point,
)
from fermix_core.channels.presentation.stream import BLOCK_MAX_CHARS, BLOCK_MIN_CHARS


def para(word: str, n: int) -> str:
    return " ".join(f"{word}{i}" for i in range(n)) + "."


def test_rendered_length_is_measured_after_rendering() -> None:
    assert rendered_length("**a** & 😀", Dialect.TELEGRAM) == len("<b>a</b> &amp; ") + 2
    assert rendered_length("**a** & 😀", Dialect.SIGNAL) == len(b"a & ") + 4


def test_seal_point_prefers_a_heading_then_a_paragraph() -> None:
    text = f"{para('a', 40)}\n\n## Next\n\n{para('b', 40)}\n\n{para('c', 40)}"
    cut = seal_point(text, Dialect.TELEGRAM, 1400)
    assert text[cut:].startswith("## Next")
    no_heading = f"{para('a', 40)}\n\n{para('b', 40)}\n\n{para('c', 200)}"
    cut = seal_point(no_heading, Dialect.TELEGRAM, 1400)
    assert no_heading[cut:].startswith("c0")
    assert rendered_length(no_heading[:cut], Dialect.TELEGRAM) <= 1400


def test_seal_point_respects_the_rendered_budget_and_minimum() -> None:
    text = f"{para('a', 40)}\n\n## Next\n\n{para('b', 300)}"
    assert seal_point(text, Dialect.TELEGRAM, 100) is None  # the first block is already longer
    assert seal_point(text, Dialect.TELEGRAM, 1400, min_rendered=1000) is None
    assert seal_point("one paragraph only", Dialect.TELEGRAM, 1400) is None


def test_seal_point_never_cuts_inside_an_open_fence_or_after_a_heading() -> None:
    text = f"{para('a', 20)}\n\n```py\n" + "x = 1\n" * 300  # still streaming the fence
    cut = seal_point(text, Dialect.TELEGRAM, 1400)
    assert text[cut:].startswith("```py")
    text = f"## Title\n\n{para('a', 300)}"
    assert seal_point(text, Dialect.TELEGRAM, 1400) is None


def test_block_cut_waits_while_the_buffer_fits() -> None:
    assert block_cut(para("a", 50), Dialect.SLACK) is None


def drain(buffer: str, dialect: Dialect) -> list[str]:
    pieces = []
    while (cut := block_cut(buffer, dialect)) is not None:
        pieces.append(buffer[:cut])
        buffer = buffer[cut:]
    return [*pieces, buffer]


def test_block_cut_makes_800_to_1200_char_messages_on_the_ladder() -> None:
    text = "\n\n".join(para(w, 45) for w in "abcdefghijklmnopqrst")
    pieces = drain(text, Dialect.WHATSAPP)
    assert len(pieces) > 2
    for piece in pieces[:-1]:
        size = rendered_length(piece, Dialect.WHATSAPP)
        assert BLOCK_MIN_CHARS <= size <= BLOCK_MAX_CHARS
        assert piece.endswith("\n\n")  # cut between paragraphs
    assert "".join(pieces) == text


def test_block_cut_inside_a_paragraph_lands_on_a_sentence_and_keeps_markup_whole() -> None:
    sentences = " ".join(
        f"Sentence **number {i}** has [a link](https://e.com/{i})." for i in range(60)
    )
    pieces = drain(sentences, Dialect.SLACK)
    assert len(pieces) > 1
    for piece in pieces[:-1]:
        assert piece.rstrip().endswith(".")
        assert BLOCK_MIN_CHARS <= rendered_length(piece, Dialect.SLACK) <= BLOCK_MAX_CHARS
    rendered = [present(p, Dialect.SLACK).chunks[0].text for p in pieces]
    assert all("**" not in r and "](" not in r for r in rendered)


def test_block_cut_falls_back_to_spaces_then_a_hard_cut() -> None:
    words = "word " * 400
    for piece in drain(words, Dialect.DISCORD)[:-1]:
        assert piece.endswith(" ")
    solid = "x" * 3000
    pieces = drain(solid, Dialect.DISCORD)
    assert "".join(pieces) == solid
    assert all(rendered_length(p, Dialect.DISCORD) <= BLOCK_MAX_CHARS for p in pieces)


def test_block_cut_leaves_code_fences_whole() -> None:
    fence = "```py\n" + "".join(f"value_{i} = {i}\n" for i in range(120)) + "```\n\n"
    text = para("a", 30) + "\n\n" + fence + para("b", 30)
    pieces = drain(text, Dialect.SLACK)
    holding = [p for p in pieces if "value_0 " in p]
    assert len(holding) == 1 and "value_119 " in holding[0]
    assert holding[0].startswith("```py")  # the short text before it went out on its own
    # An open fence longer than a block message is not cut: wait for it to close.
    assert block_cut("```py\n" + "x = 1\n" * 400, Dialect.SLACK) is None
