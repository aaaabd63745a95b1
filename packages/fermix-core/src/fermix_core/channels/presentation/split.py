"""The boundary ladder: cut a long reply into messages that each fit the platform.

Positions are ``(block index, offset inside the block)`` in the intermediate form. Each rung
of the ladder is a sorted list of positions where a cut may fall:

1. SECTION — before a heading, or after a thematic break;
2. PARAGRAPH — between blocks a blank line separates;
3. LINE — between tight list items and table rows, and at line breaks inside a paragraph;
4. SENTENCE — after a sentence end (``.``, ``!``, ``?``, ``…`` and CJK stops) and its spaces;
5. WHITESPACE — after any run of spaces;

and a hard cut anywhere inside a paragraph as the last resort (a heading is never left at
the end of a message unless nothing else fits). From the current start, the splitter takes
the coarsest rung whose farthest fitting position fills at least half a message; when no
rung does, the coarsest rung with any fitting position, so a short message ending at a
sentence beats a long one cut mid-word. "Fits" is decided by rendering the piece and
measuring the result the way the platform counts — render, then measure — for the formatted
text and its plain fallback alike, so escaping, tags and link targets are all paid for.
Code blocks and rules are single positions, so no cut ever falls inside a fenced block; the
caller takes out code blocks too large for any message before splitting.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import replace
from enum import IntEnum

from .ir import Block, BlockKind, Span, SpanKind, plain_text

__all__ = [
    "Level",
    "Piece",
    "Pos",
    "block_rungs",
    "grapheme_safe",
    "inner_rungs",
    "piece",
    "split_blocks",
]

Pos = tuple[int, int]
#: A chunk: its blocks, or — when not even one character of markup fits — plain text.
Piece = list[Block] | str


class Level(IntEnum):
    SECTION = 0
    PARAGRAPH = 1
    LINE = 2
    SENTENCE = 3
    WHITESPACE = 4


SENTENCE_END = re.compile(r"[.!?…。！？]+[\"'”’)\]»]*\s+")
SPACES = re.compile(r"\s+")
_NEWLINE = re.compile("\n")
_TEXTUAL = (BlockKind.PARAGRAPH, BlockKind.HEADING)


def _joins_previous(char: str) -> bool:
    """A character that belongs to the one before it: a combining mark, a zero-width
    joiner, a variation selector or an emoji skin-tone modifier."""
    code = ord(char)
    return (
        unicodedata.combining(char) > 0
        or code in (0x200D, 0xFE0E, 0xFE0F, 0x20E3)
        or 0x1F3FB <= code <= 0x1F3FF
        or 0xE0020 <= code <= 0xE007F  # emoji tag sequences (subdivision flags)
    )


def grapheme_safe(text: str, pos: int, floor: int) -> int:
    """Move a hard cut at *pos* back so it does not split a character cluster (an emoji
    sequence, a letter and its accent), but never to *floor* or below."""
    cut = pos
    while (
        cut > floor + 1
        and cut < len(text)
        and (_joins_previous(text[cut]) or text[cut - 1] == "\u200d")
    ):
        cut -= 1
    return cut


def block_rungs(blocks: Sequence[Block]) -> list[list[int]]:
    """For each rung, the sorted indices ``i`` of blocks a cut may fall before."""
    rungs: list[list[int]] = [[] for _ in Level]
    for i in range(1, len(blocks)):
        block, before = blocks[i], blocks[i - 1]
        if before.kind is BlockKind.HEADING:
            # A heading stays with what follows it: cutting here is a last resort.
            rungs[Level.WHITESPACE].append(i)
        elif block.kind is BlockKind.HEADING or before.kind is BlockKind.RULE:
            rungs[Level.SECTION].append(i)
        elif block.gap:
            rungs[Level.PARAGRAPH].append(i)
        else:
            rungs[Level.LINE].append(i)
    return rungs


def inner_rungs(block: Block) -> list[list[int]]:
    """For each rung, the sorted offsets inside *block* a cut may fall at."""
    rungs: list[list[int]] = [[] for _ in Level]
    if block.kind in _TEXTUAL:
        text = plain_text(block.spans, code_mask="\0")
        size = len(text)
        for level, pattern in (
            (Level.LINE, _NEWLINE),
            (Level.SENTENCE, SENTENCE_END),
            (Level.WHITESPACE, SPACES),
        ):
            rungs[level] = [m.end() for m in pattern.finditer(text) if 0 < m.end() < size]
    elif block.kind is BlockKind.TABLE:
        rungs[Level.LINE] = list(range(1, block.size))
    return rungs


def _edge_space(spans: tuple[Span, ...], *, from_end: bool) -> int:
    """How many space positions *spans* start (or end) with; stops at the first other."""
    count = 0
    for span in reversed(spans) if from_end else spans:
        if span.kind is SpanKind.BREAK:
            count += 1
            continue
        if span.children:
            inner = _edge_space(span.children, from_end=from_end)
            count += inner
            if inner < span.size:
                return count
            continue
        text = span.text
        stripped = text.rstrip() if from_end else text.lstrip()
        count += len(text) - len(stripped)
        if stripped:
            return count
    return count


def _trim(block: Block, *, left: bool, right: bool) -> Block | None:
    """Drop the spaces a cut leaves at the edge of a message."""
    if block.kind not in _TEXTUAL:
        return block
    size = block.size
    lo = _edge_space(block.spans, from_end=False) if left else 0
    if lo >= size:
        return None
    hi = size - _edge_space(block.spans, from_end=True) if right else size
    if lo == 0 and hi == size:
        return block
    trimmed = block.slice(lo, hi)
    if trimmed is not None and lo and block.marker:
        trimmed = replace(trimmed, marker=block.marker)
    return trimmed


def piece(blocks: Sequence[Block], start: Pos, end: Pos) -> list[Block]:
    """The blocks between two positions, edge blocks sliced and their edge spaces dropped."""
    (si, so), (ei, eo) = start, end
    out: list[Block] = []
    for i in range(si, min(ei, len(blocks) - 1) + 1):
        if i == ei and eo == 0:
            break
        block = blocks[i]
        part = block.slice(so if i == si else 0, eo if i == ei else block.size)
        if part is not None:
            out.append(part)
    while out:
        first = _trim(out[0], left=True, right=len(out) == 1)
        if first is not None:
            out[0] = first
            break
        out.pop(0)
    while out:
        last = _trim(out[-1], left=False, right=True)
        if last is not None:
            out[-1] = last
            break
        out.pop()
    return out


def _normal(blocks: Sequence[Block], pos: Pos) -> Pos:
    i, off = pos
    return (i + 1, 0) if i < len(blocks) and off >= blocks[i].size else pos


def split_blocks(
    blocks: Sequence[Block],
    fits: Callable[[list[Block]], bool],
    plain: Callable[[list[Block]], str],
    cut_plain: Callable[[str], list[str]],
    full_enough: Callable[[list[Block]], bool] = lambda _: True,
    max_positions: int | None = None,
) -> list[Piece]:
    """Cut *blocks* into pieces that each satisfy *fits*.

    *full_enough* says a fitting piece is long enough to take on a coarse rung rather than
    look further down the ladder for a longer one. A piece is a list of blocks, except in
    the one case markup cannot fit at all — a single character's worth of a block still too
    long once rendered — where that block's *plain* text is cut by *cut_plain* and sent as
    plain text. *max_positions*, when given, is a count of positions no fitting piece can
    exceed (true when the platform counts every character at least once), which spares
    rendering pieces that are plainly too long.
    """
    splitter = _Splitter(blocks, fits, full_enough, max_positions)
    end: Pos = (len(blocks), 0)
    start: Pos = (0, 0)
    out: list[Piece] = []
    while start < end:
        frontier = splitter.frontier(start)
        if frontier == len(blocks):
            rest = piece(blocks, start, end)
            if rest:
                out.append(rest)
            break
        cut = splitter.best_cut(start, frontier)
        if cut is None:
            cut = splitter.hard_cut(start)
        if cut is None:
            # Not even one position of this block fits as markup: send its plain text.
            cut = (start[0] + 1, 0)
            out.extend(cut_plain(plain(piece(blocks, start, cut))))
        else:
            part = piece(blocks, start, cut)
            if part:
                out.append(part)
        start = cut
    return out


class _Splitter:
    def __init__(
        self,
        blocks: Sequence[Block],
        fits: Callable[[list[Block]], bool],
        full_enough: Callable[[list[Block]], bool],
        max_positions: int | None = None,
    ) -> None:
        self.blocks = blocks
        self.fits = fits
        self.full_enough = full_enough
        self.max_positions = max_positions
        self.rungs = block_rungs(blocks)
        self.inner: dict[int, list[list[int]]] = {}
        self.before = [0]
        for block in blocks:
            self.before.append(self.before[-1] + block.size)

    def _fits_to(self, start: Pos, end: Pos) -> bool:
        if self.max_positions is not None:
            (si, so), (ei, eo) = start, end
            if self.before[ei] + eo - self.before[si] - so > self.max_positions:
                return False
        return self.fits(piece(self.blocks, start, end))

    def frontier(self, start: Pos) -> int:
        """The largest ``j`` whose blocks up to (not including) ``j`` fit from *start*, or
        ``start``'s own block when not even its rest fits. Gallops, then bisects, so a probe
        renders at most about twice a message."""
        si = start[0]
        good, step, probe = si, 1, si + 1
        n = len(self.blocks)
        while probe <= n and self._fits_to(start, (probe, 0)):
            good, step = probe, step * 2
            probe = good + step
        bad = min(probe, n + 1)
        while bad - good > 1:
            mid = (good + bad) // 2
            if self._fits_to(start, (mid, 0)):
                good = mid
            else:
                bad = mid
        return good

    def best_cut(self, start: Pos, frontier: int) -> Pos | None:
        """The farthest fitting cut on the coarsest rung that fills enough of a message.

        A cut on a coarser rung is a cut on every finer one too (a paragraph break is also
        a line break), so each rung's farthest cut is the farthest on it or above it.
        """
        si, so = start
        fallback: Pos | None = None
        farthest: Pos | None = None
        inner = self.inner.get(frontier)
        if inner is None:
            inner = self.inner[frontier] = inner_rungs(self.blocks[frontier])
        for level in Level:
            best: Pos | None = None
            offsets = inner[level]
            lo = bisect_right(offsets, so) if frontier == si else 0
            if lo < len(offsets) and self._fits_to(start, (frontier, offsets[lo])):
                good, bad = lo, len(offsets)
                while bad - good > 1:
                    mid = (good + bad) // 2
                    if self._fits_to(start, (frontier, offsets[mid])):
                        good = mid
                    else:
                        bad = mid
                best = (frontier, offsets[good])
            else:
                indices = self.rungs[level]
                k = bisect_right(indices, frontier) - 1
                if k >= 0 and indices[k] > si:
                    best = (indices[k], 0)
            if best is None or (farthest is not None and best <= farthest):
                continue  # nothing farther than a coarser rung already offered
            farthest = best
            if self.full_enough(piece(self.blocks, start, best)):
                return best
            fallback = fallback or best
        return fallback

    def hard_cut(self, start: Pos) -> Pos | None:
        """The farthest fitting offset inside *start*'s block, or None if none fits."""
        i, off = start
        block = self.blocks[i]
        if block.kind not in _TEXTUAL or not self._fits_to(start, (i, off + 1)):
            return None
        good, bad = off + 1, block.size
        while bad - good > 1:
            mid = (good + bad) // 2
            if self._fits_to(start, (i, mid)):
                good = mid
            else:
                bad = mid
        good = grapheme_safe(plain_text(block.spans), good, off)
        return _normal(self.blocks, (i, good))
