"""A sandbox-aware directory walk and the glob dialect the search tools accept.

Both search tools walk the tree here, in Python, even when ripgrep does the matching: the
walk is where protected paths are pruned and symlinks are vetted, and ripgrep is then
handed exactly the files the walk approved. Letting ripgrep walk on its own would mean it
*reads* a protected file (say ``~/.ssh`` under a granted ``$HOME``) before anything could
filter the result; a filter after the fact hides the output but not the access.

Symlinks are never descended (that is how walks loop and escape); a symlink to a file is
kept only when the sandbox resolves its target, and is then read through that target.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fermix_core.tool import ToolContext, ToolError

from fermix_tools.files.common import VCS_DIRS

#: Directory entries one walk may visit before it stops and says so.
MAX_ENTRIES = 200_000


@dataclass(frozen=True)
class FileEntry:
    """A file the walk approved: where it appears, and the canonical file to open."""

    path: Path
    real: Path
    relative: str


@dataclass
class WalkStats:
    visited: int = 0
    protected: int = 0
    links_refused: int = 0
    links_to_dirs: int = 0
    stopped: str | None = None

    def notes(self) -> list[str]:
        notes = []
        if self.protected:
            notes.append(f"{self.protected} protected path(s) were skipped")
        if self.links_refused:
            notes.append(
                f"{self.links_refused} symlink(s) pointing outside the sandbox were skipped"
            )
        if self.links_to_dirs:
            notes.append(f"{self.links_to_dirs} symlinked director(ies) were not followed")
        if self.stopped:
            notes.append(self.stopped)
        return notes


def walk_files(
    root: Path,
    policy: Any,
    ctx: ToolContext,
    stats: WalkStats,
    *,
    max_entries: int = MAX_ENTRIES,
    deadline: float | None = None,
) -> Iterator[FileEntry]:
    """Regular files under *root* (sorted, depth first), minus protected paths and VCS dirs.

    *root* must already be resolved by the sandbox. Asking the policy about every entry
    costs tens of microseconds each — seconds on a large tree — so the walk carries the
    protected locations that lie *below* the current directory and asks only about entries
    on the way to one of them. A directory the policy did not protect cannot become
    protected further down through an entry above it, so nothing else needs asking.
    """
    stack: list[tuple[Path, str, _Pending]] = [(root, "", _pending_under(policy, root))]
    while stack:
        directory, prefix, pending = stack.pop()
        try:
            with os.scandir(directory) as handle:
                entries = sorted(handle, key=lambda entry: entry.name)
        except OSError:
            continue
        subdirs: list[tuple[Path, str, _Pending]] = []
        for entry in entries:
            stats.visited += 1
            if stats.visited > max_entries:
                stats.stopped = (
                    f"the walk stopped after {max_entries} entries; pass a narrower root"
                )
                return
            if deadline is not None and time.monotonic() > deadline:
                stats.stopped = "the walk ran out of time; pass a narrower root"
                return
            path = Path(entry.path)
            relative = f"{prefix}{entry.name}"
            try:
                if entry.is_symlink():
                    real = _vet_link(path, policy, ctx, stats)
                    if real is not None:
                        yield FileEntry(path, real, relative)
                    continue
                is_dir = entry.is_dir(follow_symlinks=False)
                if is_dir and entry.name in VCS_DIRS:
                    continue
                if not is_dir and not entry.is_file(follow_symlinks=False):
                    continue
                if _must_ask(pending, path) and policy.protected_reason(path):
                    stats.protected += 1
                    continue
                if is_dir:
                    subdirs.append((path, f"{relative}/", _narrow(pending, path)))
                else:
                    yield FileEntry(path, path, relative)
            except OSError:
                continue
        stack.extend(reversed(subdirs))


#: Protected locations below a directory (case-folded), or ``None``: ask about everything.
_Pending = tuple[str, ...] | None


def _fold(path: Path | str) -> str:
    # Case-folding always errs towards asking more often, never less.
    return os.fspath(path).casefold()


def _pending_under(policy: Any, root: Path) -> _Pending:
    protected = getattr(policy, "protected", None)
    if protected is None:
        return None
    return _narrow(tuple(_fold(entry.path) for entry in protected), root)


def _narrow(pending: _Pending, directory: Path) -> _Pending:
    if pending is None:
        return None
    base = _fold(directory).rstrip("/") + "/"
    return tuple(p for p in pending if p.startswith(base))


def _must_ask(pending: _Pending, path: Path) -> bool:
    if pending is None:
        return True
    key = _fold(path)
    return any(p == key or p.startswith(key + "/") for p in pending)


def _vet_link(path: Path, policy: Any, ctx: ToolContext, stats: WalkStats) -> Path | None:
    try:
        real = policy.resolve(path, ctx)
    except ToolError:
        stats.links_refused += 1
        return None
    if real.is_dir():
        stats.links_to_dirs += 1
        return None
    return real if real.is_file() else None


# --------------------------------------------------------------------------- globs


#: Brace alternatives are expanded before matching; past this many the pattern is refused.
MAX_GLOB_ALTERNATIVES = 256

# Token kinds of a compiled glob (one alternative is a sequence of them).
_LIT, _ONE, _STAR, _GLOBSTAR, _DIRS, _CLASS = range(6)


class Glob:
    """A compiled glob that matches in time linear in the path: the tokens are run as a
    set of states (an NFA), never by backtracking, so ``"*a" * 18 + "b"`` costs the same
    as ``"*.py"``. ``match(path)`` is true when the whole relative path matches."""

    def __init__(self, pattern: str, alternatives: list[list[tuple[int, Any]]]) -> None:
        self.pattern = pattern
        self.alternatives = alternatives

    def match(self, path: str) -> bool:
        return any(_run(tokens, path) for tokens in self.alternatives)

    def __repr__(self) -> str:
        return f"Glob({self.pattern!r})"


def compile_glob(pattern: str) -> Glob:
    """Compile a glob over ``/``-separated paths relative to the search root.

    ``*`` and ``?`` stay within one path segment, ``**`` spans segments, ``[abc]``/``[!a]``
    are character classes and ``{a,b}`` alternatives. A pattern without a ``/`` matches a
    file name at any depth (``*.py`` finds every Python file), as in ``.gitignore`` and
    ripgrep — the reading a model reaches for first. Matching is linear in the path.
    """
    text = pattern.strip()
    if not text:
        raise ToolError("the glob pattern is empty; pass something like '**/*.py'")
    if text.startswith(("/", "~")) or re.match(r"^[A-Za-z]:[\\/]", text):
        raise ToolError(
            f"glob {pattern!r} must be relative to the search root; pass the directory as "
            "root and a relative pattern (e.g. root='/path/to/dir', pattern='**/*.md')"
        )
    while text.startswith("./"):
        text = text[2:]
    if ".." in text.split("/"):
        raise ToolError(
            f"glob {pattern!r} climbs out of the root with '..'; pass the parent directory "
            "as root instead"
        )
    if text.endswith("/"):
        text += "**"
    anchored = "/" in text
    expanded = _expand(text)
    if expanded is None:
        raise ToolError(
            f"glob {pattern!r} expands to more than {MAX_GLOB_ALTERNATIVES} alternatives; "
            "use fewer {a,b} lists"
        )
    alternatives = []
    for option in expanded:
        tokens = _tokens(option)
        if not anchored:
            tokens.insert(0, (_DIRS, None))
        alternatives.append(_squeeze(tokens))
    return Glob(pattern, alternatives)


def _expand(glob: str) -> list[str] | None:
    """Every brace alternative spelled out (``a{b,c}`` -> ``ab``, ``ac``), or ``None``
    past :data:`MAX_GLOB_ALTERNATIVES`."""
    i = 0
    while i < len(glob):
        if glob[i] == "[":
            end = _class_end(glob, i)
            if end >= 0:
                i = end + 1
                continue
        if glob[i] == "{":
            end, options = _braces(glob, i)
            if end >= 0:
                heads = [glob[:i] + option for option in options]
                tails = _expand(glob[end + 1 :])
                if tails is None:
                    return None
                out: list[str] = []
                for head in heads:
                    expanded = _expand(head)
                    if expanded is None:
                        return None
                    out.extend(h + t for h in expanded for t in tails)
                    if len(out) > MAX_GLOB_ALTERNATIVES:
                        return None
                return list(dict.fromkeys(out))
        i += 1
    return [glob]


def _tokens(glob: str) -> list[tuple[int, Any]]:
    out: list[tuple[int, Any]] = []
    i, n = 0, len(glob)
    while i < n:
        char = glob[i]
        if char == "*":
            if glob.startswith("**", i):
                i += 2
                if i < n and glob[i] == "/":
                    out.append((_DIRS, None))  # "**/": nothing, or anything ending in "/"
                    i += 1
                else:
                    out.append((_GLOBSTAR, None))
                continue
            out.append((_STAR, None))
        elif char == "?":
            out.append((_ONE, None))
        elif char == "[" and (end := _class_end(glob, i)) >= 0:
            body = glob[i + 1 : end]
            negate = body[:1] in ("!", "^")
            out.append((_CLASS, (negate, _ranges(body[1:] if negate else body))))
            i = end + 1
            continue
        else:
            out.append((_LIT, char))
        i += 1
    return out


def _ranges(body: str) -> tuple[tuple[str, str], ...]:
    found: list[tuple[str, str]] = []
    i = 0
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-":
            found.append((body[i], body[i + 2]))
            i += 3
        else:
            found.append((body[i], body[i]))
            i += 1
    return tuple(found)


def _squeeze(tokens: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
    """Runs of ``*`` match what one does; fewer states, same language."""
    out: list[tuple[int, Any]] = []
    for token in tokens:
        if out and token[0] in (_STAR, _GLOBSTAR) and out[-1][0] == token[0]:
            continue
        out.append(token)
    return out


def _step(kind: int, arg: Any, char: str) -> bool:
    if kind == _LIT:
        return char == arg
    if kind == _ONE:
        return char != "/"
    negate, ranges = arg
    inside = any(low <= char <= high for low, high in ranges)
    return (not inside and char != "/") if negate else inside


def _run(tokens: list[tuple[int, Any]], path: str) -> bool:
    """Simulate the token NFA over *path*: O(len(path) * len(tokens)).

    State ``i`` is "before token i"; state ``-(i + 1)`` is "inside the ``**/`` of token i"
    (it has consumed something, so it may only leave through a ``/``)."""
    end = len(tokens)

    def close(states: set[int]) -> set[int]:
        # Epsilon moves: every star-like token may match nothing.
        stack = [s for s in states if s >= 0]
        while stack:
            index = stack.pop()
            if index < end and tokens[index][0] in (_STAR, _GLOBSTAR, _DIRS):
                following = index + 1
                if following not in states:
                    states.add(following)
                    stack.append(following)
        return states

    states = close({0})
    for char in path:
        moved: set[int] = set()
        for state in states:
            if state < 0:  # inside "**/": anything, and a "/" may end it
                moved.add(state)
                if char == "/":
                    moved.add(-state)  # -(i + 1) -> i + 1
                continue
            if state == end:
                continue
            kind, arg = tokens[state]
            if kind == _STAR:
                if char != "/":
                    moved.add(state)
            elif kind == _GLOBSTAR:
                moved.add(state)
            elif kind == _DIRS:
                moved.add(state + 1 if char == "/" else -(state + 1))
                if char == "/":
                    moved.add(-(state + 1))
            elif _step(kind, arg, char):
                moved.add(state + 1)
        if not moved:
            return False
        states = close(moved)
    return end in states


def _class_end(glob: str, start: int) -> int:
    i = start + 1
    if i < len(glob) and glob[i] in "!^":
        i += 1
    if i < len(glob) and glob[i] == "]":
        i += 1
    end = glob.find("]", i)
    return end


def _braces(glob: str, start: int) -> tuple[int, list[str]]:
    depth, options, current = 0, [], []
    for i in range(start + 1, len(glob)):
        char = glob[i]
        if char == "{":
            depth += 1
        elif char == "}":
            if depth == 0:
                options.append("".join(current))
                return i, options
            depth -= 1
        elif char == "," and depth == 0:
            options.append("".join(current))
            current = []
            continue
        current.append(char)
    return -1, []
