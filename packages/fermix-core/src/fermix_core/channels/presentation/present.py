"""One entry point: Markdown → the messages one platform should receive."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from fermix_core.channel import Attachment, AttachmentKind, OutboundMessage

from .dialect import Dialect, DialectProfile, counts_each_character, dialect_profile
from .ir import Block, BlockKind, Span, SpanKind
from .parse import parse
from .render import PLAIN, RenderCache, span_cache
from .split import Piece, grapheme_safe, split_blocks

__all__ = ["MIN_LIMIT", "Presentation", "RenderedChunk", "present", "snippet_filename"]

#: The smallest message cap :func:`present` accepts; below it markup cannot be kept whole.
MIN_LIMIT = 64


@dataclass(frozen=True, slots=True)
class RenderedChunk:
    """One outbound message.

    ``text`` is in the dialect's markup when ``formatted`` is true (send it with the
    platform's parse mode), else plain text. ``plain`` is the same content as plain text:
    what to send once if the platform rejects ``text``. Only the first chunk of a reply has
    ``notify`` set; send the rest silently.
    """

    text: str
    plain: str
    notify: bool = False
    formatted: bool = True

    def outbound(
        self,
        chat_id: str,
        *,
        thread_id: str | None = None,
        reply_to: str | None = None,
        as_plain: bool = False,
    ) -> OutboundMessage:
        """This chunk as the channel contract's message: rendered text (``plain`` unset)
        or, with *as_plain* or for a plain chunk, the plain text with ``plain`` set;
        ``silent`` on every chunk but the first."""
        plain = as_plain or not self.formatted
        return OutboundMessage(
            chat_id=chat_id,
            thread_id=thread_id,
            text=self.plain if as_plain else self.text,
            reply_to=reply_to,
            silent=not self.notify,
            plain=plain,
        )


@dataclass(frozen=True, slots=True)
class Presentation:
    """A reply ready to send: ``chunks`` in order, then ``attachments`` (code blocks too
    large for one message, as text files). Link previews should be off on every chunk."""

    chunks: list[RenderedChunk] = field(default_factory=list)
    attachments: list[Attachment] = field(default_factory=list)


_EXTENSIONS = {
    "python": "py",
    "py3": "py",
    "javascript": "js",
    "typescript": "ts",
    "shell": "sh",
    "bash": "sh",
    "zsh": "sh",
    "console": "sh",
    "yml": "yaml",
    "rust": "rs",
    "golang": "go",
    "c++": "cpp",
    "ruby": "rb",
    "markdown": "md",
    "text": "txt",
    "plaintext": "txt",
    "kotlin": "kt",
    "csharp": "cs",
    "c#": "cs",
    "perl": "pl",
    "haskell": "hs",
    "elixir": "ex",
}


def snippet_filename(language: str, number: int) -> str:
    """``snippet-<n>.<ext>``, the extension taken from the fence's language."""
    lang = language.strip().lower()
    ext = _EXTENSIONS.get(lang) or re.sub(r"[^a-z0-9]", "", lang)[:10] or "txt"
    return f"snippet-{number}.{ext}"


def _placeholder(block: Block, filename: str) -> Block:
    note = Span(SpanKind.ITALIC, children=(Span(SpanKind.TEXT, f"(code attached: {filename})"),))
    return replace(block, kind=BlockKind.PARAGRAPH, spans=(note,), code="", language="")


def _unlink_long(spans: tuple[Span, ...], max_url: int) -> tuple[Span, ...]:
    """Links whose target alone would crowd a message out become ``label: url`` text."""
    out: list[Span] = []
    for span in spans:
        if span.kind is SpanKind.LINK and len(span.url) > max_url:
            out.append(Span(SpanKind.TEXT, f"{PLAIN.spans(span.children)}: {span.url}"))
        elif span.children:
            out.append(replace(span, children=_unlink_long(span.children, max_url)))
        else:
            out.append(span)
    return tuple(out)


def _table_as_lines(block: Block) -> list[Block]:
    lines: list[Block] = []
    for n, row in enumerate(block.rows):
        spans: list[Span] = []
        for c, cell in enumerate(row):
            if c:
                spans.append(Span(SpanKind.TEXT, " | "))
            spans.extend(cell)
        lines.append(
            replace(
                block,
                kind=BlockKind.PARAGRAPH,
                spans=tuple(spans),
                rows=(),
                aligns=(),
                gap=block.gap if n == 0 else False,
                marker=block.marker if n == 0 else "",
                cut=block.cut if n == 0 else False,
            )
        )
    return lines


class _Measurer:
    """Render-then-measure for one splitting run, with the whole blocks' renders cached."""

    def __init__(self, profile: DialectProfile, limit: int) -> None:
        self.profile = profile
        self.limit = limit
        self.rich: RenderCache = {}
        self.bare: RenderCache = {}

    def text(self, blocks: list[Block]) -> str:
        return self.profile.renderer.render(blocks, self.rich)

    def plain(self, blocks: list[Block]) -> str:
        return PLAIN.render(blocks, self.bare)

    def fits(self, blocks: list[Block]) -> bool:
        measure = self.profile.measure
        return (
            measure(self.text(blocks)) <= self.limit and measure(self.plain(blocks)) <= self.limit
        )

    def full_enough(self, blocks: list[Block]) -> bool:
        return self.profile.measure(self.text(blocks)) * 2 >= self.limit

    def cut_plain(self, text: str) -> list[str]:
        """Hard-cut plain *text* into parts within the limit (the last-resort path)."""
        parts: list[str] = []
        while text:
            good, bad = 1, len(text) + 1
            if self.profile.measure(text) <= self.limit:
                good = len(text)
            else:
                while bad - good > 1:
                    mid = (good + bad) // 2
                    if self.profile.measure(text[:mid]) <= self.limit:
                        good = mid
                    else:
                        bad = mid
                good = grapheme_safe(text, good, 0)
            part, text = text[:good].strip(), text[good:]
            if part:
                parts.append(part)
        return parts


def _rows_fit(table: Block, measurer: _Measurer) -> bool:
    """Whether every row fits one message under the header (the split repeats it)."""
    if len(table.rows) <= 1:
        return measurer.fits([table])
    header = table.rows[0]
    return all(measurer.fits([replace(table, rows=(header, row))]) for row in table.rows[1:])


def _prepare(blocks: list[Block], measurer: _Measurer) -> tuple[list[Block], list[Attachment]]:
    """Take out code blocks no message can hold; flatten tables whose rows cannot fit."""
    out: list[Block] = []
    attachments: list[Attachment] = []
    max_url = measurer.limit // 4
    for block in blocks:
        if block.kind is BlockKind.CODE and not measurer.fits([block]):
            filename = snippet_filename(block.language, len(attachments) + 1)
            attachments.append(
                Attachment(
                    kind=AttachmentKind.DOCUMENT,
                    data=block.code.encode("utf-8"),
                    filename=filename,
                    mime_type="text/plain",
                )
            )
            out.append(_placeholder(block, filename))
        elif block.kind is BlockKind.TABLE and not _rows_fit(block, measurer):
            out.extend(_table_as_lines(block))
        elif block.spans:
            out.append(replace(block, spans=_unlink_long(block.spans, max_url)))
        else:
            out.append(block)
    return out, attachments


def present(
    markdown: str,
    dialect: Dialect | str | DialectProfile,
    limit: int | None = None,
    *,
    measure: Callable[[str], int] | str | None = None,
) -> Presentation:
    """Render *markdown* for *dialect* and split it into messages within the cap.

    *limit* overrides the dialect's own cap and *measure* the way it is counted (a
    callable, or ``"chars"``, ``"utf16"``, ``"utf8"`` as ``Channel.text_measure`` names
    them); the cap must be at least :data:`MIN_LIMIT`. Each chunk is rendered on its own,
    so its markup is complete; code blocks too large for one message come back as
    ``attachments`` (``snippet-1.py`` …, ``text/plain``) to send after the chunks, each
    replaced in the text by a short note.
    Whitespace-only input gives no chunks. Never raises on any text.
    """
    profile = dialect_profile(dialect, limit=limit, measure=measure)
    cap = profile.limit
    if cap < MIN_LIMIT:
        raise ValueError(f"a message limit of {cap} is too small; use at least {MIN_LIMIT}")
    measurer = _Measurer(profile, cap)
    with span_cache():
        blocks, attachments = _prepare(parse(markdown), measurer)
        pieces: list[Piece] = split_blocks(
            blocks,
            measurer.fits,
            measurer.plain,
            measurer.cut_plain,
            measurer.full_enough,
            max_positions=cap if counts_each_character(profile.measure) else None,
        )
        return _presentation(pieces, measurer, attachments)


def _presentation(
    pieces: list[Piece], measurer: _Measurer, attachments: list[Attachment]
) -> Presentation:
    profile = measurer.profile
    chunks: list[RenderedChunk] = []
    for part in pieces:
        if isinstance(part, str):
            chunk = RenderedChunk(part, part, formatted=False)
        else:
            text, plain = measurer.text(part), measurer.plain(part)
            if not text.strip() and not plain.strip():
                continue
            chunk = RenderedChunk(text, plain, formatted=profile.renderer.formatted)
        chunks.append(replace(chunk, notify=not chunks))
    return Presentation(chunks=chunks, attachments=attachments)
