"""Registers the file and search tools. Registration imports nothing but spec records."""

from __future__ import annotations

from collections.abc import Iterable

from fermix_core.hookspecs import hookimpl
from fermix_core.specs import PolicyClass, ToolSpec

_SANDBOX = "the path is outside the sandbox roots or protected: the error names the path"

FILE_READ = ToolSpec(
    name="file_read",
    description=(
        "Read a UTF-8 text file with line numbers (or a raw byte range). Output is capped; "
        "the result says what was cut and which offset reads more."
    ),
    factory="fermix_tools.files.read:FileRead",
    args_model="fermix_tools.files.read:FileReadArgs",
    policy=PolicyClass.OWNER_DATA_READ,
    read_only=True,
    owner_only=False,
    guidance=(
        "Read before you edit. For long files read a window with offset/limit (lines, "
        "1-based) and continue from the offset the note gives. Use unit='bytes' for files "
        "with enormous lines (minified code, one-line JSON)."
    ),
    failure_modes=(
        _SANDBOX,
        "binary or non-UTF-8 file: refused with its size; file_read returns text only",
        "directory, device or missing file: refused; use glob_search to find files",
        "offset past the end: the error gives the file's length",
    ),
)

FILE_WRITE = ToolSpec(
    name="file_write",
    description=(
        "Create a text file (or replace one with overwrite=true), atomically. Missing "
        "parent directories inside the sandbox are created."
    ),
    factory="fermix_tools.files.write:FileWrite",
    args_model="fermix_tools.files.write:FileWriteArgs",
    policy=PolicyClass.WRITE,
    read_only=False,
    owner_only=False,
    guidance=(
        "Pass the complete content. An existing file is only replaced with overwrite=true; "
        "to change part of a file use file_edit instead of rewriting it."
    ),
    failure_modes=(
        _SANDBOX,
        "the file exists and overwrite is false: nothing is written",
        "the path is a directory or a parent is a file: nothing is written",
    ),
)

FILE_EDIT = ToolSpec(
    name="file_edit",
    description=(
        "Replace exact text in a file: old must occur exactly count times (default once); "
        "every occurrence is replaced atomically."
    ),
    factory="fermix_tools.files.write:FileEdit",
    args_model="fermix_tools.files.write:FileEditArgs",
    policy=PolicyClass.WRITE,
    read_only=False,
    owner_only=False,
    guidance=(
        "Copy old verbatim from file_read output (without the line-number prefix), with "
        "enough surrounding lines to be unique. The answer shows the edited lines."
    ),
    failure_modes=(
        _SANDBOX,
        "old not found: nothing changes; the error hints at whitespace, case or CRLF",
        "old found a different number of times than count: nothing changes; the error lists where",
        "binary, non-UTF-8 or very large file: refused",
    ),
)

GLOB_SEARCH = ToolSpec(
    name="glob_search",
    description="Find files by name pattern (glob) under a directory inside the sandbox.",
    factory="fermix_tools.files.search:GlobSearch",
    args_model="fermix_tools.files.search:GlobSearchArgs",
    policy=PolicyClass.OWNER_DATA_READ,
    read_only=True,
    owner_only=False,
    guidance=(
        "'*.md' matches at any depth; 'src/**/*.py' is anchored at root. Symlinked "
        "directories, .git and protected paths are not searched."
    ),
    failure_modes=(
        _SANDBOX,
        "absolute or '..' patterns: refused; pass the directory as root",
        "too many results: capped, with a note to narrow the pattern or root",
    ),
)

CONTENT_SEARCH = ToolSpec(
    name="content_search",
    description=(
        "Search file contents by regular expression under a directory inside the sandbox; "
        "returns matching lines grouped by file."
    ),
    factory="fermix_tools.files.search:ContentSearch",
    args_model="fermix_tools.files.search:ContentSearchArgs",
    policy=PolicyClass.OWNER_DATA_READ,
    read_only=True,
    owner_only=False,
    guidance=(
        "Narrow with glob (e.g. '*.py') and root. Escape regex characters to match them "
        "literally. Binary files, files over 20 MB, .git and protected paths are skipped."
    ),
    failure_modes=(
        _SANDBOX,
        "invalid regular expression: the error says why",
        "too many matches: capped at 200, with a note to narrow the search",
    ),
)

TOOLS = (FILE_READ, FILE_WRITE, FILE_EDIT, GLOB_SEARCH, CONTENT_SEARCH)


@hookimpl
def fermix_tools() -> Iterable[ToolSpec]:
    return TOOLS
