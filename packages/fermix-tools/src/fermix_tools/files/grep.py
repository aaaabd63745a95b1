"""Content matching for ``content_search``: ripgrep when installed, the ``regex`` engine
otherwise.

Both backends search the same vetted file list (see :mod:`fermix_tools.files.walk`) and
return the same :class:`Match` records, so the tool's output does not depend on which one
ran beyond speed. ripgrep's regex dialect lacks look-around and back-references; a pattern
it rejects is searched again with the ``regex`` module (Python ``re`` syntax), which has
both; it runs with the GIL released and a time limit per line, because a backtracking
pattern (``(a+)+b``) can take exponential time.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fermix_core.tool import ToolError

from fermix_tools.files.common import SNIFF_BYTES, open_regular
from fermix_tools.files.walk import FileEntry

#: Characters of a matching line shown; the rest is cut with a marker.
MAX_COLUMNS = 300
#: Path bytes passed to one ripgrep process (well under the OS argument limit).
_ARGV_BUDGET = 96 * 1024
#: Longest one line may take to match before the search stops and says why.
LINE_MATCH_LIMIT = 2.0
_RG_REGEX_ERROR = ("regex parse error", "error parsing regex", "regex could not be compiled")


@dataclass(frozen=True)
class Match:
    path: Path
    line: int
    text: str


@dataclass
class SearchResult:
    matches: list[Match] = field(default_factory=list)
    #: More matches existed than were collected.
    more: bool = False
    backend: str = "python"
    skipped_binary: int = 0
    stopped: str | None = None


def find_rg() -> str | None:
    """The ripgrep executable, if one is on ``PATH``."""
    return shutil.which("rg")


def clip(text: str) -> str:
    text = text.rstrip("\r\n")
    if len(text) > MAX_COLUMNS:
        return f"{text[:MAX_COLUMNS]} …[line cut at {MAX_COLUMNS} characters]"
    return text


# --------------------------------------------------------------------------- python


def search_python(
    files: Sequence[FileEntry],
    regex: Any,
    *,
    max_matches: int,
    deadline: float | None = None,
) -> SearchResult:
    """Line-by-line search over *files* with a compiled ``regex`` pattern (a stdlib ``re``
    pattern works too, without the time limit); binary files (NUL in the head) are skipped."""
    import regex as regex_engine  # imported with the first search, not with the tool list

    timed = isinstance(regex, regex_engine.Pattern)
    result = SearchResult(backend="python")
    for entry in files:
        if deadline is not None and time.monotonic() > deadline:
            result.stopped = "the search ran out of time; narrow root or glob"
            return result
        try:
            fd, _info = open_regular(entry.real)
        except ToolError:
            continue  # swapped for a link or a special file since the walk: not read
        try:
            with os.fdopen(fd, "rb") as handle:
                if b"\0" in handle.read(SNIFF_BYTES):
                    result.skipped_binary += 1
                    continue
                handle.seek(0)
                for number, raw in enumerate(handle, start=1):
                    line = raw.decode("utf-8", errors="replace")
                    try:
                        found = (
                            regex.search(line, timeout=LINE_MATCH_LIMIT, concurrent=True)
                            if timed
                            else regex.search(line)
                        )
                    except TimeoutError:
                        result.stopped = (
                            f"the pattern took over {LINE_MATCH_LIMIT:g} s on line {number} of "
                            f"{entry.path} and the search stopped; it backtracks (nested "
                            "repeats such as (a+)+ or (.*)*): simplify it"
                        )
                        return result
                    if found:
                        if len(result.matches) >= max_matches:
                            result.more = True
                            return result
                        result.matches.append(Match(entry.path, number, clip(line)))
        except OSError:
            continue
    return result


# --------------------------------------------------------------------------- ripgrep


class RgPatternError(Exception):
    """ripgrep cannot compile the pattern (the caller retries with Python ``re``)."""


async def search_rg(
    rg: str,
    root: Path,
    files: Sequence[FileEntry],
    pattern: str,
    *,
    ignore_case: bool,
    max_matches: int,
    env: dict[str, str],
    timeout: float,
    policy: Any,
    ctx: Any,
) -> SearchResult:
    """Run ripgrep over *files* in argv-sized batches until *max_matches* are found,
    confined read-only by *policy*."""
    result = SearchResult(backend="ripgrep")
    order = {entry.relative: index for index, entry in enumerate(files)}
    started = time.monotonic()
    for batch in _batches([entry.relative for entry in files]):
        remaining = timeout - (time.monotonic() - started)
        if remaining <= 0:
            result.stopped = "the search ran out of time; narrow root or glob"
            return result
        argv = [
            rg,
            "--no-config",
            "--no-heading",
            "--with-filename",
            "--line-number",
            "--null",
            "--color=never",
            # No BOM sniffing: UTF-16 text counts as binary here, as in the Python backend.
            "--encoding=none",
            f"--max-count={max_matches + 1}",
            # A matched multi-megabyte line would eat the capture budget on its own.
            f"--max-columns={MAX_COLUMNS * 4}",
            "--max-columns-preview",
            *(["--ignore-case"] if ignore_case else []),
            "-e",
            pattern,
            "--",
            *batch,
        ]
        outcome = await policy.run(argv, cwd=root, env=env, ctx=ctx, write=False, timeout=remaining)
        if outcome.exit_code == 2 and any(s in outcome.stderr for s in _RG_REGEX_ERROR):
            raise RgPatternError(outcome.stderr.strip())
        if outcome.timed_out:
            result.stopped = "the search ran out of time; narrow root or glob"
        _parse(outcome.stdout, order, files, result, max_matches)
        if result.more or result.stopped:
            return result
        if outcome.truncated:
            result.more = True
            return result
    return result


def _parse(
    stdout: str,
    order: dict[str, int],
    files: Sequence[FileEntry],
    result: SearchResult,
    max_matches: int,
) -> None:
    """Add one batch's matches in walk order (ripgrep prints files as its threads finish)."""
    found: list[tuple[int, int, str]] = []
    for line in stdout.splitlines():
        name, sep, rest = line.partition("\0")
        if not sep:
            # "<file>: binary file matches (...)" notices carry no NUL separator.
            if "binary file matches" in line:
                result.skipped_binary += 1
            continue
        number, colon, text = rest.partition(":")
        index = order.get(name)
        if index is None or not colon or not number.isdigit():
            continue
        found.append((index, int(number), text))
    found.sort(key=lambda item: (item[0], item[1]))
    for index, number, text in found:
        if len(result.matches) >= max_matches:
            result.more = True
            return
        result.matches.append(Match(files[index].path, number, clip(text)))


def _batches(paths: list[str]) -> list[list[str]]:
    batches: list[list[str]] = []
    current: list[str] = []
    size = 0
    for path in paths:
        cost = len(path.encode("utf-8", "surrogateescape")) + 1
        if current and size + cost > _ARGV_BUDGET:
            batches.append(current)
            current, size = [], 0
        current.append(path)
        size += cost
    if current:
        batches.append(current)
    return batches


def rg_env(policy: Any) -> dict[str, str]:
    """The child environment for ripgrep: the sandbox's, minus ripgrep's own config hook."""
    env = dict(policy.child_env())
    env.pop("RIPGREP_CONFIG_PATH", None)
    return env
