"""The intermediate form every dialect renders from.

Markdown is parsed once (:mod:`.parse`) into a flat sequence of :class:`Block` leaves, each
holding :class:`Span` inline runs. Lists and block quotes are not separate container nodes:
every leaf carries its own nesting (``quote`` depth, list ``depth`` and item ``marker``), so
the splitter can cut between any two leaves — or inside one — and each piece still renders
on its own, with no container left open across messages.

The plain-text *size* of a leaf defines the positions the splitter works in: a paragraph or
heading counts one position per character of its plain text (a line break counts one), a
table one per body row, and a code block or rule is a single indivisible position.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field, replace
from enum import StrEnum

__all__ = ["Block", "BlockKind", "Span", "SpanKind", "plain_text", "slice_spans", "span_size"]


class SpanKind(StrEnum):
    TEXT = "text"
    CODE = "code"
    BREAK = "break"
    BOLD = "bold"
    ITALIC = "italic"
    STRIKE = "strike"
    LINK = "link"


CONTAINERS = frozenset({SpanKind.BOLD, SpanKind.ITALIC, SpanKind.STRIKE, SpanKind.LINK})


@dataclass(frozen=True, slots=True)
class Span:
    """An inline run: ``text`` for TEXT and CODE, ``children`` for the styled kinds and
    LINK (whose target is ``url``); BREAK is a line break inside a paragraph."""

    kind: SpanKind
    text: str = ""
    children: tuple[Span, ...] = ()
    url: str = ""
    #: Positions this span covers (computed).
    size: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.kind is SpanKind.BREAK:
            size = 1
        elif self.kind in CONTAINERS:
            size = sum(c.size for c in self.children)
        else:
            size = len(self.text)
        object.__setattr__(self, "size", size)


class BlockKind(StrEnum):
    HEADING = "heading"
    PARAGRAPH = "paragraph"
    CODE = "code"
    TABLE = "table"
    RULE = "rule"


@dataclass(frozen=True, slots=True)
class Block:
    """One leaf block.

    ``quote`` is the block-quote depth (0 outside quotes). ``depth`` is the list nesting
    depth; ``marker`` is ``"-"`` (bullet) or ``"3."`` (ordered) on the first block of a list
    item and empty on its continuation blocks. ``gap`` says a blank line separates this
    block from the previous one (false between the items of a tight list). ``line`` and ``end`` are
    the Markdown source lines the block starts on and ends before, and ``cut`` says the
    source may be cut cleanly before ``line`` (the streaming cutters use these).
    """

    kind: BlockKind
    spans: tuple[Span, ...] = ()
    level: int = 0
    code: str = ""
    language: str = ""
    #: TABLE: ``rows[0]`` is the header row; each cell is a tuple of spans.
    rows: tuple[tuple[tuple[Span, ...], ...], ...] = ()
    aligns: tuple[str, ...] = ()
    quote: int = 0
    depth: int = 0
    marker: str = ""
    gap: bool = True
    line: int = -1
    end: int = -1
    cut: bool = False
    #: This block is the rest of one cut earlier (a table piece repeats its header row in
    #: monospace, but plain text does not repeat it).
    continued: bool = False
    #: Positions this block covers (computed).
    size: int = field(init=False, repr=False, compare=False)
    #: Where each top-level span starts (computed), so a slice deep into a long paragraph
    #: finds its first span by bisection.
    starts: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        starts: list[int] = []
        if self.kind in (BlockKind.PARAGRAPH, BlockKind.HEADING):
            size = 0
            for span in self.spans:
                starts.append(size)
                size += span.size
        elif self.kind is BlockKind.TABLE:
            size = max(1, len(self.rows) - 1)
        else:
            size = 1
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "starts", tuple(starts))

    def slice(self, start: int, end: int) -> Block | None:
        """The part of this block between two of its positions, or None when empty."""
        if start <= 0 and end >= self.size:
            return self
        if self.kind in (BlockKind.PARAGRAPH, BlockKind.HEADING):
            first = max(bisect_right(self.starts, start) - 1, 0)
            offset = self.starts[first] if self.starts else 0
            spans = slice_spans(self.spans[first:], start - offset, end - offset)
            if not spans:
                return None
            marker = self.marker if start <= 0 else ""
            return replace(self, spans=spans, marker=marker, continued=start > 0)
        if self.kind is BlockKind.TABLE:
            body = self.rows[1 + max(0, start) : 1 + end]
            if not body:
                return None
            marker = self.marker if start <= 0 else ""
            rows = (self.rows[0], *body)
            return replace(self, rows=rows, marker=marker, continued=start > 0)
        return self if start <= 0 < end else None


def span_size(span: Span) -> int:
    return span.size


def slice_spans(spans: tuple[Span, ...], start: int, end: int) -> tuple[Span, ...]:
    """The spans covering plain positions ``[start, end)``; styles split into two copies."""
    out: list[Span] = []
    pos = 0
    for span in spans:
        size = span.size
        lo, hi = max(start - pos, 0), min(end - pos, size)
        pos += size
        if lo >= hi:
            if pos >= end:
                break
            continue
        if lo == 0 and hi == size:
            out.append(span)
        elif span.kind in CONTAINERS:
            children = slice_spans(span.children, lo, hi)
            if children:
                out.append(replace(span, children=children))
        else:  # TEXT or CODE (a BREAK has size 1, so it is always whole)
            out.append(replace(span, text=span.text[lo:hi]))
        if pos >= end:
            break
    return tuple(out)


def plain_text(spans: tuple[Span, ...], *, code_mask: str | None = None) -> str:
    """The characters of *spans* as the positions count them (a BREAK is ``"\\n"``).

    With *code_mask*, the characters of inline code are replaced by that character, so a
    search for sentence ends or spaces skips them.
    """
    parts: list[str] = []

    def walk(items: tuple[Span, ...]) -> None:
        for span in items:
            if span.kind is SpanKind.BREAK:
                parts.append("\n")
            elif span.kind in CONTAINERS:
                walk(span.children)
            elif span.kind is SpanKind.CODE and code_mask is not None:
                parts.append(code_mask * len(span.text))
            else:
                parts.append(span.text)

    walk(spans)
    return "".join(parts)
