"""Dialect renderers: the intermediate form → one platform's markup.

:class:`Renderer` renders plain text (Signal, and every platform's fallback when it rejects
formatted text); each dialect overrides only what it marks up differently. Every renderer
renders any sequence of blocks on its own, so a chunk cut by the splitter is complete markup:
no tag or marker is ever left open for the next message to close.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import ClassVar

from .ir import Block, BlockKind, Span, SpanKind

__all__ = [
    "DiscordRenderer",
    "PlainRenderer",
    "Renderer",
    "SlackRenderer",
    "TelegramRenderer",
    "WhatsAppRenderer",
    "span_cache",
]

RULE = "─" * 10
#: List nesting deeper than this is drawn at this depth, so indentation stays bounded.
MAX_INDENT_DEPTH = 4
#: Link schemes rendered as live links; any other target is shown as text.
LINK_SCHEMES = ("http://", "https://", "mailto:", "tg://")

#: Cache for one splitting run: ``id(block) -> (block, rendered)``. Holding the block keeps
#: its id from being reused while the entry lives.
RenderCache = dict[int, tuple[Block, str]]

#: While a reply is split, the render of each top-level span, so that rendering the many
#: trial pieces of one long paragraph costs a join, not a re-render. Keyed by renderer and
#: span identity; the entry holds the span, so its id cannot be reused meanwhile.
_SPAN_CACHE: ContextVar[dict[tuple[int, int], tuple[Span, str]] | None] = ContextVar(
    "fermix_presentation_span_cache", default=None
)


@contextmanager
def span_cache() -> Iterator[None]:
    """Cache top-level span renders for the duration of one splitting run."""
    token = _SPAN_CACHE.set({})
    try:
        yield
    finally:
        _SPAN_CACHE.reset(token)


def _hoist(inner: str, open_: str, close: str) -> str:
    """Wrap *inner* in markers, moving edge whitespace outside (``* x *`` never styles)."""
    core = inner.strip()
    if not core:
        return inner
    lead = inner[: len(inner) - len(inner.lstrip())]
    trail = inner[len(inner.rstrip()) :]
    return f"{lead}{open_}{core}{close}{trail}"


def _defuse_fences(code: str) -> str:
    """A run of three backticks inside a code block would end it early on the platforms
    with no longer fences (Discord, Slack, WhatsApp); zero-width spaces break it up.

    Every backtick of a run of three or more is separated from the next, so no run of
    any length leaves three together (replacing each ``` alone left one in a run of five:
    the last backtick of the replacement joined the two after it)."""
    if "```" not in code:
        return code
    return _FENCE_RUN.sub(_spaced_run, code)


_FENCE_RUN = re.compile("`{3,}")


def _spaced_run(run: re.Match[str]) -> str:
    return "\u200b".join(run.group())


def _same_target(label: str, url: str) -> bool:
    return label == url or url == f"mailto:{label}"


class Renderer:
    """Plain text: markers removed, links as ``label: url``, code verbatim and indented,
    quotes behind a ``│`` bar, tables as ``cell | cell`` lines."""

    name = "plain"
    #: Whether the output is markup the platform must be told to parse.
    formatted = False
    #: Bullet glyph per list depth (the last one repeats).
    bullets: tuple[str, ...] = ("•", "◦")
    quote_prefix = "│ "

    # ---- blocks -----------------------------------------------------------------------

    def render(self, blocks: Sequence[Block], cache: RenderCache | None = None) -> str:
        """Render *blocks* as one self-contained message body."""
        out: list[str] = []
        i, n = 0, len(blocks)
        while i < n:
            block = blocks[i]
            if block.quote and self.quotable(block):
                j = i
                while j < n and blocks[j].quote and self.quotable(blocks[j]):
                    j += 1
                piece = self.quote(self._join(blocks[i:j], cache))
            else:
                j = i + 1
                piece = self._block_cached(block, cache)
            if out:
                out.append("\n\n" if block.gap else "\n")
            out.append(piece)
            i = j
        return "".join(out)

    def quotable(self, block: Block) -> bool:
        """Whether a quoted *block* renders inside the quote (else on its own, after it)."""
        return True

    def _join(self, blocks: Sequence[Block], cache: RenderCache | None) -> str:
        out: list[str] = []
        for block in blocks:
            if out:
                out.append("\n\n" if block.gap else "\n")
            out.append(self._block_cached(block, cache))
        return "".join(out)

    def _block_cached(self, block: Block, cache: RenderCache | None) -> str:
        if cache is None:
            return self.block(block)
        hit = cache.get(id(block))
        if hit is not None and hit[0] is block:
            return hit[1]
        text = self.block(block)
        cache[id(block)] = (block, text)
        return text

    def block(self, block: Block) -> str:
        kind = block.kind
        if kind is BlockKind.HEADING:
            body = self.heading(block)
        elif kind is BlockKind.PARAGRAPH:
            body = self.paragraph(block.spans)
        elif kind is BlockKind.CODE:
            body = self.code_block(block.code.rstrip("\n"), block.language)
        elif kind is BlockKind.TABLE:
            body = self.table(block)
        else:
            body = self.rule()
        if block.depth:
            body = self.list_item(block, body)
        return body

    def list_item(self, block: Block, body: str) -> str:
        indent = "  " * (min(block.depth, MAX_INDENT_DEPTH) - 1)
        if block.kind in (BlockKind.CODE, BlockKind.TABLE):
            # Monospace blocks keep their own columns; the marker gets a line of its own.
            return f"{indent}{self.marker(block)}\n{body}" if block.marker else body
        lead = f"{indent}{self.marker(block)} " if block.marker else f"{indent}  "
        pad = "\n" + " " * len(lead)
        return lead + body.replace("\n", pad)

    def marker(self, block: Block) -> str:
        if block.marker == "-":
            depth = min(block.depth, len(self.bullets)) - 1
            return self.bullets[max(depth, 0)]
        return block.marker

    def heading(self, block: Block) -> str:
        return self.paragraph(block.spans)

    def paragraph(self, spans: tuple[Span, ...]) -> str:
        return self.spans(spans)

    def code_block(self, code: str, language: str) -> str:
        return "\n".join(f"    {line}" if line else "" for line in code.split("\n"))

    def rule(self) -> str:
        return RULE

    def quote(self, body: str) -> str:
        return "\n".join(
            self.quote_prefix + line if line else self.quote_prefix.rstrip()
            for line in body.split("\n")
        )

    # ---- tables -----------------------------------------------------------------------

    def cells(self, block: Block) -> list[list[str]]:
        """Each table cell as one line of plain text."""
        return [
            [PLAIN.spans(cell).replace("\n", " ").strip() for cell in row] for row in block.rows
        ]

    def table(self, block: Block) -> str:
        rows = self.cells(block)[1:] if block.continued else self.cells(block)
        return "\n".join(" | ".join(row) for row in rows)

    def grid(self, block: Block) -> str:
        """The table as aligned monospace columns with a rule under the header."""
        rows = self.cells(block)
        width = max((len(r) for r in rows), default=0)
        rows = [r + [""] * (width - len(r)) for r in rows]
        widths = [max(len(r[c]) for r in rows) for c in range(width)]
        aligns = list(block.aligns) + ["left"] * width

        def line(row: list[str]) -> str:
            cells = []
            for c, cell in enumerate(row):
                if aligns[c] == "right":
                    cells.append(cell.rjust(widths[c]))
                elif aligns[c] == "center":
                    cells.append(cell.center(widths[c]))
                else:
                    cells.append(cell.ljust(widths[c]))
            return " | ".join(cells).rstrip()

        lines = [line(rows[0])] if rows else []
        lines.append("-+-".join("-" * w for w in widths))
        lines.extend(line(r) for r in rows[1:])
        return "\n".join(lines)

    # ---- inline -----------------------------------------------------------------------

    def spans(self, spans: tuple[Span, ...], styles: frozenset[SpanKind] = frozenset()) -> str:
        cache = None if styles else _SPAN_CACHE.get()
        if cache is None:
            return "".join(self.span(span, styles) for span in spans)
        parts: list[str] = []
        me = id(self)
        for span in spans:
            hit = cache.get((me, id(span)))
            if hit is None or hit[0] is not span:
                hit = (span, self.span(span, styles))
                cache[(me, id(span))] = hit
            parts.append(hit[1])
        return "".join(parts)

    def span(self, span: Span, styles: frozenset[SpanKind]) -> str:
        """One inline span, inside the *styles* already open around it."""
        kind = span.kind
        if kind is SpanKind.TEXT:
            return self.text(span.text)
        if kind is SpanKind.CODE:
            return self.code_span(span.text)
        if kind is SpanKind.BREAK:
            return "\n"
        if kind is SpanKind.LINK:
            return self.link(span, styles)
        inner = self.spans(span.children, styles | {kind})
        return inner if kind in styles else self.style(kind, inner)

    def text(self, text: str) -> str:
        return text

    def code_span(self, code: str) -> str:
        return code

    def style(self, kind: SpanKind, inner: str) -> str:
        return inner

    def link(self, span: Span, styles: frozenset[SpanKind]) -> str:
        label = self.spans(span.children, styles)
        url = span.url
        if not url or _same_target(PLAIN.spans(span.children), url):
            return label if not url else self.text(url)
        return f"{label}: {self.text(url)}"


class PlainRenderer(Renderer):
    """Signal's dialect and everyone's fallback: clean plain text."""


PLAIN = PlainRenderer()


class TelegramRenderer(Renderer):
    """Telegram Bot API HTML (``parse_mode="HTML"``)."""

    name = "telegram"
    formatted = True
    #: A quote longer than this (characters or lines) is sent collapsed until tapped.
    expand_chars = 300
    expand_lines = 4
    _tags: ClassVar[Mapping[SpanKind, str]] = {
        SpanKind.BOLD: "b",
        SpanKind.ITALIC: "i",
        SpanKind.STRIKE: "s",
    }

    def text(self, text: str) -> str:
        return html.escape(text, quote=False)

    def code_span(self, code: str) -> str:
        return f"<code>{html.escape(code, quote=False)}</code>"

    def span(self, span: Span, styles: frozenset[SpanKind]) -> str:
        if styles and span.kind is SpanKind.CODE:
            # The Bot API lets no entity contain code: inside bold, italic, strike or a
            # link, inline code is shown as its text.
            return self.text(span.text)
        return super().span(span, styles)

    def style(self, kind: SpanKind, inner: str) -> str:
        tag = self._tags[kind]
        return f"<{tag}>{inner}</{tag}>" if inner else inner

    def quotable(self, block: Block) -> bool:
        # A quote entity cannot contain a pre entity: code and tables close the quote.
        return block.kind not in (BlockKind.CODE, BlockKind.TABLE)

    def link(self, span: Span, styles: frozenset[SpanKind]) -> str:
        if span.url.startswith(LINK_SCHEMES):
            label = self.spans(span.children, styles | {SpanKind.LINK})
            return f'<a href="{html.escape(span.url, quote=True)}">{label}</a>'
        return super().link(span, styles)

    def heading(self, block: Block) -> str:
        return self.style(SpanKind.BOLD, self.spans(block.spans, frozenset({SpanKind.BOLD})))

    def code_block(self, code: str, language: str) -> str:
        body = html.escape(code, quote=False)
        if language:
            lang = html.escape(language, quote=True)
            return f'<pre><code class="language-{lang}">{body}</code></pre>'
        return f"<pre>{body}</pre>"

    def table(self, block: Block) -> str:
        return f"<pre>{html.escape(self.grid(block), quote=False)}</pre>"

    def quote(self, body: str) -> str:
        long = len(body) > self.expand_chars or body.count("\n") >= self.expand_lines
        return f"<blockquote{' expandable' if long else ''}>{body}</blockquote>"


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class SlackRenderer(Renderer):
    """Slack mrkdwn: ``*bold*``, ``_italic_``, ``~strike~``, ``<url|label>``."""

    name = "slack"
    formatted = True
    quote_prefix = "> "
    _marks: ClassVar[Mapping[SpanKind, str]] = {
        SpanKind.BOLD: "*",
        SpanKind.ITALIC: "_",
        SpanKind.STRIKE: "~",
    }

    def text(self, text: str) -> str:
        return _slack_escape(_defuse_fences(text))

    def code_span(self, code: str) -> str:
        code = _slack_escape(_defuse_fences(code))
        return f"`{code}`" if code.strip() else code

    def style(self, kind: SpanKind, inner: str) -> str:
        mark = self._marks[kind]
        return _hoist(inner, mark, mark)

    def link(self, span: Span, styles: frozenset[SpanKind]) -> str:
        url = span.url
        if not url.startswith(LINK_SCHEMES):
            return super().link(span, styles)
        target = _slack_escape(url).replace("|", "%7C")
        if _same_target(PLAIN.spans(span.children), url):
            return f"<{target}>"
        label = self.spans(span.children, styles).replace("|", "¦")
        return f"<{target}|{label}>"

    def heading(self, block: Block) -> str:
        return self.style(SpanKind.BOLD, self.spans(block.spans, frozenset({SpanKind.BOLD})))

    def code_block(self, code: str, language: str) -> str:
        return f"```\n{_slack_escape(_defuse_fences(code))}\n```"

    def table(self, block: Block) -> str:
        return f"```\n{_slack_escape(_defuse_fences(self.grid(block)))}\n```"


class WhatsAppRenderer(Renderer):
    """WhatsApp styles: ``*bold*``, ``_italic_``, ``~strike~``, monospace, ``label: url``."""

    name = "whatsapp"
    formatted = True
    quote_prefix = "> "
    _marks: ClassVar[Mapping[SpanKind, str]] = {
        SpanKind.BOLD: "*",
        SpanKind.ITALIC: "_",
        SpanKind.STRIKE: "~",
    }

    def text(self, text: str) -> str:
        return _defuse_fences(text)

    def code_span(self, code: str) -> str:
        code = _defuse_fences(code)
        return f"`{code}`" if code.strip() else code

    def style(self, kind: SpanKind, inner: str) -> str:
        mark = self._marks[kind]
        return _hoist(inner, mark, mark)

    def heading(self, block: Block) -> str:
        return self.style(SpanKind.BOLD, self.spans(block.spans, frozenset({SpanKind.BOLD})))

    def code_block(self, code: str, language: str) -> str:
        return f"```{_defuse_fences(code)}```" if code.strip() else code

    def table(self, block: Block) -> str:
        return f"```{_defuse_fences(self.grid(block))}```"


_DISCORD_SPECIAL = re.compile(r"([\\*_~`|<])")
_DISCORD_MASS_MENTION = re.compile(r"@(everyone|here)\b")
_DISCORD_URL = re.compile(r"(https?://\S+)")
_DISCORD_LINE_START = re.compile(r"(?m)^(\s*)(#|>|[-+*](?=\s)|\d+(?=[.)]\s))")


class DiscordRenderer(Renderer):
    """Discord Markdown, normalized from the same form (Discord renders it natively).

    Discord has no tables, so tables go out as code blocks; headings deeper than ``###`` are
    bold lines. Link targets are wrapped in ``<…>`` so they do not unfurl into embeds.
    """

    name = "discord"
    formatted = True
    quote_prefix = "> "
    bullets = ("-",)
    _marks: ClassVar[Mapping[SpanKind, str]] = {
        SpanKind.BOLD: "**",
        SpanKind.ITALIC: "*",
        SpanKind.STRIKE: "~~",
    }

    def text(self, text: str) -> str:
        # Mentions in the model's text never ping: "<@id>" and "<#channel>" are escaped and
        # "@everyone" / "@here" get a zero-width space (allowed_mentions is the adapter's
        # own guard; this one holds whatever the adapter sends).
        text = _DISCORD_MASS_MENTION.sub("@\u200b\\1", text)
        parts = _DISCORD_URL.split(text)
        return "".join(
            part if i % 2 else _DISCORD_SPECIAL.sub(r"\\\1", part) for i, part in enumerate(parts)
        )

    def paragraph(self, spans: tuple[Span, ...]) -> str:
        return _DISCORD_LINE_START.sub(r"\1\\\2", self.spans(spans))

    def code_span(self, code: str) -> str:
        if not code.strip():
            return code
        ticks = "``" if "`" in code else "`"
        pad = " " if code.startswith("`") or code.endswith("`") else ""
        return f"{ticks}{pad}{code}{pad}{ticks}"

    def style(self, kind: SpanKind, inner: str) -> str:
        mark = self._marks[kind]
        return _hoist(inner, mark, mark)

    def link(self, span: Span, styles: frozenset[SpanKind]) -> str:
        url = span.url
        if not url.startswith(LINK_SCHEMES):
            return super().link(span, styles)
        if _same_target(PLAIN.spans(span.children), url):
            return f"<{url}>"
        label = self.spans(span.children, styles).replace("[", "\\[").replace("]", "\\]")
        return f"[{label}](<{url}>)"

    def heading(self, block: Block) -> str:
        inner = self.spans(block.spans)
        if block.level <= 3 and not block.depth and not block.quote:
            return f"{'#' * block.level} {inner}"
        return self.style(SpanKind.BOLD, self.spans(block.spans, frozenset({SpanKind.BOLD})))

    def code_block(self, code: str, language: str) -> str:
        lang = language if re.fullmatch(r"[\w+#.-]{1,32}", language) else ""
        return f"```{lang}\n{_defuse_fences(code)}\n```"

    def table(self, block: Block) -> str:
        return f"```\n{_defuse_fences(self.grid(block))}\n```"
