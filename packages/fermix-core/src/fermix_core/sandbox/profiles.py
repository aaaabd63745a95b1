"""Command profiles: which programs the agent may start through the shell tool.

A profile is a statement of intent, not a wall: ``python`` is in ``assistant`` and
``python`` can do anything. What a profile buys is that the agent reaches for the tools a
developer's assistant should use, and that stepping beyond them (``sudo``, ``docker``,
``ssh``, ``curl``) is a decision the owner made (``/sandbox preset extended``), not one the
model made. Catastrophic commands are refused in every profile, ``extended`` included.
"""

from __future__ import annotations

import re

__all__ = [
    "ASSISTANT",
    "BARE",
    "PROFILES",
    "SHELLS",
    "SHELL_BUILTINS",
    "program_allowed",
    "program_name",
]

#: Shell builtins and keywords: harmless on their own, and every script uses them.
SHELL_BUILTINS = frozenset(
    {
        ":",
        "[",
        "[[",
        "]]",
        "alias",
        "break",
        "cd",
        "continue",
        "declare",
        "echo",
        "exit",
        "export",
        "false",
        "getopts",
        "hash",
        "let",
        "local",
        "popd",
        "printf",
        "pushd",
        "pwd",
        "read",
        "readonly",
        "return",
        "set",
        "shift",
        "test",
        "trap",
        "true",
        "type",
        "typeset",
        "ulimit",
        "umask",
        "unalias",
        "unset",
        "wait",
    }
)

#: Programs that run a shell script given with ``-c`` (their scripts are checked too).
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh"})

#: ``bare``: look, never touch.
BARE = frozenset(
    {
        "basename",
        "cat",
        "date",
        "dirname",
        "file",
        "grep",
        "head",
        "ls",
        "realpath",
        "stat",
        "tail",
        "wc",
        "which",
    }
)

#: ``assistant`` (the default): what a developer's assistant reads, edits, builds and
#: tests with. No privilege escalation, no containers, no remote shells, no raw network
#: clients (the web tools cover the network).
ASSISTANT = BARE | frozenset(
    {
        # files and text
        "awk",
        "base64",
        "cmp",
        "column",
        "comm",
        "cp",
        "csplit",
        "cut",
        "df",
        "diff",
        "du",
        "egrep",
        "env",
        "expand",
        "fd",
        "fgrep",
        "find",
        "fmt",
        "fold",
        "gawk",
        "hexdump",
        "iconv",
        "join",
        "ln",
        "md5sum",
        "mkdir",
        "mktemp",
        "mv",
        "nl",
        "od",
        "paste",
        "patch",
        "readlink",
        "rg",
        "rm",
        "rmdir",
        "sed",
        "seq",
        "sha1sum",
        "sha256sum",
        "sha512sum",
        "shasum",
        "sleep",
        "sort",
        "split",
        "strings",
        "tac",
        "tee",
        "touch",
        "tr",
        "tree",
        "uniq",
        "xargs",
        "xxd",
        "yes",
        "chmod",
        # archives and data
        "bzip2",
        "gunzip",
        "gzip",
        "jq",
        "sqlite3",
        "tar",
        "unxz",
        "unzip",
        "unzstd",
        "xz",
        "yq",
        "zcat",
        "zip",
        "zstd",
        # process helpers
        "nice",
        "nohup",
        "time",
        "timeout",
        "kill",
        "ps",
        "pgrep",
        # system facts
        "hostname",
        "id",
        "locale",
        "nproc",
        "printenv",
        "uname",
        "uptime",
        "whoami",
        # version control
        "git",
        # shells (their -c scripts are checked command by command)
        "bash",
        "dash",
        "sh",
        "zsh",
        "source",
        ".",
        "eval",
        "command",
        "exec",
        # languages, package managers and build tools
        "bun",
        "bundle",
        "cargo",
        "cc",
        "c++",
        "clang",
        "clang++",
        "cmake",
        "composer",
        "deno",
        "dotnet",
        "g++",
        "gcc",
        "gem",
        "go",
        "gofmt",
        "gradle",
        "java",
        "javac",
        "kotlin",
        "lua",
        "make",
        "meson",
        "mvn",
        "ninja",
        "node",
        "npm",
        "npx",
        "perl",
        "php",
        "pip",
        "pipx",
        "pnpm",
        "poetry",
        "python",
        "rake",
        "ruby",
        "rustc",
        "rustup",
        "swift",
        "tsc",
        "uv",
        "uvx",
        "yarn",
        # linters, formatters, test runners
        "black",
        "eslint",
        "isort",
        "mypy",
        "nox",
        "prettier",
        "pyright",
        "pytest",
        "ruff",
        "tox",
        # documents and media inspection
        "ffprobe",
        "pandoc",
    }
)

#: ``None`` means every program (``extended``).
PROFILES: dict[str, frozenset[str] | None] = {
    "bare": BARE,
    "assistant": ASSISTANT,
    "extended": None,
}

_VERSION_SUFFIX = re.compile(r"^(?P<base>[A-Za-z+]+?)-?[\d.]+$")


def program_name(argv0: str) -> str:
    """The name a profile is checked against: ``/usr/bin/python3.11`` -> ``python3.11``."""
    return argv0.rstrip("/").rsplit("/", 1)[-1]


def program_allowed(profile: str, argv0: str) -> bool:
    """Whether *profile* lets the agent start *argv0*.

    A path is judged by its last component (``/usr/bin/git`` is ``git``); a project's own
    script (``./gradlew``, ``scripts/test.sh``) is allowed in ``assistant``, which already
    allows the interpreters such a script would use. Versioned interpreter names
    (``python3.12``, ``node20``) count as their base name.
    """
    allowed = PROFILES.get(profile, ASSISTANT)
    if allowed is None:
        return True
    name = program_name(argv0)
    if name in SHELL_BUILTINS or name in allowed:
        return True
    if profile != "bare" and "/" in argv0 and not argv0.startswith("/"):
        return True
    match = _VERSION_SUFFIX.match(name)
    return bool(match and match["base"] in allowed)
