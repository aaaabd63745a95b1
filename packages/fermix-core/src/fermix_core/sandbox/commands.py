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
import stat
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

#: Variables that change which program an allowed name starts, or load code into it.
_PROFILE_ESCAPE_VARS = frozenset(
    {"PATH", "BASH_ENV", "ENV", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "BASH_LOADABLES_PATH"}
)
#: GNU sed ``e command`` (address optional) and ``s/x/cmd/e``.
_SED_EXEC = re.compile(
    r"(?:^|[;\n{}])\s*(?:[0-9$]+|/[^/\n]*/)?(?:,(?:[0-9$]+|/[^/\n]*/))?!?\s*e\s+([^;\n}]*)"
)
_SED_SUBST_EXEC = re.compile(
    r"(?:^|[;\n{}]|\s)s(?P<d>[^\w\s\\])(?:(?!(?P=d)).)*(?P=d)(?P<replacement>(?:(?!(?P=d)).)*)"
    r"(?P=d)[gpiImM0-9w]*e"
)
#: Options that take a command to run, per program; the value is a prefix to strip.
_RUNS_COMMAND: dict[str, dict[str, str]] = {
    "tar": {
        "--to-command": "",
        "--use-compress-program": "",
        "-I": "",
        "--checkpoint-action": "exec=",
        "--info-script": "",
        "--new-volume-script": "",
        "-F": "",
        "--rsh-command": "",
    },
    "zip": {"-TT": "", "--unzip-command": ""},
    "rsync": {"-e": "", "--rsh": "", "--rsync-path": ""},
}
_RUNS_COMMAND["gtar"] = _RUNS_COMMAND["bsdtar"] = _RUNS_COMMAND["tar"]


def _script_operand(args: list[Word]) -> Word | None:
    """The script-file operand of ``sh [options] FILE``."""
    index = 0
    while index < len(args):
        text = args[index].text
        if text == "--":
            index += 1
            break
        if text in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            index += 2
            continue
        if text[:1] in "-+" and len(text) > 1:
            index += 1
            continue
        break
    return args[index] if index < len(args) else None


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
    #: Variables assigned earlier in the command (``X=$HOME; rm -rf "$X"``), statically.
    variables: dict[str, str | None] = field(default_factory=dict)
    #: Here-strings and here-documents given to ``exec N<<<…`` (read back as /dev/fd/N).
    fd_scripts: list[str] = field(default_factory=list)

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
            self.variables.clear()
            self.fd_scripts.clear()
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
                self._profile_escapes(command.words, command.redirects)
                self.simple(command.words, depth, functions=known, stdin=stdin, piped=piped)
                self._follow_cd(command.words)
                self._remember(command)
        finally:
            self.cwd = saved_cwd

    def _remember(self, command: Simple) -> None:
        """What later commands of the same line depend on: plain assignments
        (``X=$HOME``, ``export X=~``) and ``exec 3<<<'…'`` bodies."""
        words = command.words
        if words and words[0].text in ("export", "declare", "typeset", "local", "readonly"):
            words = [w for w in words[1:] if not w.text.startswith("-")]
        elif words and not all(ASSIGNMENT.match(w.text) for w in words):
            words = []
        for word in words:
            match = ASSIGNMENT.match(word.text)
            if match is None:
                continue
            name = word.text[: match.end()].rstrip("+=")
            value = Word(word.text[match.end() :], list(word.substitutions))
            if value.dynamic and self._static(value) is None:
                self.variables[name] = self._expand(value.text, value.substitutions) or None
            else:
                self.variables[name] = self._static(value)
        if command.words and command.words[0].text == "exec":
            for op, target, body in command.redirects:
                if op == "<<<" and target is not None:
                    self.fd_scripts.append(plain(target.text))
                elif op in ("<<", "<<-") and body is not None:
                    self.fd_scripts.append(body)

    def _follow_cd(self, words: list[Word]) -> None:
        """``cd / && rm -rf *``: later relative targets are judged from the new directory."""
        words = [w for w in words if not ASSIGNMENT.match(w.text)]
        if words and words[0].text == "popd":
            self.cwd = None
            return
        if not words or words[0].text not in ("cd", "pushd"):
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
        first = self._static(words[0])
        piped_args: list[Word] = []
        if first is not None and program_name(first) == "xargs" and stdin is not None:
            piped_args = [Word(part) for part in stdin.split()]  # `echo ~ | xargs rm -rf`
        words = self._unwrap(words, depth, functions)
        if not words:
            return
        words = words + piped_args
        head = words[0]
        args = words[1:]
        argv0 = self._static(head)
        if argv0 is None:
            self._unknown_program(head, args)
            return
        name = program_name(argv0)
        self.programs.append(name)
        if "/" in argv0 and name not in functions:
            self._run_file(argv0, depth, functions)
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
            source = None if script is not None or reads_stdin else _script_operand(args)
            if source is not None:
                script, reads_stdin = self._script_source(name, source, stdin)
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
            if args:
                script, reads_stdin = self._script_source(name, args[0], stdin)
                if script is not None:
                    self.script(script, depth + 1, functions)
                elif reads_stdin and stdin is not None:
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
        elif name == "xargs" and stdin is not None:
            pass  # handled in simple(): the piped words become arguments
        elif name == "parallel":
            self._parallel(args, depth, functions)
        elif name in ("awk", "gawk", "mawk", "nawk", "busybox-awk"):
            self._awk(args, depth, functions)
        elif name in ("sed", "gsed"):
            self._sed(args, depth, functions)
        elif name in ("tar", "gtar", "bsdtar", "zip", "rsync"):
            self._program_options(name, args, depth, functions)
        elif INTERPRETER.match(name):
            self._inline_code(args, depth, functions)
            self._interpreter_input(args, depth, functions, stdin)

    # ------------------------------------------------------------------ scripts on disk

    def _read_script(self, path_text: str, what: str) -> str | None:
        """The text of a script file the command runs, so it is checked like a ``-c``
        body — for catastrophes only: a project's own scripts (``./gradlew``) may use
        programs outside the profile, as the profile has always allowed. A script that
        does not exist yet cannot be judged: refused."""
        if self.enforce_profile:
            return None
        path = Path(path_text)
        if not path.is_absolute():
            if self.cwd is None:
                return None
            path = self.cwd / path
        try:
            info = path.stat()
        except FileNotFoundError:
            raise CommandRefused(
                "unparseable",
                f"{what} {path_text} does not exist yet, so it cannot be checked before it "
                "runs; write it first (file_write), then run it in a separate command",
            ) from None
        except OSError:
            return None
        if not stat.S_ISREG(info.st_mode):
            return None
        if info.st_size > MAX_COMMAND_CHARS:
            raise CommandRefused(
                "unparseable",
                f"{what} {path_text} is over {MAX_COMMAND_CHARS} characters, too long to "
                "check before it runs; split it into smaller scripts",
            )
        try:
            return path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None

    def _script_source(self, name: str, word: Word, stdin: str | None) -> tuple[str | None, bool]:
        """``(script, reads_stdin)`` for the script operand of a shell or ``source``: a file,
        ``/dev/stdin``, a descriptor filled by ``exec 3<<<…``, or ``<(echo …)``."""
        if word.text == SUBST and word.substitutions:
            output = self._substituted(word.substitutions[0])
            if output:
                return output, False
            if self.enforce_profile:
                raise CommandRefused(
                    "profile",
                    f"`{name}` would run a script produced by another program at run time, "
                    f"which cannot be checked in the `{self.profile}` profile; save the script "
                    "to a file in the workspace, read it, and run the file.",
                    program=name,
                )
            return None, False
        text = self._static(word)
        if text is None:
            return None, False
        if text in ("-", "/dev/stdin", "/proc/self/fd/0", "/dev/fd/0"):
            return None, True
        if re.fullmatch(r"/(?:dev/fd|proc/(?:self|\d+|\$\$)/fd)/\d+", text):
            if self.fd_scripts:
                return "\n".join(self.fd_scripts), False
            raise CommandRefused(
                "unparseable",
                f"`{name}` would read its script from {text}, which cannot be checked; save "
                "the script to a file in the workspace and run that",
                program=name,
            )
        return self._read_script(text, "the script"), False

    def _run_file(self, argv0: str, depth: int, functions: set[str]) -> None:
        """``./wipe.sh``: a script run by path is checked by its interpreter line."""
        path = Path(argv0) if argv0.startswith("/") else (self.cwd or Path("/")) / argv0
        try:
            with path.open("rb") as handle:
                head = handle.read(256)
        except OSError:
            return
        if not head.startswith(b"#!"):
            return
        line = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
        if not line:
            return
        interpreter = program_name(
            line[-1] if line[0].endswith("/env") and len(line) > 1 else line[0]
        )
        if interpreter in SHELLS:
            body = self._read_script(str(path), "the script")
            if body is not None:
                self.script(body, depth + 1, functions)
        elif INTERPRETER.match(interpreter):
            body = self._read_script(str(path), "the script")
            if body is not None:
                self._judge_code(body, depth, functions)

    def _interpreter_input(
        self, args: list[Word], depth: int, functions: set[str], stdin: str | None
    ) -> None:
        """``python3 - <<< '…'`` and ``python3 wipe.py``: the code is judged like ``-c``."""
        if self.enforce_profile:
            return
        positional = [w for w in args if not w.text.startswith("-") or w.text == "-"]
        inline = any(w.text in ("-c", "-e", "-E", "-r", "--eval", "-p") for w in args)
        if inline:
            return
        if (not positional or positional[0].text == "-") and stdin is not None:
            self._judge_code(stdin, depth, functions)
        elif positional and positional[0].text != "-":
            text = self._static(positional[0])
            if text is not None and not text.startswith("/dev/"):
                try:
                    body = self._read_script(text, "the program")
                except CommandRefused:
                    body = None  # a missing .py file just fails; it cannot run anything
                if body is not None:
                    self._judge_code(body, depth, functions)

    # ------------------------------------------------------------------ programs that run programs

    def _parallel(self, args: list[Word], depth: int, functions: set[str]) -> None:
        """GNU ``parallel CMD ::: ARGS``: each argument is run as ``CMD ARG``."""
        texts = [w.text for w in args]
        if ":::" not in texts:
            return
        split = texts.index(":::")
        command = args[:split]
        while command and command[0].text.startswith("-"):
            takes_value = command[0].text in ("-j", "-P", "-S", "--jobs", "-N", "-n")
            command = command[2:] if takes_value else command[1:]
        inputs = []
        for word in args[split + 1 :]:
            if word.text in (":::", "::::", ":::+"):
                break
            inputs.append(word)
        for value in inputs:
            filled = [value if w.text == "{}" else w for w in command]
            if not any(w.text == "{}" for w in command):
                filled.append(value)
            if filled:
                self.simple(filled, depth + 1, functions=functions)

    def _awk(self, args: list[Word], depth: int, functions: set[str]) -> None:
        """``awk 'BEGIN{system("rm -rf ~")}'``: the program's strings are judged like a
        one-liner's (``system()``, ``| "cmd"`` and ``"cmd" | getline`` run them)."""
        if self.enforce_profile:
            return
        index = 0
        while index < len(args):
            text = args[index].text
            if text in ("-f", "--file") and index + 1 < len(args):
                body = self._read_script(plain(args[index + 1].text), "the awk program")
                if body is not None:
                    self._judge_code(body, depth, functions)
                return
            if text in ("-v", "-F", "--assign", "--field-separator"):
                index += 2
                continue
            if text.startswith("-") and text != "-":
                index += 1
                continue
            self._judge_code(self._render(args[index]), depth, functions)
            return

    def _sed(self, args: list[Word], depth: int, functions: set[str]) -> None:
        """GNU sed's ``e COMMAND`` and ``s/…/…/e`` run a shell command."""
        scripts: list[str] = []
        index = 0
        positional_script = True
        while index < len(args):
            text = args[index].text
            if text in ("-e", "--expression") and index + 1 < len(args):
                scripts.append(self._render(args[index + 1]))
                positional_script = False
                index += 2
                continue
            if text.startswith("--expression="):
                scripts.append(text.split("=", 1)[1])
                positional_script = False
            elif text in ("-f", "--file") and index + 1 < len(args):
                body = self._read_script(plain(args[index + 1].text), "the sed script")
                scripts.append(body or "")
                positional_script = False
                index += 2
                continue
            elif not text.startswith("-") and positional_script:
                scripts.append(self._render(args[index]))
                positional_script = False
            index += 1
        for script in scripts:
            for command in _SED_EXEC.findall(script):
                if command.strip():
                    self.script(command.strip(), depth + 1, functions)
            for match in _SED_SUBST_EXEC.finditer(script):
                self.script(match.group("replacement"), depth + 1, functions)

    def _program_options(self, name: str, args: list[Word], depth: int, functions: set[str]):
        """Options that name a command to run: ``tar --to-command``, ``-I``,
        ``--checkpoint-action=exec=``; ``zip -TT``; ``rsync -e`` / ``--rsync-path``."""
        options = _RUNS_COMMAND.get(name, {})
        index = 0
        while index < len(args):
            text = plain(args[index].text)
            value: str | None = None
            option, eq, attached = text.partition("=")
            if option in options and eq:
                value = attached
            elif option in options and index + 1 < len(args):
                value = self._render(args[index + 1])
                index += 1
            if value is not None:
                prefix = options[option]
                if not prefix:
                    self.script(value, depth + 1, functions)
                elif value.startswith(prefix):
                    self.script(value[len(prefix) :], depth + 1, functions)
            index += 1

    def _judge_code(self, code: str, depth: int, functions: set[str]) -> None:
        """Interpreter code: ``rmtree`` of / or the home, and quoted strings that are
        catastrophic shell commands. Only catastrophes count (see :meth:`_inline_code`)."""
        from fermix_core.sandbox.rules import judge_code

        judge_code(self, code, depth, functions)

    def _profile_escapes(self, words: list[Word], redirects: Sequence[tuple] = ()) -> None:
        """In ``bare`` and ``assistant``: ways to run a program the profile does not allow
        under a name it does (``PATH=…``, ``hash -p``, ``LD_PRELOAD``), and raw network
        from ``/dev/tcp`` redirections."""
        if not self.enforce_profile or self.profile == "extended":
            return
        for _op, target, _body in redirects:
            text = plain(target.text) if target is not None else ""
            if re.match(r"/dev/(?:tcp|udp)/", text):
                raise CommandRefused(
                    "profile",
                    f"a redirection to {text} opens a network connection, which the "
                    f"`{self.profile}` profile does not allow; ask the owner for the extended "
                    "profile (and `[sandbox] network = true`).",
                )
        if not words:
            return
        candidates = list(words)
        if candidates and candidates[0].text in ("export", "declare", "typeset", "readonly"):
            candidates = candidates[1:]
        for word in candidates:
            match = ASSIGNMENT.match(word.text)
            if match is None:
                if word is candidates[0] and candidates is not words:
                    continue
                break
            variable = word.text[: match.end()].rstrip("+=")
            if variable in _PROFILE_ESCAPE_VARS:
                raise CommandRefused(
                    "profile",
                    f"setting {variable} in the `{self.profile}` profile would let a program "
                    "outside the profile run under an allowed name; use the sandbox's "
                    "environment, or ask the owner for the extended profile.",
                    program=variable,
                )
        head = self._static(words[0]) if words else None
        if head == "hash" and any(w.text.startswith("-") and "p" in w.text for w in words[1:]):
            raise CommandRefused(
                "profile",
                f"`hash -p` maps an allowed name to another program; not in the "
                f"`{self.profile}` profile.",
                program="hash",
            )
        if head == "enable" and any(w.text.startswith("-") and "f" in w.text for w in words):
            raise CommandRefused(
                "profile",
                "`enable -f` loads code into the shell; not in this profile.",
                program="enable",
            )

    # ------------------------------------------------------------------ the rules
