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
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import replace
from enum import IntEnum

from .ir import Block, BlockKind, plain_text

__all__ = ["Level", "Piece", "Pos", "boundaries", "piece", "split_blocks"]

Pos = tuple[int, int]
#: A chunk: its blocks, or — when not even one character of markup fits — plain text.
Piece = list[Block] | str


class Level(IntEnum):
    SECTION = 0
    PARAGRAPH = 1
    LINE = 2
    SENTENCE = 3
    WHITESPACE = 4


_SENTENCE_END = re.compile(r"[.!?…。！？]+[\"'”’)\]»]*\s+")
_SPACES = re.compile(r"\s+")
_TEXTUAL = (BlockKind.PARAGRAPH, BlockKind.HEADING)


def boundaries(blocks: Sequence[Block]) -> list[list[Pos]]:
    """The cut positions of every rung, each list sorted."""
    rungs: list[list[Pos]] = [[] for _ in Level]
    for i, block in enumerate(blocks):
        if i:
            if blocks[i - 1].kind is BlockKind.HEADING:
                # A heading stays with what follows it: cutting here is a last resort.
                rungs[Level.WHITESPACE].append((i, 0))
            elif block.kind is BlockKind.HEADING or blocks[i - 1].kind is BlockKind.RULE:
                rungs[Level.SECTION].append((i, 0))
            elif block.gap:
                rungs[Level.PARAGRAPH].append((i, 0))
            else:
                rungs[Level.LINE].append((i, 0))
        if block.kind in _TEXTUAL:
            text = plain_text(block.spans, code_mask="\0")
            size = len(text)
            for found in re.finditer("\n", text):
                if found.end() < size:
                    rungs[Level.LINE].append((i, found.end()))
            for level, pattern in ((Level.SENTENCE, _SENTENCE_END), (Level.WHITESPACE, _SPACES)):
                for found in pattern.finditer(text):
                    if 0 < found.end() < size:
                        rungs[level].append((i, found.end()))
        elif block.kind is BlockKind.TABLE:
            rungs[Level.LINE].extend((i, r) for r in range(1, block.size))
    return rungs


def _trim(block: Block, *, left: bool, right: bool) -> Block | None:
    """Drop the spaces a cut leaves at the edge of a message."""
    if block.kind not in _TEXTUAL:
        return block
    text = plain_text(block.spans)
    lo = len(text) - len(text.lstrip()) if left else 0
    hi = len(text.rstrip()) if right else len(text)
    if lo >= hi:
        return None
    if lo == 0 and hi == len(text):
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
) -> list[Piece]:
    """Cut *blocks* into pieces that each satisfy *fits*.

    *full_enough* says a fitting piece is long enough to take on a coarse rung rather than
    look further down the ladder for a longer one. A piece is a list of blocks, except in
    the one case markup cannot fit at all — a single character's worth of a block still too
    long once rendered — where that block's *plain* text is cut by *cut_plain* and sent as
    plain text.
    """
    rungs = boundaries(blocks)
    end: Pos = (len(blocks), 0)
    start: Pos = (0, 0)
    out: list[Piece] = []
    while start < end:
        rest = piece(blocks, start, end)
        if not rest:
            break
        if fits(rest):
            out.append(rest)
            break
        cut = _best_cut(blocks, rungs, start, end, fits, full_enough)
        if cut is None:
            cut = _hard_cut(blocks, start, fits)
        if cut is None:
            # Not even one position of this block fits as markup: send its plain text.
            cut = (start[0] + 1, 0)
            text = plain(piece(blocks, start, cut))
            out.extend(cut_plain(text))
        else:
            part = piece(blocks, start, cut)
            if part:
                out.append(part)
        start = cut
    return out


def _best_cut(
    blocks: Sequence[Block],
    rungs: list[list[Pos]],
    start: Pos,
    end: Pos,
    fits: Callable[[list[Block]], bool],
    full_enough: Callable[[list[Block]], bool],
) -> Pos | None:
    fallback: Pos | None = None
    for positions in rungs:
        lo, hi = bisect_right(positions, start), bisect_left(positions, end)
        if lo >= hi or not fits(piece(blocks, start, positions[lo])):
            continue
        # Largest fitting index in [lo, hi): fitting is monotone in the end position.
        good, bad = lo, hi
        while bad - good > 1:
            mid = (good + bad) // 2
            if fits(piece(blocks, start, positions[mid])):
                good = mid
            else:
                bad = mid
        if full_enough(piece(blocks, start, positions[good])):
            return positions[good]
        fallback = fallback or positions[good]
    return fallback


def _hard_cut(
    blocks: Sequence[Block], start: Pos, fits: Callable[[list[Block]], bool]
) -> Pos | None:
    i, off = start
    block = blocks[i]
    if block.kind not in _TEXTUAL or not fits(piece(blocks, start, (i, off + 1))):
        return None
    good, bad = off + 1, block.size
    while bad - good > 1:
        mid = (good + bad) // 2
        if fits(piece(blocks, start, (i, mid))):
            good = mid
        else:
            bad = mid
    return _normal(blocks, (i, good))
