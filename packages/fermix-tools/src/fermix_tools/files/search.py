"""``glob_search`` (files by name) and ``content_search`` (lines by regex) under one root.

Results are capped and the cap is announced with what to narrow, because an uncapped
search over a home directory is both slow and a context-window flood. Paths are printed
absolute so any of them can be handed straight to ``file_read``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
from fermix_core.tool import Tool, ToolContext, ToolError, ToolOutput
from pydantic import BaseModel, ConfigDict, Field

from fermix_tools.files import grep
from fermix_tools.files.common import sandbox, working_dir
from fermix_tools.files.walk import FileEntry, Glob, WalkStats, compile_glob, walk_files

MAX_GLOB_RESULTS = 500
MAX_CONTENT_MATCHES = 200
#: Files larger than this are not searched (logs and dumps drown the results).
MAX_SEARCH_FILE_BYTES = 20 * 1024 * 1024
SEARCH_TIMEOUT = 60.0


class GlobSearchArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pattern: str = Field(
        min_length=1,
        max_length=1000,
        description=(
            "Glob relative to root: '*' and '?' within a name, '**' across directories, "
            "'{a,b}' alternatives. Without '/', matches names at any depth ('*.py')."
        ),
    )
    root: str | None = Field(
        default=None,
        max_length=4096,
        description="Directory to search (default: the current directory).",
    )


class ContentSearchArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pattern: str = Field(
        min_length=1, max_length=1000, description="Regular expression searched line by line."
    )
    root: str | None = Field(
        default=None,
        max_length=4096,
        description="Directory to search (default: the current directory).",
    )
    glob: str | None = Field(
        default=None,
        max_length=1000,
        description="Only search files whose path matches this glob (e.g. '*.py').",
    )
    case_insensitive: bool = Field(default=False, description="Ignore letter case.")


class GlobSearch(Tool[GlobSearchArgs]):
    async def run(self, args: GlobSearchArgs, ctx: ToolContext) -> ToolOutput:
        policy = sandbox(ctx)
        root = working_dir(policy, ctx, args.root)
        matcher = compile_glob(args.pattern)
        stats = WalkStats()
        # Off the event loop, bounded by SEARCH_TIMEOUT; /stop abandons it at once.
        found = await anyio.to_thread.run_sync(
            _glob, root, policy, ctx, stats, matcher, abandon_on_cancel=True
        )
        shown = found[:MAX_GLOB_RESULTS]
        lines = [f"{len(found)} file(s) matching {args.pattern!r} under {root}:"]
        lines.extend(str(entry.path) for entry in shown)
        notes = stats.notes()
        if len(found) > len(shown):
            notes.insert(
                0,
                f"showing the first {len(shown)} of {len(found)}; narrow the pattern or root",
            )
        if not found:
            lines = [f"no files matching {args.pattern!r} under {root}"]
        return ToolOutput(
            content=_with_notes(lines, notes),
            data={
                "root": str(root),
                "total": len(found),
                "paths": [str(entry.path) for entry in shown],
            },
        )


def _glob(
    root: Path, policy: Any, ctx: ToolContext, stats: WalkStats, matcher: Glob
) -> list[FileEntry]:
    deadline = time.monotonic() + SEARCH_TIMEOUT
    return [
        entry
        for entry in walk_files(root, policy, ctx, stats, deadline=deadline)
        if matcher.match(entry.relative)
    ]


class ContentSearch(Tool[ContentSearchArgs]):
    async def run(self, args: ContentSearchArgs, ctx: ToolContext) -> ToolOutput:
        policy = sandbox(ctx)
        root = working_dir(policy, ctx, args.root)
        # The third-party engine (timeouts, no catastrophic backtracking) costs ~3 MiB to
        # import: paid by the first content search, not by every process listing tools.
        import regex as re

        matcher = compile_glob(args.glob) if args.glob else None
        flags = re.IGNORECASE if args.case_insensitive else 0
        try:
            regex = re.compile(args.pattern, flags)
        except re.error as exc:
            raise ToolError(
                f"pattern {args.pattern!r} is not a valid regular expression: {exc}. "
                "Escape special characters (e.g. '\\(' or '\\.') to search for them literally."
            ) from None
        stats = WalkStats()
        deadline = time.monotonic() + SEARCH_TIMEOUT
        files, too_big = await anyio.to_thread.run_sync(
            _candidates, root, policy, ctx, stats, matcher, deadline, abandon_on_cancel=True
        )
        result = await _search(policy, ctx, root, files, args, regex, deadline)
        notes = []
        if result.more:
            notes.append(
                f"stopped at {MAX_CONTENT_MATCHES} matches; narrow the pattern, root or glob"
            )
        if result.stopped:
            notes.append(result.stopped)
        if too_big:
            notes.append(f"{too_big} file(s) over {MAX_SEARCH_FILE_BYTES // 2**20} MB skipped")
        if result.skipped_binary:
            notes.append(f"{result.skipped_binary} binary file(s) skipped")
        notes.extend(stats.notes())
        return ToolOutput(
            content=_with_notes(_format_matches(result, args.pattern, root, len(files)), notes),
            data={
                "root": str(root),
                "backend": result.backend,
                "matches": [
                    {"path": str(m.path), "line": m.line, "text": m.text} for m in result.matches
                ],
                "more": result.more,
            },
        )


def _candidates(
    root: Path,
    policy: Any,
    ctx: ToolContext,
    stats: WalkStats,
    matcher: Glob | None,
    deadline: float,
) -> tuple[list[FileEntry], int]:
    files: list[FileEntry] = []
    too_big = 0
    for entry in walk_files(root, policy, ctx, stats, deadline=deadline):
        if matcher is not None and not matcher.match(entry.relative):
            continue
        try:
            size = entry.real.stat().st_size
        except OSError:
            continue
        if size > MAX_SEARCH_FILE_BYTES:
            too_big += 1
            continue
        files.append(entry)
    return files, too_big


async def _search(
    policy: Any,
    ctx: Any,
    root: Path,
    files: list[FileEntry],
    args: ContentSearchArgs,
    regex: Any,
    deadline: float,
) -> grep.SearchResult:
    rg = grep.find_rg()
    if rg is not None and files:
        try:
            return await grep.search_rg(
                rg,
                root,
                files,
                args.pattern,
                ignore_case=args.case_insensitive,
                max_matches=MAX_CONTENT_MATCHES,
                env=grep.rg_env(policy),
                timeout=max(deadline - time.monotonic(), 1.0),
                policy=policy,
                ctx=ctx,
            )
        except grep.RgPatternError:
            pass  # a dialect difference (look-around, back-references): Python re has them
    # The `regex` engine releases the GIL while it matches and stops at a per-line time
    # limit, so a pattern that backtracks cannot freeze the event loop; /stop abandons it.
    return await anyio.to_thread.run_sync(
        lambda: grep.search_python(
            files, regex, max_matches=MAX_CONTENT_MATCHES, deadline=deadline
        ),
        abandon_on_cancel=True,
    )


def _format_matches(result: grep.SearchResult, pattern: str, root: Path, searched: int) -> list:
    if not result.matches:
        return [f"no lines matching {pattern!r} in {searched} file(s) under {root}"]
    files = len({m.path for m in result.matches})
    lines = [f"{len(result.matches)} match(es) in {files} file(s) under {root}:"]
    current: Path | None = None
    for match in result.matches:
        if match.path != current:
            current = match.path
            lines.append(str(current))
        lines.append(f"  {match.line}: {match.text}")
    return lines


def _with_notes(lines: list[str], notes: list[str]) -> str:
    if notes:
        lines = [*lines, "", *(f"[{note}]" for note in notes)]
    return "\n".join(lines)
