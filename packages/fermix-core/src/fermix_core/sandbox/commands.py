"""Refusing catastrophic shell commands, and programs outside the command profile.

The check reads the command the way a shell would — quotes, ``;``/``&&``/``||``/``|``
chains, ``$( )`` and backtick substitutions, ``sh -c``/``bash -c``/``eval`` bodies,
here-documents fed to a shell, and wrappers such as ``sudo``, ``doas``, ``env VAR=x``,
``nohup``, ``exec``, ``timeout`` or ``xargs`` — and then asks of every simple command it
finds: would this destroy the machine (``rm -rf /``, a fork bomb, ``mkfs``, ``dd`` onto a
disk, a recursive ``chmod`` of your home)? Is this program in the command profile?

The catastrophes themselves live in :mod:`.rules`, the wrapper table and word helpers in
:mod:`.words`, the lexer in :mod:`.shlex_lite`.

It is a guard rail against a model's mistakes, not a barrier against an adversary with a
shell: text assembled at run time (``base64 -d | sh``, a one-liner that builds the command
from pieces) cannot be judged without running it. ``docs/sandbox.md`` lists the limits.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fermix_core.sandbox.profiles import SHELLS, program_allowed, program_name
from fermix_core.sandbox.rules import INTERPRETER, CatastropheRules, CommandRefused
from fermix_core.sandbox.shlex_lite import SUBST, LexError, Simple, Word, lex, split_commands
from fermix_core.sandbox.words import (
    ASSIGNMENT,
    SKIP_SEGMENT,
    WRAPPERS,
    plain,
    shell_script,
    shown,
    skip_options,
    split_words,
    strip_prefix,
)

__all__ = ["MAX_DEPTH", "CommandChecker", "CommandRefused"]

#: Nesting (``sh -c "bash -c '…'"``, substitutions within substitutions) deeper than this
#: is refused: no honest command needs it, and an unbounded walk is a way to hide one.
MAX_DEPTH = 8
MAX_COMMAND_CHARS = 100_000


@dataclass
class CommandChecker(CatastropheRules):
    """Walks a command and raises :class:`CommandRefused` for the first problem found.

    The walk runs twice: first for catastrophes only, so ``sudo rm -rf /`` is refused as a
    catastrophe (in every profile) rather than as "sudo is not in the profile", then for
    the command profile. ``programs`` collects every program name the walk saw.
    """

    home: Path
    fermix_home: Path
    workspace: Path | None = None
    profile: str = "assistant"
    cwd: Path | None = None
    temp_dirs: tuple[Path, ...] = ()
    key: Callable[[str], str] = lambda s: s
    programs: list[str] = field(default_factory=list)
    enforce_profile: bool = False

    # ------------------------------------------------------------------ entry points

    def check(self, command: str | Sequence[str]) -> None:
        if isinstance(command, str):
            if len(command) > MAX_COMMAND_CHARS:
                raise CommandRefused(
                    "unparseable",
                    f"the command is longer than {MAX_COMMAND_CHARS} characters; write the "
                    "script to a file in the workspace and run that instead",
                )
            if not command.strip():
                raise CommandRefused("unparseable", "the command is empty")
        elif not [str(part) for part in command]:
            raise CommandRefused("unparseable", "the command is empty")
        self.enforce_profile = False
        self._walk(command)
        if self.profile != "extended":
            self.enforce_profile = True
            self._walk(command)

    def _walk(self, command: str | Sequence[str]) -> None:
        if isinstance(command, str):
            self.script(command, 0)
            return
        argv = [str(part) for part in command]
        self._inline_fork_bombs(" ".join(argv))
        self.simple([Word(part) for part in argv], 0, functions=set())

    # ------------------------------------------------------------------ scripts

    def script(self, text: str, depth: int, functions: set[str] | None = None) -> None:
        if depth > MAX_DEPTH:
            raise CommandRefused(
                "unparseable",
                f"the command nests shells and substitutions more than {MAX_DEPTH} deep; "
                "write it as a script file and run that",
            )
        self._fork_bombs(text)
        try:
            tokens = lex(text)
        except LexError as exc:
            raise CommandRefused(
                "unparseable", f"the command cannot be parsed ({exc}); check its quoting"
            ) from None
        commands, defined = split_commands(tokens)
        known = set(functions or ()) | defined
        saved_cwd = self.cwd
        try:
            for command in commands:
                for body in command.substitutions():
                    self.script(body, depth + 1, known)
                self._redirects(command)
                stdin = self._stdin_script(command)
                piped = command.piped_from is not None
                self.simple(command.words, depth, functions=known, stdin=stdin, piped=piped)
                self._follow_cd(command.words)
        finally:
            self.cwd = saved_cwd

    def _follow_cd(self, words: list[Word]) -> None:
        """``cd / && rm -rf *``: later relative targets are judged from the new directory."""
        words = [w for w in words if not ASSIGNMENT.match(w.text)]
        if not words or words[0].text != "cd":
            return
        args = [w for w in words[1:] if not w.text.startswith("-")]
        if not args:
            self.cwd = self.home
            return
        target = self._static(args[0])
        if target is None:
            self.cwd = None
        elif target.startswith("/"):
            self.cwd = Path(posixpath.normpath(re.sub(r"/+", "/", target)))
        elif self.cwd is not None:
            self.cwd = Path(posixpath.normpath(f"{self.cwd}/{target}"))

    def _stdin_script(self, command: Simple) -> str | None:
        """What a shell reading standard input would run, when the text shows it."""
        for op, target, body in command.redirects:
            if op in ("<<", "<<-") and body is not None:
                return body
            if op == "<<<" and target is not None:
                return plain(target.text)
        source = command.piped_from
        if source is not None and source.words:
            name = program_name(plain(source.words[0].text))
            if name in ("echo", "printf"):
                return " ".join(plain(w.text) for w in source.words[1:])
        return None

    # ------------------------------------------------------------------ simple commands

    def simple(
        self,
        words: list[Word],
        depth: int,
        *,
        functions: set[str],
        stdin: str | None = None,
        piped: bool = False,
    ) -> None:
        words = strip_prefix(split_words(list(words)), functions)
        if not words or words[0].text in SKIP_SEGMENT:
            return
        words = self._unwrap(words, depth, functions)
        if not words:
            return
        head = words[0]
        args = words[1:]
        argv0 = self._static(head)
        if argv0 is None:
            self._unknown_program(head, args)
            return
        name = program_name(argv0)
        self.programs.append(name)
        if name not in functions:
            self._allowed(name, argv0)
        self._catastrophic(name, args)
        self._nested(name, args, depth, functions, stdin, piped)

    def _unwrap(self, words: list[Word], depth: int, functions: set[str]) -> list[Word]:
        """Strip wrappers (``sudo``, ``env``, ``nohup``…), checking each against the profile."""
        for _ in range(32):
            argv0 = self._static(words[0]) if words else None
            if argv0 is None:
                return words
            name = program_name(argv0)
            if name in functions:
                return words
            if name == "env":
                self._allowed(name, argv0)
                words = strip_prefix(self._unwrap_env(words[1:]), functions)
                continue
            wrapper = WRAPPERS.get(name)
            if wrapper is None:
                return words
            self._allowed(name, argv0)
            rest, script = skip_options(words[1:], wrapper)
            if script is not None:
                self.script(script, depth + 1, functions)
                return []
            if rest is None or not wrapper.runs_rest:
                return []
            if wrapper.joins_script:
                if rest:
                    self.script(" ".join(plain(w.text) for w in rest), depth + 1, functions)
                return []
            words = strip_prefix(rest, functions)
        raise CommandRefused("unparseable", "the command stacks too many wrappers to check")

    def _unwrap_env(self, args: list[Word]) -> list[Word]:
        index = 0
        while index < len(args):
            text = args[index].text
            if text == "--":
                index += 1
                break
            if text in ("-S", "--split-string") or text.startswith(("--split-string=", "-S")):
                if text in ("-S", "--split-string"):
                    value = args[index + 1].text if index + 1 < len(args) else ""
                    index += 2
                else:
                    value = text.split("=", 1)[1] if text.startswith("--") else text[2:]
                    index += 1
                try:
                    split = shlex.split(plain(value))
                except ValueError:
                    raise CommandRefused(
                        "unparseable", "env -S has unbalanced quotes; check its quoting"
                    ) from None
                return [Word(part) for part in split] + args[index:]
            if text in ("-u", "--unset", "-C", "--chdir"):
                index += 2
                continue
            if (text.startswith("-") and len(text) > 1) or ASSIGNMENT.match(text):
                index += 1
                continue
            break
        return args[index:]

    def _allowed(self, name: str, argv0: str) -> None:
        self.programs.append(name)
        if self.enforce_profile and not program_allowed(self.profile, argv0):
            raise CommandRefused(
                "profile",
                f"`{name}` is not in the `{self.profile}` command profile. Use a program the "
                "profile allows, or ask the owner to switch profiles (/sandbox preset "
                "extended, or `fermix config set sandbox.command_profile extended`).",
                program=name,
            )

    def _unknown_program(self, head: Word, args: list[Word]) -> None:
        """``$RM -rf /`` or ``$(which rm) -rf /``: judge the arguments as if it were ``rm``
        (or ``chmod``, or a shell given ``-c``)."""
        script, _reads_stdin = shell_script(args)
        if script is not None:
            self.script(script, 1)
        self._rm(args)
        for name in ("chmod", "chown"):
            self._chmod(name, args, guessed=True)
        if self.enforce_profile:
            raise CommandRefused(
                "profile",
                "the program name is computed at run time "
                f"({shown(head.text)}), so the `{self.profile}` profile cannot check it; "
                "spell the program name out.",
            )

    def _nested(
        self,
        name: str,
        args: list[Word],
        depth: int,
        functions: set[str],
        stdin: str | None,
        piped: bool,
    ) -> None:
        if name in SHELLS:
            script, reads_stdin = shell_script(args, self._render)
            if script is not None:
                self.script(script, depth + 1, functions)
            elif reads_stdin and stdin is not None:
                self.script(stdin, depth + 1, functions)
            elif reads_stdin and piped and self.enforce_profile:
                raise CommandRefused(
                    "profile",
                    f"`{name}` would run a script piped in from another program, which cannot "
                    f"be checked in the `{self.profile}` profile; save the script to a file in "
                    "the workspace, read it, and run the file.",
                    program=name,
                )
        elif name == "eval":
            self.script(" ".join(self._render(w) for w in args), depth + 1, functions)
        elif name in ("source", "."):
            if args and args[0].text == SUBST and args[0].substitutions:
                self.script(self._substituted(args[0].substitutions[0]), depth + 1, functions)
            elif args and args[0].text in ("/dev/stdin", "-") and stdin is not None:
                self.script(stdin, depth + 1, functions)
        elif name in ("at", "batch") and stdin is not None:
            self.script(stdin, depth + 1, functions)
        elif name == "alias":
            for word in args:
                _alias, has_value, body = self._render(word).partition("=")
                if has_value:
                    self.script(body, depth + 1, functions)
        elif name == "trap" and args and not args[0].text.startswith("-"):
            self.script(self._render(args[0]), depth + 1, functions)
        elif name == "find":
            self._find(args, depth, functions)
        elif INTERPRETER.match(name):
            self._inline_code(args, depth, functions)

    # ------------------------------------------------------------------ the rules
