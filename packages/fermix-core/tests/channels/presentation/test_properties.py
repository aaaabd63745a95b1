"""Property tests: whatever the model writes, every dialect's messages fit, lose nothing and
never break a code block or leave markup open."""

from __future__ import annotations

import os
import re
from html.parser import HTMLParser

import pytest
from fermix_core.channels.presentation import (
    Dialect,
    block_cut,
    dialect_profile,
    present,
    seal_point,
)
from fermix_core.channels.presentation.parse import parse
from fermix_core.channels.presentation.present import _Measurer, _prepare
from fermix_core.channels.presentation.render import PLAIN
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

#: A short run by default; FERMIX_HYPOTHESIS_EXAMPLES=1000 for a thorough one.
SETTINGS = settings(
    max_examples=int(os.environ.get("FERMIX_HYPOTHESIS_EXAMPLES", "30")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

#: Characters that mean something to Markdown or to one of the dialects, plus astral and
#: wide characters for the UTF-16 and UTF-8 measures.
MARKUP = [*"*_~`[]()<>&|#>-+!.?\\:/= \n\t\"'", "😀", "🎉", "中", "ж", "\u200d", "é"]
inline = st.text(alphabet=st.sampled_from([*MARKUP, "a", "b", "w", "1"]), max_size=120)
words = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "**bold**",
                "_it_",
                "~~gone~~",
                "`code`",
                "[label](https://example.com/a_b?x=1&y=2)",
                "<https://example.com>",
                "&amp;",
                "\\*",
                "end.",
                "Why?",
                "😀",
                "x" * 90,
            ]
        ),
        st.text(alphabet="abcdefgh ", min_size=1, max_size=12),
    ),
    max_size=60,
).map(" ".join)
text_run = st.one_of(inline, words)


@st.composite
def fence(draw: st.DrawFn) -> str:
    ident = draw(st.integers(0, 10**6))
    lines = draw(st.integers(1, 40))
    lang = draw(st.sampled_from(["", "py", "js", "sh"]))
    body = "\n".join(f"QZX{ident}L{n} " + "x" * draw(st.integers(0, 60)) for n in range(lines))
    return f"```{lang}\n{body}\n```"


@st.composite
def block(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["p", "h", "ul", "ol", "quote", "table", "fence", "hr"]))
    if kind == "h":
        return "#" * draw(st.integers(1, 6)) + " " + draw(words)
    if kind in ("ul", "ol"):
        items = draw(st.lists(text_run, min_size=1, max_size=6))
        nest = draw(st.booleans())
        marks = [f"{n + 1}." if kind == "ol" else "-" for n in range(len(items))]
        out = [f"{m} {item.replace(chr(10), ' ')}" for m, item in zip(marks, items, strict=True)]
        if nest:
            out.insert(1, "  - " + draw(words))
        return "\n".join(out)
    if kind == "quote":
        return "\n".join("> " + line for line in draw(text_run).split("\n"))
    if kind == "table":
        cols = draw(st.integers(1, 4))
        rows = draw(st.integers(0, 30))
        cell = st.text(alphabet="abc *_`&<1😀", max_size=20).map(lambda c: c.replace("|", ""))
        lines = ["| " + " | ".join(draw(cell) or "h" for _ in range(cols)) + " |"]
        lines.append("|" + "---|" * cols)
        lines += ["| " + " | ".join(draw(cell) for _ in range(cols)) + " |" for _ in range(rows)]
        return "\n".join(lines)
    if kind == "fence":
        return draw(fence())
    if kind == "hr":
        return "---"
    return draw(text_run)


documents = st.one_of(
    st.text(max_size=300),
    inline,
    st.lists(block(), max_size=14).map("\n\n".join),
)
DIALECTS = list(Dialect)
limits = st.sampled_from([None, 64, 97, 300, 1000])


def nonspace(text: str) -> str:
    # "│" is the plain quote bar, drawn again on each piece of a quoted line that is cut.
    return re.sub(r"[\s│]", "", text)


def reference_plain(markdown: str, dialect: Dialect, limit: int) -> str:
    """The whole reply as plain text, oversized code already taken out."""
    blocks, _ = _prepare(parse(markdown), _Measurer(dialect_profile(dialect), limit))
    return PLAIN.render(blocks)


class _TagChecker(HTMLParser):
    ALLOWED = frozenset({"b", "i", "s", "code", "pre", "a", "blockquote"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        assert tag in self.ALLOWED, tag
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, (self.stack, tag)
        self.stack.pop()


def check_markup_closed(text: str, dialect: Dialect) -> None:
    if dialect is Dialect.TELEGRAM:
        checker = _TagChecker()
        checker.feed(text)
        checker.close()
        assert checker.stack == []
        assert "<" not in re.sub(r"</?(b|i|s|code|pre|a|blockquote)( [^>]*)?>", "", text)
    elif dialect in (Dialect.SLACK, Dialect.WHATSAPP, Dialect.DISCORD):
        assert text.count("```") % 2 == 0


@pytest.mark.parametrize("dialect", DIALECTS)
@SETTINGS
@given(markdown=documents, limit=limits)
def test_chunks_fit_keep_every_character_and_close_their_markup(
    dialect: Dialect, markdown: str, limit: int | None
) -> None:
    profile = dialect_profile(dialect)
    cap = limit or profile.limit
    result = present(markdown, dialect, limit)
    for chunk in result.chunks:
        assert profile.measure(chunk.text) <= cap
        assert profile.measure(chunk.plain) <= cap
        assert chunk.text.strip()
        if chunk.formatted:
            check_markup_closed(chunk.text, dialect)
    assert [c.notify for c in result.chunks] == [n == 0 for n in range(len(result.chunks))]
    joined = "".join(c.plain for c in result.chunks)
    assert nonspace(joined) == nonspace(reference_plain(markdown, dialect, cap))


@pytest.mark.parametrize("dialect", DIALECTS)
@SETTINGS
@given(blocks=st.lists(st.one_of(block(), fence()), min_size=1, max_size=10), limit=limits)
def test_no_chunk_splits_a_code_fence(
    dialect: Dialect, blocks: list[str], limit: int | None
) -> None:
    # Number the fences so that each one's lines are told apart from every other's.
    markdown = "\n\n".join(re.sub(r"QZX\d+L", f"QZX{k}L", b) for k, b in enumerate(blocks))
    result = present(markdown, dialect, limit)
    attached = b"".join(a.data or b"" for a in result.attachments).decode()
    for ident in set(re.findall(r"QZX(\d+)L0 ", markdown)):
        holders = {n for n, c in enumerate(result.chunks) if f"QZX{ident}L" in c.text}
        if holders:
            assert len(holders) == 1
            (n,) = holders
            lines = re.findall(rf"QZX{ident}L\d+ ", markdown)
            assert all(line in result.chunks[n].text for line in lines)
        else:
            assert f"QZX{ident}L0 " in attached


@pytest.mark.parametrize("dialect", DIALECTS)
@SETTINGS
@given(
    markdown=st.text(
        alphabet=st.one_of(st.characters(), st.sampled_from(["\ud800", "\udfff", "\ud83d"])),
        max_size=2000,
    )
)
def test_never_raises_on_arbitrary_text(dialect: Dialect, markdown: str) -> None:
    present(markdown, dialect)
    present(markdown, dialect, 64)
    cut = seal_point(markdown, dialect, 200)
    assert cut is None or 0 < cut < len(markdown)
    cut = block_cut(markdown, dialect, min_rendered=100, max_rendered=200)
    assert cut is None or 0 < cut <= len(markdown)


@pytest.mark.parametrize("dialect", [Dialect.TELEGRAM, Dialect.SLACK, Dialect.SIGNAL])
@SETTINGS
@given(blocks=st.lists(block(), min_size=1, max_size=12))
def test_block_mode_pieces_rebuild_the_stream_and_stay_in_the_window(
    dialect: Dialect, blocks: list[str]
) -> None:
    markdown = "\n\n".join(blocks)
    pieces, rest = [], markdown
    while (cut := block_cut(rest, dialect, min_rendered=300, max_rendered=500)) is not None:
        assert 0 < cut <= len(rest)
        pieces.append(rest[:cut])
        rest = rest[cut:]
    assert "".join(pieces) + rest == markdown
    profile = dialect_profile(dialect)
    for piece in pieces:
        blocks_of_piece = parse(piece)
        one_code_block = len(blocks_of_piece) == 1 and blocks_of_piece[0].kind.value == "code"
        if not one_code_block:
            assert profile.measure(profile.renderer.render(blocks_of_piece)) <= 500
