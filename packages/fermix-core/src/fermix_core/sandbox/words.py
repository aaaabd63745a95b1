"""Words and wrappers: the shell-reading helpers of the command check.

A wrapper (``sudo``, ``env``, ``nohup``, ``timeout``, ``xargs`` …) runs another command;
the check has to look through it. This module knows each wrapper's options — which take
a value, which carry a script (``su -c``), how many positional arguments precede the
wrapped command — and the shell forms that turn one word into several (``${IFS}``,
``{a,b}``) or hide a script in an argument (``sh -c``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from fermix_core.sandbox.shlex_lite import MARK_CLOSE, MARK_OPEN, Word

__all__ = [
    "ASSIGNMENT",
    "LEADING_KEYWORDS",
    "SKIP_SEGMENT",
    "WRAPPERS",
    "Wrapper",
    "brace_expand",
    "looks_like_mode",
    "names",
    "plain",
    "script_option",
    "shell_script",
    "shown",
    "skip_options",
    "split_words",
    "strip_prefix",
]


@dataclass(frozen=True)
class Wrapper:
    takes_value: frozenset[str] = frozenset()
    #: Options whose value is a shell script (``su -c``, ``flock -c``).
    script_flags: frozenset[str] = frozenset()
    #: Options after which the wrapper only queries (``command -v``): nothing runs.
    query_flags: frozenset[str] = frozenset()
    #: Positional arguments before the wrapped command (``timeout 5``, ``chroot DIR``).
    positionals: int = 0
    #: The rest is a script joined by spaces (``watch``), not an argv.
    joins_script: bool = False
    #: Whether arguments after the options are a command (``script out.txt`` names a file).
    runs_rest: bool = True


def names(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _w(
    takes: str = "",
    scripts: str = "",
    queries: str = "",
    positionals: int = 0,
    joins: bool = False,
    runs_rest: bool = True,
) -> Wrapper:
    return Wrapper(
        frozenset(takes.split()),
        frozenset(scripts.split()),
        frozenset(queries.split()),
        positionals,
        joins,
        runs_rest,
    )


WRAPPERS: dict[str, Wrapper] = {
    "sudo": _w(
        "-u -g -h -p -C -D -r -t -T -U --user --group --host --prompt --close-from "
        "--chdir --role --type --command-timeout --other-user"
    ),
    "doas": _w("-u -C"),
    "pkexec": _w("--user"),
    "nohup": _w(),
    "setsid": _w(),
    "exec": _w("-a"),
    "command": _w(queries="-v -V"),
    "builtin": _w(),
    "time": _w("-f -o --format --output"),
    "nice": _w("-n --adjustment"),
    "ionice": _w("-c -n -p --class --classdata"),
    "timeout": _w("-s -k --signal --kill-after", positionals=1),
    "gtimeout": _w("-s -k --signal --kill-after", positionals=1),
    "stdbuf": _w("-i -o -e --input --output --error"),
    "chrt": _w(positionals=1),
    "taskset": _w(positionals=1),
    "xargs": _w("-I -i -n -P -d -E -e -L -l -s -a --arg-file --delimiter --max-args"),
    "unbuffer": _w(),
    "caffeinate": _w("-t -w"),
    "flock": _w("-w -E --timeout --conflict-exit-code", "-c --command", positionals=1),
    "chroot": _w("--userspec --groups", positionals=1),
    "su": _w("-s --shell -g -G -w", "-c --command", runs_rest=False),
    "runuser": _w("-u -g -G -s --user --group --shell", "-c --command"),
    "script": _w("-E -T -t -I -O -B", "-c --command", runs_rest=False),
    "strace": _w("-e -o -p -s -u -E -P -a -b -I -O -S -X"),
    "ltrace": _w("-e -o -p -s -u -n -a"),
    "watch": _w("-n -d --interval --differences", joins=True),
    "busybox": _w(),
}

ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\+?=")
LEADING_KEYWORDS = frozenset(
    {"!", "{", "}", "then", "else", "elif", "do", "if", "while", "until", "fi", "done", "esac"}
)
SKIP_SEGMENT = frozenset({"for", "select", "case", "in"})


def plain(text: str) -> str:
    """*text* with expansion markers written back as ``$``-expressions (for re-parsing)."""
    if MARK_OPEN not in text:
        return text

    def back(match: re.Match[str]) -> str:
        expr = match.group(1)
        if expr == "()":
            return "$__SUBSTITUTION__"
        if expr.startswith("~"):
            return expr
        return "${" + expr + "}"

    return re.sub(f"{MARK_OPEN}(.*?){MARK_CLOSE}", back, text)


def shown(text: str) -> str:
    return plain(text).replace("$__SUBSTITUTION__", "$(…)")


def looks_like_mode(text: str) -> bool:
    return bool(re.fullmatch(r"-[rwxXstugo]+", text)) and "R" not in text


def skip_options(args: list[Word], wrapper: Wrapper) -> tuple[list[Word] | None, str | None]:
    """The wrapped command after *wrapper*'s options, or the script an option carries.

    Returns ``(None, None)`` for a query (``command -v rm``): nothing is run.
    """
    if wrapper.script_flags:
        script = script_option(args, wrapper.script_flags)
        if script is not None:
            return [], script
    index = 0
    positionals = wrapper.positionals
    while index < len(args):
        text = args[index].text
        if text == "--":
            index += 1
            break
        if text.startswith("--") and len(text) > 2:
            option, has_value, value = text.partition("=")
            if option in wrapper.script_flags:
                if has_value:
                    return [], value
                return [], args[index + 1].text if index + 1 < len(args) else ""
            index += 2 if option in wrapper.takes_value and not has_value else 1
            continue
        if text.startswith("-") and len(text) > 1:
            if text in wrapper.query_flags:
                return None, None
            skip = 1
            for position, letter in enumerate(text[1:], start=1):
                flag = f"-{letter}"
                remainder = text[position + 1 :]
                if flag in wrapper.script_flags:
                    if remainder:
                        return [], remainder
                    return [], args[index + 1].text if index + 1 < len(args) else ""
                if flag in wrapper.takes_value:
                    skip = 1 if remainder else 2
                    break
            index += skip
            continue
        if positionals:
            positionals -= 1
            index += 1
            continue
        break
    return args[index:], None


def script_option(args: list[Word], flags: frozenset[str]) -> str | None:
    """The script given with ``-c`` anywhere in *args* (``su root -c 'cmd'``)."""
    for index, word in enumerate(args):
        text = word.text
        option, has_value, value = text.partition("=")
        if text.startswith("--") and option in flags:
            if has_value:
                return value
            return plain(args[index + 1].text) if index + 1 < len(args) else ""
        if text.startswith("-") and not text.startswith("--") and len(text) > 1:
            for position, letter in enumerate(text[1:], start=1):
                if f"-{letter}" in flags:
                    remainder = text[position + 1 :]
                    if remainder:
                        return remainder
                    return plain(args[index + 1].text) if index + 1 < len(args) else ""
    return None


_SHELL_VALUE_OPTIONS = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})


def shell_script(
    args: list[Word], render: Callable[[Word], str] | None = None
) -> tuple[str | None, bool]:
    """``(script, reads_stdin)`` for ``sh``-like *args*: the ``-c`` text, or whether the
    shell reads its commands from standard input."""
    has_c = False
    index = 0
    while index < len(args):
        text = args[index].text
        if text == "--" or text == "-":
            index += 1
            break
        if text in _SHELL_VALUE_OPTIONS:
            index += 2
            continue
        if text.startswith("--"):
            index += 1
            continue
        if text[:1] in "-+" and len(text) > 1:
            has_c = has_c or "c" in text[1:]
            index += 1
            continue
        break
    rest = args[index:]
    if has_c:
        if not rest:
            return "", False
        return (render(rest[0]) if render is not None else plain(rest[0].text)), False
    return None, not rest


def brace_expand(text: str, limit: int = 64) -> list[str]:
    """Bash brace expansion of comma lists (``/{bin,etc}``), capped at *limit* results."""
    match = re.search(r"\{([^{}]*,[^{}]*)\}", text)
    if match is None:
        return [text]
    results: list[str] = []
    for option in match.group(1).split(","):
        for expanded in brace_expand(text[: match.start()] + option + text[match.end() :]):
            results.append(expanded)
            if len(results) >= limit:
                return results
    return results


def split_words(words: list[Word]) -> list[Word]:
    """Field splitting the text makes certain: ``${IFS}`` separators and brace lists
    (``{rm,-rf,/}`` is three words)."""
    out: list[Word] = []
    ifs = re.compile(f"{MARK_OPEN}IFS{MARK_CLOSE}")
    for word in words:
        pieces = [p for p in ifs.split(word.text) if p] if ifs.search(word.text) else [word.text]
        for piece in pieces:
            expanded = brace_expand(piece) if "{" in piece and "," in piece else [piece]
            subs = word.substitutions if len(pieces) == 1 and len(expanded) == 1 else []
            out.extend(Word(text, subs) for text in expanded)
    return out


def strip_prefix(words: list[Word], functions: set[str]) -> list[Word]:
    """Drop assignments (``A=1 cmd``), keywords (``if``, ``then``, ``{``) and the header of
    ``function name { …``, recording the function name."""
    while words:
        text = words[0].text
        if ASSIGNMENT.match(text) or text in LEADING_KEYWORDS:
            words = words[1:]
        elif text == "function" and len(words) > 1:
            functions.add(words[1].text)
            words = words[2:]
        else:
            break
    return words
