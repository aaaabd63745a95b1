"""Cutters for partial Markdown, for the stream controller.

Streaming keeps the reply as Markdown source and sends it piece by piece, so these functions
answer with *source offsets*: ``markdown[:cut]`` goes out now (through :func:`~.present`),
``markdown[cut:]`` keeps streaming. A cut is only ever placed where both halves parse to the
same content the whole did — at the start of a top-level block or list item, or inside a
paragraph where no emphasis, link or code span straddles it — and never inside a fenced code
block, open or closed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from .dialect import Dialect, DialectProfile, dialect_profile
from .ir import Block, BlockKind
from .parse import parse
from .render import PLAIN, RenderCache
from .split import SENTENCE_END, SPACES

__all__ = ["BLOCK_MAX_CHARS", "BLOCK_MIN_CHARS", "block_cut", "rendered_length", "seal_point"]

#: Block-mode message size, in rendered characters of the channel's measure.
BLOCK_MIN_CHARS = 800
BLOCK_MAX_CHARS = 1200

_NEWLINE = re.compile(r"\r\n|\r|\n")
#: How many offsets a hard cut steps back looking for one that splits no markup.
_HARD_CUT_TRIES = 24
_WS = re.compile(r"\s+")


def _line_starts(markdown: str) -> list[int]:
    """Offset of each source line, counted the way markdown-it counts lines."""
    return [0, *(m.end() for m in _NEWLINE.finditer(markdown))]


def rendered_length(markdown: str, dialect: Dialect | str | DialectProfile) -> int:
    """The length of *markdown* rendered for *dialect*, in the dialect's own measure."""
    profile = dialect_profile(dialect)
    return profile.measure(profile.renderer.render(parse(markdown)))


def _is_section(blocks: Sequence[Block], i: int) -> bool:
    return blocks[i].kind is BlockKind.HEADING or blocks[i - 1].kind is BlockKind.RULE


def _after_heading(blocks: Sequence[Block], i: int) -> bool:
    """A cut right after a heading would strand it at the end of a message."""
    return blocks[i - 1].kind is BlockKind.HEADING


def _largest_within(cands: Sequence[int], size: Callable[[int], int], max_rendered: int) -> int:
    """Index of the last candidate whose prefix renders within *max_rendered*, or -1."""
    good, bad = -1, len(cands)
    while bad - good > 1:
        mid = (good + bad) // 2
        if size(cands[mid]) <= max_rendered:
            good = mid
        else:
            bad = mid
    return good


def seal_point(
    markdown: str,
    dialect: Dialect | str | DialectProfile,
    max_rendered: int,
    *,
    min_rendered: int = 0,
) -> int | None:
    """Where to seal a draft card: the longest prefix of *markdown* that ends before a
    section heading — else before a paragraph — and renders to at most *max_rendered*
    (and at least *min_rendered*), as a source offset; None when there is no such place.
    """
    profile = dialect_profile(dialect)
    blocks = parse(markdown)
    starts = _line_starts(markdown)
    cache: RenderCache = {}

    def size_before(i: int) -> int:
        return profile.measure(profile.renderer.render(blocks[:i], cache))

    cuts = [i for i in range(1, len(blocks)) if blocks[i].cut and not _after_heading(blocks, i)]
    headings = [i for i in cuts if _is_section(blocks, i)]
    paragraphs = [i for i in cuts if blocks[i].gap]
    for cands in (headings, paragraphs):
        best = _largest_within(cands, size_before, max_rendered)
        if best >= 0 and size_before(cands[best]) >= min_rendered:
            return starts[blocks[cands[best]].line]
    return None


def _nonspace(text: str) -> str:
    return _WS.sub("", text)


def _clean_inside(markdown: str, a: int, cut: int, b: int) -> bool:
    """True when cutting paragraph source ``[a, b)`` at *cut* changes nothing it shows."""
    left, right = parse(markdown[a:cut]), parse(markdown[cut:b])
    for part in (left, right):
        if any(blk.kind is not BlockKind.PARAGRAPH or blk.depth or blk.quote for blk in part):
            return False
    whole = PLAIN.render(parse(markdown[a:b]))
    return _nonspace(PLAIN.render(left) + PLAIN.render(right)) == _nonspace(whole)


def block_cut(
    markdown: str,
    dialect: Dialect | str | DialectProfile,
    *,
    min_rendered: int = BLOCK_MIN_CHARS,
    max_rendered: int = BLOCK_MAX_CHARS,
) -> int | None:
    """Block mode's chunker: where to cut buffered *markdown* into a message now.

    None while the buffer still renders within *max_rendered* (keep buffering; flush it
    whole when the item completes or on the idle timer), and while it is one open fenced
    block. Otherwise the source offset of the best cut on the ladder — section, paragraph,
    line, sentence end, space, hard cut — whose prefix renders between *min_rendered* and
    *max_rendered*; a cut shorter than *min_rendered* only before a block that cannot be cut
    (a code fence), and a prefix longer than *max_rendered* only when it is one closed code
    block. Call it again on the rest: several messages may be ready at once.
    """
    profile = dialect_profile(dialect)

    def size(cut: int) -> int:
        return profile.measure(profile.renderer.render(parse(markdown[:cut])))

    if size(len(markdown)) <= max_rendered:
        return None
    blocks = parse(markdown)
    starts = _line_starts(markdown)
    end_of = len(markdown)

    def offset(line: int) -> int:
        return starts[line] if line < len(starts) else end_of

    sections: list[int] = []
    paragraphs: list[int] = []
    lines: list[int] = []
    for i in range(1, len(blocks)):
        if blocks[i].cut and not _after_heading(blocks, i):
            rung = sections if _is_section(blocks, i) else paragraphs if blocks[i].gap else lines
            rung.append(offset(blocks[i].line))
    # Inside top-level paragraphs: line starts, sentence ends, spaces (checked one by one).
    inner: list[list[tuple[int, int, int]]] = [[], [], []]
    for blk in blocks:
        if blk.kind is not BlockKind.PARAGRAPH or not blk.cut or blk.depth or blk.quote:
            continue
        a, b = offset(blk.line), offset(blk.end)
        inner[0].extend((offset(n), a, b) for n in range(blk.line + 1, blk.end))
        for rung, pattern in ((inner[1], SENTENCE_END), (inner[2], SPACES)):
            rung.extend((a + m.end(), a, b) for m in pattern.finditer(markdown, a, b))

    for cands in (sections, paragraphs, lines):
        best = _largest_within(cands, size, max_rendered)
        if best >= 0 and size(cands[best]) >= min_rendered:
            return cands[best]
    for rung in inner:
        rung = [c for c in rung if c[1] < c[0] < c[2]]
        best = _largest_within([c[0] for c in rung], size, max_rendered)
        while best >= 0 and size(rung[best][0]) >= min_rendered:
            cut, a, b = rung[best]
            if _clean_inside(markdown, a, cut, b):
                return cut
            best -= 1
    # Nothing on the ladder in the window: a short message before an uncuttable block...
    every = sorted({*sections, *paragraphs, *lines})
    best = _largest_within(every, size, max_rendered)
    if best >= 0 and every[best] > 0:
        return every[best]
    if blocks and blocks[0].kind is BlockKind.CODE:
        # ...or a closed code block on its own (present() attaches it if it is too long).
        return every[0] if every else None
    return _hard_cut(markdown, blocks, offset, size, max_rendered)


def _hard_cut(
    markdown: str,
    blocks: Sequence[Block],
    offset: Callable[[int], int],
    size: Callable[[int], int],
    max_rendered: int,
) -> int | None:
    """A cut inside the first paragraph at the largest clean offset within the window."""
    for blk in blocks:
        if blk.kind is not BlockKind.PARAGRAPH or not blk.cut or blk.depth or blk.quote:
            continue
        a, b = offset(blk.line), offset(blk.end)
        cands = list(range(a + 1, b))
        best = _largest_within(cands, size, max_rendered)
        tries = 0
        while best >= 0 and tries < _HARD_CUT_TRIES:
            if _clean_inside(markdown, a, cands[best], b):
                return cands[best]
            best -= 1
            tries += 1
        return cands[best] if best >= 0 else None
    return None
