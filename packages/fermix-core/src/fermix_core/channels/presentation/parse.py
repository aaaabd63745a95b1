"""Markdown → the intermediate form, with markdown-it-py (CommonMark, tables, strikethrough).

Raw HTML is not interpreted: ``<b>`` in a model's answer is text, and each dialect escapes it
as that dialect needs. Link targets are the parser's normalized URLs; a target it refuses
(``javascript:`` and the like) leaves the link as literal text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from .ir import Block, BlockKind, Span, SpanKind, plain_text

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

__all__ = ["parse"]


#: markdown-it stops parsing (and drops the rest) past this many nested blocks; a reply
#: that deep is shown as plain text instead of losing anything.
MAX_NESTING = 50


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    # Imported with the first reply to present, not at boot: an idle daemon does not hold
    # the parser's ~60 modules and its rule tables.
    from markdown_it import MarkdownIt

    options = {"html": False, "linkify": False, "maxNesting": MAX_NESTING}
    return MarkdownIt("commonmark", options).enable(["table", "strikethrough"])


def _as_text(markdown: str) -> list[Block]:
    spans: list[Span] = []
    lines = markdown.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for n, line in enumerate(lines):
        if n:
            spans.append(Span(SpanKind.BREAK))
        if line:
            spans.append(Span(SpanKind.TEXT, line))
    if not plain_text(tuple(spans)).strip():
        return []
    return [Block(BlockKind.PARAGRAPH, spans=tuple(spans), line=0, end=len(lines), cut=True)]


_STYLE_OPEN = {
    "strong_open": SpanKind.BOLD,
    "em_open": SpanKind.ITALIC,
    "s_open": SpanKind.STRIKE,
    "link_open": SpanKind.LINK,
}
_STYLE_CLOSE = frozenset({"strong_close", "em_close", "s_close", "link_close"})


def _spans(tokens: Sequence[Token] | None) -> tuple[Span, ...]:
    """Inline tokens → spans, adjacent text merged."""
    # Each frame: (kind, url, children).
    stack: list[tuple[SpanKind, str, list[Span]]] = [(SpanKind.TEXT, "", [])]

    def add(span: Span) -> None:
        siblings = stack[-1][2]
        if span.kind is SpanKind.TEXT and siblings and siblings[-1].kind is SpanKind.TEXT:
            siblings[-1] = Span(SpanKind.TEXT, siblings[-1].text + span.text)
        elif span.kind is not SpanKind.TEXT or span.text:
            siblings.append(span)

    for tok in tokens or ():
        kind = tok.type
        if kind in ("text", "text_special", "html_inline"):
            add(Span(SpanKind.TEXT, tok.content))
        elif kind == "code_inline":
            add(Span(SpanKind.CODE, tok.content))
        elif kind in ("softbreak", "hardbreak"):
            add(Span(SpanKind.BREAK))
        elif kind in _STYLE_OPEN:
            stack.append((_STYLE_OPEN[kind], str(tok.attrGet("href") or ""), []))
        elif kind in _STYLE_CLOSE and len(stack) > 1:
            style, url, children = stack.pop()
            if children:
                add(Span(style, children=tuple(children), url=url))
        elif kind == "image":
            alt = _spans(tok.children) or (Span(SpanKind.TEXT, "image"),)
            add(Span(SpanKind.LINK, children=alt, url=str(tok.attrGet("src") or "")))
    while len(stack) > 1:  # unbalanced (never from markdown-it, but cheap to tolerate)
        style, url, children = stack.pop()
        if children:
            add(Span(style, children=tuple(children), url=url))
    return tuple(stack[0][2])


def _tight_lists(tokens: Sequence[Token]) -> dict[int, bool]:
    """For every list-open token index: True when the list is tight."""
    tight: dict[int, bool] = {}
    opened: list[int] = []
    for i, tok in enumerate(tokens):
        if tok.type in ("bullet_list_open", "ordered_list_open"):
            opened.append(i)
            tight[i] = False
        elif tok.type in ("bullet_list_close", "ordered_list_close") and opened:
            opened.pop()
        elif tok.type == "paragraph_open" and opened:
            top = opened[-1]
            if tok.level == tokens[top].level + 2 and tok.hidden:
                tight[top] = True
    return tight


class _Walker:
    def __init__(self, tokens: Sequence[Token]) -> None:
        self.tokens = tokens
        self.tight = _tight_lists(tokens)
        self.blocks: list[Block] = []
        self.quote = 0
        #: One entry per open list: (tight, index of the list's first leaf or -1).
        self.lists: list[bool] = []
        self.marker = ""
        self.first_in_list = False
        #: Source line of the container that a cut before the next leaf would start at.
        self.cut_line: int | None = None

    def leaf(self, kind: BlockKind, tok: Token, **fields: object) -> None:
        spans = fields.get("spans")
        if isinstance(spans, tuple) and not plain_text(spans).strip():
            return  # an empty heading or paragraph ("- #") has nothing to show
        line, end = (tok.map[0], tok.map[1]) if tok.map else (-1, -1)
        in_tight = bool(self.lists) and self.lists[-1]
        gap = not in_tight or self.first_in_list
        if self.cut_line is not None:
            cut, line = True, self.cut_line
        else:
            cut = tok.level == 0 or (not self.lists and self.quote == 1 and tok.level == 1)
        self.blocks.append(
            Block(
                kind,
                quote=self.quote,
                depth=len(self.lists),
                marker=self.marker,
                gap=gap,
                line=line,
                end=end,
                cut=cut and line >= 0,
                **fields,  # type: ignore[arg-type]
            )
        )
        self.marker = ""
        self.first_in_list = False
        self.cut_line = None

    def run(self) -> list[Block]:
        tokens = self.tokens
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            kind = tok.type
            if kind == "heading_open":
                level = int(tok.tag[1:]) if tok.tag[1:].isdigit() else 1
                self.leaf(BlockKind.HEADING, tok, spans=_spans(tokens[i + 1].children), level=level)
                i += 3
                continue
            if kind == "paragraph_open":
                self.leaf(BlockKind.PARAGRAPH, tok, spans=_spans(tokens[i + 1].children))
                i += 3
                continue
            if kind in ("fence", "code_block"):
                language = tok.info.strip().split(maxsplit=1)[0] if tok.info.strip() else ""
                self.leaf(BlockKind.CODE, tok, code=tok.content, language=language)
            elif kind == "hr":
                self.leaf(BlockKind.RULE, tok)
            elif kind == "table_open":
                i = self.table(i)
                continue
            elif kind in ("bullet_list_open", "ordered_list_open"):
                if not self.lists:
                    self.first_in_list = True
                self.lists.append(self.tight.get(i, False))
            elif kind in ("bullet_list_close", "ordered_list_close"):
                self.lists.pop()
            elif kind == "list_item_close":
                self.marker = ""
            elif kind == "list_item_open":
                self.marker = f"{tok.info}{tok.markup}" if tok.info else "-"
                if len(self.lists) == 1 and self.quote == 0 and tok.map:
                    self.cut_line = tok.map[0]
            elif kind == "blockquote_open":
                if self.quote == 0 and not self.lists and tok.map:
                    self.cut_line = tok.map[0]
                self.quote += 1
            elif kind == "blockquote_close":
                self.quote -= 1
            i += 1
        return self.blocks

    def table(self, i: int) -> int:
        open_tok = self.tokens[i]
        rows: list[tuple[tuple[Span, ...], ...]] = []
        aligns: list[str] = []
        cells: list[tuple[Span, ...]] = []
        i += 1
        while i < len(self.tokens) and self.tokens[i].type != "table_close":
            tok = self.tokens[i]
            if tok.type == "tr_open":
                cells = []
            elif tok.type == "tr_close":
                rows.append(tuple(cells))
            elif tok.type in ("th_open", "td_open"):
                if not rows:
                    style = str(tok.attrGet("style") or "")
                    aligns.append(style.removeprefix("text-align:") or "left")
                cells.append(_spans(self.tokens[i + 1].children))
            i += 1
        self.leaf(BlockKind.TABLE, open_tok, rows=tuple(rows), aligns=tuple(aligns))
        return i + 1


#: A surrogate code point on its own (text decoded with ``surrogatepass``, JSON's "\\ud83d"
#: escapes): no platform accepts one, and no encoder can measure it.
_SURROGATE = re.compile("[\ud800-\udfff]")


#: A line markdown-it would take as nothing but paragraph text: no character that opens
#: inline syntax (escapes, code, emphasis, strikethrough, links and images, autolinks and
#: HTML, entities), no control character or tab, none that starts a block (headings,
#: quotes, lists, rules, fences, tables, indented code) at its start, no space at its ends.
_PLAIN_LINE = re.compile(
    r"[^\s\\`*_~\[\]<>&|#=+\-\x00-\x1f\x7f]"  # the first character
    r"(?:[^\\`*_~\[\]<>&|\x00-\x1f\x7f]*[^\s\\`*_~\[\]<>&|\x00-\x1f\x7f])?"
)
_ORDERED_MARKER = re.compile(r"[0-9]{1,9}[.)]")


def _plain_paragraph(markdown: str) -> list[Block] | None:
    """The blocks of a reply that is one paragraph of plain lines (most short chat replies),
    built without the parser — exactly what it would give — or ``None`` for anything else."""
    if len(markdown) > 2000:
        return None
    lines = markdown.split("\n")
    spans: list[Span] = []
    for n, line in enumerate(lines):
        if _PLAIN_LINE.fullmatch(line) is None or (
            line[0].isdigit() and _ORDERED_MARKER.match(line)
        ):
            return None
        if n:
            spans.append(_BREAK)
        spans.append(Span(SpanKind.TEXT, line))
    return [Block(BlockKind.PARAGRAPH, spans=tuple(spans), line=0, end=len(lines), cut=True)]


_BREAK = Span(SpanKind.BREAK)


def parse(markdown: str) -> list[Block]:
    """Parse *markdown* into leaf blocks. Never raises on text input.

    A lone surrogate becomes U+FFFD one for one, so source offsets stay valid.
    """
    markdown = _SURROGATE.sub("\ufffd", markdown)
    plain = _plain_paragraph(markdown)
    if plain is not None:
        return plain
    return _parse(markdown)


def _parse(markdown: str) -> list[Block]:
    """:func:`parse` through markdown-it, always (the plain-paragraph shortcut's reference)."""
    tokens = _parser().parse(markdown)
    if any(tok.level >= MAX_NESTING - 1 for tok in tokens):
        return _as_text(markdown)
    return _Walker(tokens).run()
