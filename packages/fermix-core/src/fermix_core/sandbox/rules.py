"""The catastrophes: what no command may do, in any sandbox mode or command profile.

Each rule judges one simple command after the walk in :mod:`.commands` has unwrapped it:
recursive deletes, chmods and moves of ``/``, the home, ``FERMIX_HOME`` or OS trees;
formatting or overwriting disks; fork bombs; powering the machine off; ``kill -1``.
Targets are evaluated the way the shell would expand them, taking unknown variables at
their worst (``"$DIR"/`` is ``/`` when ``DIR`` is empty).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from fermix_core.sandbox.paths import HOME_PROTECTED, OS_ROOTS, is_disk_device, is_within
from fermix_core.sandbox.profiles import program_name
from fermix_core.sandbox.shlex_lite import (
    MARK_CLOSE,
    MARK_OPEN,
    OUTPUT_REDIRECTS,
    SUBST,
    LexError,
    Simple,
    Word,
    lex,
)
from fermix_core.sandbox.words import brace_expand, looks_like_mode, names, plain
from fermix_core.tool import ToolError

__all__ = ["INTERPRETER", "CatastropheRules", "CommandRefused", "judge_code", "refuse"]


class CommandRefused(ToolError):
    """The sandbox will not run this command; the message says why and what to do instead.

    ``reason`` is ``"catastrophic"`` (refused in every mode and profile), ``"profile"``
    (the program is outside the command profile) or ``"unparseable"``.
    """

    def __init__(self, reason: str, message: str, *, program: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.program = program


#: ``find`` predicates that narrow what ``-delete``/``-exec`` act on to matches below the
#: start path (without one, the start path itself is deleted too).
_FIND_FILTERS = names(
    "-name -iname -path -ipath -wholename -iwholename -regex -iregex -type -xtype -mtime "
    "-mmin -atime -amin -ctime -cmin -newer -newermt -size -user -group -uid -gid -perm "
    "-empty -links -inum -samefile -nouser -nogroup -used -fstype -lname -ilname "
    "-executable -readable -writable -mindepth"
)

#: Name tests whose pattern may be all wildcards (``-name '*'`` matches everything).
_FIND_NAME_TESTS = names("-name -iname -path -ipath -wholename -iwholename -regex -iregex")
#: Tests that do not narrow a deletion to a few files: ``find ~ -type f -delete`` still
#: deletes every file in the home, ``-mindepth 1`` everything but the home itself.
_FIND_NOT_NARROWING = names(
    "-type -xtype -mindepth -maxdepth -readable -writable -executable -fstype -depth -xdev "
    "-mount -nouser -nogroup"
)
#: Programs that, run by ``find -exec PROG {}``, destroy each file found.
_FILE_DESTROYERS = frozenset({"rm", "shred", "wipe", "srm", "unlink", "truncate"})
#: Programs that may name a disk device without writing it.
_DEVICE_READERS = frozenset(
    {
        "lsblk",
        "blkid",
        "smartctl",
        "hdparm",
        "stat",
        "ls",
        "file",
        "udevadm",
        "partx",
        "df",
        "findmnt",
        "mount",
        "umount",
        "eject",
        "cat",
        "head",
        "less",
        "more",
        "od",
        "hexdump",
        "xxd",
        "cmp",
        "sha256sum",
        "sha1sum",
        "md5sum",
        "b2sum",
        "fsck",
        "e2fsck",
        "dumpe2fs",
        "tune2fs",
        "blockdev",
        "lsof",
        "fuser",
        "echo",
        "printf",
        "readlink",
        "realpath",
        "test",
        "[",
        "dd",
        "ddrescue",
        "fdisk",
        "sfdisk",
        "sgdisk",
        "gdisk",
        "cfdisk",
        "parted",
        "wipefs",
        "blkdiscard",
        "mkswap",
        "grep",
        "which",
        "mmls",
    }
)

_FORK_BOMB_DEF = re.compile(
    r"(?P<name>[^\s(){};|&<>'\"]+)\s*\(\s*\)\s*[{(](?P<body>[^})]*)[})]",
)
_FORK_BOMB_KW = re.compile(r"function\s+(?P<name>[^\s(){};|&<>'\"]+)\s*[{(](?P<body>[^})]*)[})]")
_INLINE_FORKS = (
    re.compile(r"\bfork\s+while\s+fork\b"),
    re.compile(r"while\s*\(?\s*(?:True|1)\s*\)?\s*:\s*os\.fork\(\s*\)"),
    re.compile(r"loop\s*\{\s*fork\b"),
    re.compile(r"for\s*\(\s*;\s*;\s*\)\s*fork\s*\(\s*\)"),
)

INTERPRETER = re.compile(r"^(?:python|perl|ruby|node|php|bun|deno)[\d.]*$")
_STRING_LITERAL = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'")
_RMTREE_DISASTER = re.compile(
    r"rmtree\(\s*(?:(['\"])(?:/|~|~/)\1|os\.path\.expanduser\(\s*(['\"])~/?\2\s*\)"
    r"|Path\.home\(\)|pathlib\.Path\.home\(\)|os\.environ\[\s*(['\"])HOME\3\s*\]"
    r"|Path\(\s*(['\"])/\4\s*\))"
)

_DISK_TOOLS_WITH_DEVICE = frozenset(
    {"wipefs", "blkdiscard", "sfdisk", "sgdisk", "fdisk", "cfdisk", "gdisk", "parted", "mkswap"}
)
_DISKUTIL_ERASE = frozenset(
    {
        "erasedisk",
        "erasevolume",
        "zerodisk",
        "randomdisk",
        "secureerase",
        "partitiondisk",
        "reformat",
    }
)
_POWER = frozenset({"shutdown", "reboot", "halt", "poweroff", "killall5"})
_SYSTEMCTL_POWER = frozenset({"poweroff", "reboot", "halt", "kexec", "emergency", "rescue"})
#: Redirecting output into these trees overwrites system files.
_SYSTEM_WRITE_TREES = ("/etc", "/boot", "/bin", "/sbin", "/usr", "/lib", "/lib64", "/System")


def refuse(what: str, program: str | None = None) -> CommandRefused:
    return CommandRefused(
        "catastrophic",
        f"refused: {what}. Catastrophic commands are never run, in any sandbox mode or "
        "command profile; if you meant something narrower, spell out the exact path.",
        program=program,
    )


class CatastropheRules:
    """The rules, as a base of :class:`~fermix_core.sandbox.commands.CommandChecker`
    (which supplies these attributes)."""

    home: Path
    fermix_home: Path
    workspace: Path | None
    cwd: Path | None
    temp_dirs: tuple[Path, ...]
    key: Callable[[str], str]
    programs: list[str]
    enforce_profile: bool
    variables: dict[str, str | None]
    profile: str

    def script(self, text: str, depth: int, functions: set[str] | None = None) -> None:
        raise NotImplementedError  # the walk, in CommandChecker

    def simple(
        self,
        words: list[Word],
        depth: int,
        *,
        functions: set[str],
        stdin: str | None = None,
        piped: bool = False,
    ) -> None:
        raise NotImplementedError  # the walk, in CommandChecker

    def _fork_bombs(self, text: str) -> None:
        for pattern in (_FORK_BOMB_DEF, _FORK_BOMB_KW):
            for match in pattern.finditer(text):
                name = re.escape(match["name"])
                call = rf"(?:^|[|&;{{(])\s*{name}(?![\w:.-])\s*[|&]"
                if re.search(call, match["body"]):
                    raise refuse(
                        f"`{match['name']}` is a fork bomb (a function that keeps starting "
                        "copies of itself) and would exhaust the machine"
                    )
        self._inline_fork_bombs(text)

    def _inline_fork_bombs(self, text: str) -> None:
        for pattern in _INLINE_FORKS:
            if pattern.search(text):
                raise refuse("this is a fork bomb and would exhaust the machine")

    def _redirects(self, command: Simple) -> None:
        for op, target, _body in command.redirects:
            if op not in OUTPUT_REDIRECTS or target is None:
                continue
            for path in self._targets(target):
                if is_disk_device(path):
                    raise refuse(f"writing to {path} would overwrite a disk device")
                if any(is_within(path, tree) for tree in _SYSTEM_WRITE_TREES):
                    raise refuse(f"writing to {path} would overwrite a system file")

    def _static(self, word: Word) -> str | None:
        """*word*'s text when it is known before run time (``~`` and ``$HOME`` count)."""
        if not word.dynamic:
            return word.text
        for expr in re.findall(f"{MARK_OPEN}(.*?){MARK_CLOSE}", word.text):
            if expr not in ("~", "HOME") and not (expr == "PWD" and self.cwd is not None):
                return None
        return self._expand(word.text)

    # ------------------------------------------------------------------ nested scripts

    def _catastrophic(self, name: str, args: list[Word]) -> None:
        texts = [plain(w.text) for w in args]
        if name not in _DEVICE_READERS and not name.startswith(("mkfs", "newfs")):
            for text in texts:
                for candidate in (text, text.partition("=")[2], text[text.find("/dev/") :]):
                    if candidate.startswith("/dev/") and is_disk_device(candidate):
                        raise refuse(f"`{name}` would write to the disk device {candidate}", name)
        if name == "rsync":
            self._rsync(args)
        elif name == "git":
            self._git_clean(args)
        elif name == "fermix":
            self._fermix(texts)
        elif name in ("uv", "uvx", "pipx") and "fermix" in texts:
            self._fermix(texts[texts.index("fermix") + 1 :])
        if name == "rm":
            self._rm(args)
        elif name in ("chmod", "chown", "chgrp"):
            self._chmod(name, args, guessed=False)
        elif name == "mv":
            sources = [w for w in args if not w.text.startswith("-")][:-1]
            for source in sources:
                self._disaster_target(source, "move away")
        elif name.startswith(("mkfs", "newfs")) or name == "mke2fs":
            raise refuse(f"`{name}` formats a disk and erases everything on it", name)
        elif name in _DISK_TOOLS_WITH_DEVICE:
            if name == "fdisk" and "-l" in texts:
                return
            for text in texts:
                if is_disk_device(text):
                    raise refuse(f"`{name}` on {text} rewrites a disk", name)
        elif name == "diskutil":
            if texts and texts[0].lower() in _DISKUTIL_ERASE:
                raise refuse(f"`diskutil {texts[0]}` erases a disk", name)
        elif name in ("dd", "ddrescue"):
            for text in texts:
                value = text[3:] if text.startswith("of=") else None
                if name == "ddrescue" and not text.startswith("-"):
                    value = text
                if value is not None and is_disk_device(value):
                    raise refuse(f"`{name}` onto {value} overwrites a disk device", name)
        elif name in ("shred", "wipe", "scrub", "truncate", "tee", "cp", "install"):
            candidates = texts[-1:] if name in ("cp", "install") else texts
            for text in candidates:
                if is_disk_device(text):
                    raise refuse(f"`{name}` onto {text} overwrites a disk device", name)
        elif name in _POWER:
            raise refuse(f"`{name}` would shut down or reboot the machine Fermix runs on", name)
        elif name in ("init", "telinit"):
            if any(t in ("0", "6") for t in texts):
                raise refuse(f"`{name} {' '.join(texts)}` would halt or reboot the machine", name)
        elif name in ("systemctl", "loginctl"):
            if any(t in _SYSTEMCTL_POWER for t in texts):
                raise refuse(f"`{name}` would halt or reboot the machine", name)
        elif name == "kill":
            self._kill(texts)

    def _rm(self, args: list[Word]) -> None:
        recursive = False
        targets: list[Word] = []
        options_done = False
        for word in args:
            text = word.text
            if not options_done and text == "--":
                options_done = True
                continue
            if not options_done and word.dynamic and plain(text).startswith("$"):
                recursive = True  # "$FLAGS" may well be -rf
                targets.append(word)
                continue
            if not options_done and text.startswith("--"):
                if len(text) >= 4 and "--no-preserve-root".startswith(text):
                    raise refuse("`rm --no-preserve-root` exists only to delete /", "rm")
                if len(text) >= 3 and "--recursive".startswith(text):
                    recursive = True
                continue
            if not options_done and text.startswith("-") and len(text) > 1:
                if "r" in text or "R" in text:
                    recursive = True
                continue
            targets.append(word)
        if recursive:
            for target in targets:
                computed = target.text == SUBST and bool(target.substitutions)
                if computed and not self._substituted(target.substitutions[0]):
                    raise refuse(
                        "the target of this recursive delete is computed at run time "
                        f"($({target.substitutions[0][:60]})) and could be anything, your "
                        "home included"
                    )
                self._disaster_target(target, "recursively delete")

    def _chmod(self, name: str, args: list[Word], *, guessed: bool) -> None:
        recursive = False
        reference = False
        positional: list[Word] = []
        for word in args:
            text = word.text
            if text.startswith("--"):
                if len(text) >= 4 and "--recursive".startswith(text):
                    recursive = True
                reference = reference or text.startswith("--reference")
                continue
            if text.startswith("-") and len(text) > 1 and not looks_like_mode(text):
                recursive = recursive or "R" in text
                continue
            positional.append(word)
        targets = positional if reference or guessed else positional[1:]
        for target in targets:
            if recursive:
                self._disaster_target(target, f"recursively {name}")
            elif any(path == "/" for path in self._targets(target)):
                raise refuse(f"`{name}` of / changes the whole file system", name)

    def _fermix(self, texts: list[str]) -> None:
        """The agent must not widen its own sandbox through the owner's CLI."""
        words = [t for t in texts if not t.startswith("-")]
        head = words[:2]
        widening = (
            head[:1] in (["grant"], ["revoke"], ["setup"])
            or head in (["config", "set"], ["config", "unset"], ["config", "edit"])
            or head == ["sandbox", "approve"]
        )
        if widening:
            raise refuse(
                f"`fermix {' '.join(head)}` changes Fermix's own settings or sandbox, which "
                "only the owner may do (in their own terminal, or with /sandbox and /confirm)",
                "fermix",
            )

    def _rsync(self, args: list[Word]) -> None:
        """``rsync --delete SRC DEST`` makes DEST a copy of SRC: an empty SRC empties it."""
        texts = [w.text for w in args]
        if not any(t.startswith("--delete") or t == "--remove-source-files" for t in texts):
            return
        positional = [w for w in args if not w.text.startswith("-")]
        if len(positional) >= 2:
            self._disaster_target(positional[-1], "mirror an empty or other folder over")

    def _git_clean(self, args: list[Word]) -> None:
        """``git -C ~ clean -fdx`` deletes everything git does not track under ~."""
        where: Word | None = None
        index = 0
        while index < len(args) and args[index].text.startswith("-"):
            text = args[index].text
            if text in ("-C", "--work-tree", "--git-dir", "-c") and index + 1 < len(args):
                if text in ("-C", "--work-tree"):
                    where = args[index + 1]
                index += 2
                continue
            if text.startswith("--work-tree="):
                where = Word(text.split("=", 1)[1])
            index += 1
        if index >= len(args) or args[index].text != "clean":
            return
        flags = [w.text for w in args[index + 1 :] if w.text.startswith("-")]
        forced = any(f == "--force" or (not f.startswith("--") and "f" in f) for f in flags)
        if not forced or any(f in ("-n", "--dry-run") for f in flags):
            return
        self._disaster_target(where or Word("."), "delete every untracked file under")

    def _kill(self, texts: list[str]) -> None:
        index = 0
        if texts and texts[0] in ("-s", "-n"):
            index = 2
        elif texts and texts[0].startswith("-") and texts[0] != "--":
            index = 1
        if any(text == "-1" for text in texts[index:]):
            raise refuse("`kill -1` signals every process you own, Fermix included", "kill")

    # ------------------------------------------------------------------ targets

    def _disaster_target(self, word: Word, action: str) -> None:
        for path in self._targets(word):
            why = self.disaster(path)
            if why:
                raise refuse(f"this would {action} {why}")

    def disaster(self, path: str) -> str | None:
        """What destroying *path* would destroy, when that is a disaster."""
        if path.startswith("~"):
            return f"a home directory ({path})"
        key = self.key(path)
        home = self.key(str(self.home))
        fermix = self.key(str(self.fermix_home))
        if key == "/":
            return "the whole file system (/)"
        if key == home:
            return f"your home directory ({self.home})"
        if is_within(home, key):
            return f"{path}, which holds your home directory"
        if is_within(fermix, key):
            return f"Fermix's own state ({self.fermix_home})"
        workspace = self.key(str(self.workspace)) if self.workspace is not None else None
        if is_within(key, fermix) and not (workspace and is_within(key, workspace)):
            return f"part of Fermix's own state ({path})"
        for rel, reason in HOME_PROTECTED:
            if is_within(key, self.key(str(self.home / rel))):
                return f"{path} ({reason}, protected)"
        if is_within(key, home) or any(is_within(key, self.key(str(t))) for t in self.temp_dirs):
            return None
        for root in OS_ROOTS:
            if is_within(key, self.key(root)):
                return f"the operating system's files ({path})"
        if key.count("/") == 1:
            return f"the top-level directory {path} (other users' homes, mounted disks)"
        return None

    def _targets(self, word: Word) -> list[str]:
        """Paths *word* may name at run time (worst case for unknown variables)."""
        results: list[str] = []
        for text in brace_expand(self._expand(word.text, word.substitutions)):
            if not text:
                continue
            if text.startswith("~"):  # ~name: judged only when it is that whole home
                bare = re.sub(r"(/\.?\*?)*$", "", text)
                if "/" not in bare:
                    results.append(bare)
                continue
            if not text.startswith("/"):
                if self.cwd is None:
                    continue
                text = f"{self.cwd}/{text}"
            text = re.sub(r"/+", "/", text)
            parts = text.split("/")
            for index, part in enumerate(parts):
                if any(ch in part for ch in "*?["):
                    text = "/".join(parts[:index]) or "/"
                    break
            results.append(posixpath.normpath(text))
        return results

    def _expand(self, text: str, substitutions: Sequence[str] = ()) -> str:
        out: list[str] = []
        index = 0
        bodies = iter(substitutions)
        while index < len(text):
            start = text.find(MARK_OPEN, index)
            if start < 0:
                out.append(text[index:])
                break
            out.append(text[index:start])
            end = text.find(MARK_CLOSE, start)
            expr = text[start + 1 : end]
            if expr == "()":
                out.append(self._substituted(next(bodies, "")))
            else:
                out.append(self._value(expr, at_start=start == 0))
            index = end + 1
        return "".join(out)

    def _render(self, word: Word) -> str:
        """*word* as shell text to re-parse: ``$(echo …)`` output written in, other
        expansions kept as ``${…}`` so they stay unknown."""
        if MARK_OPEN not in word.text:
            return word.text
        bodies = iter(word.substitutions)

        def back(match: re.Match[str]) -> str:
            expr = match.group(1)
            if expr == "()":
                return self._substituted(next(bodies, "")) or "$__SUBSTITUTION__"
            if expr.startswith("~"):
                return expr
            return "${" + expr + "}"

        return re.sub(f"{MARK_OPEN}(.*?){MARK_CLOSE}", back, word.text)

    def _substituted(self, body: str) -> str:
        """The output of ``$(echo /)``-style substitutions; unknown output counts as empty."""
        try:
            tokens = lex(body)
        except LexError:
            return ""
        words = [t for t in tokens if isinstance(t, Word)]
        if len(words) != len(tokens) or not words:
            return ""
        name = program_name(words[0].text)
        if name == "pwd" and self.cwd is not None:
            return str(self.cwd)
        statics = [self._static(w) for w in words[1:]]
        operands = [t for t in statics if t is not None and not t.startswith("-")]
        if name in ("realpath", "readlink", "dirname") and None not in statics and operands:
            target = operands[0]
            if not target.startswith("/") and self.cwd is not None:
                target = f"{self.cwd}/{target}"
            target = posixpath.normpath(target)
            return posixpath.dirname(target) if name == "dirname" else target
        if name == "mktemp":
            return "/tmp/mktemp.XXXXXXXX"  # noqa: S108 - a fresh temporary path, not a disaster
        if name in ("echo", "printf") and None not in statics:
            args = [text for text in statics if text is not None]
            while name == "echo" and args and args[0] in ("-n", "-e", "-E", "-ne", "-en"):
                args.pop(0)
            return " ".join(args)
        return ""

    def _value(self, expr: str, *, at_start: bool) -> str:
        if expr.startswith("~"):
            if expr == "~":
                return str(self.home)
            if expr == "~+" and self.cwd is not None:
                return str(self.cwd)
            return expr if at_start else ""
        name = re.match(r"[#!]?([A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-])", expr)
        var = name.group(1) if name else ""
        rest = expr[name.end() :] if name else expr
        if var == "HOME":
            return str(self.home)
        if var == "PWD" and self.cwd is not None:
            return str(self.cwd)
        known = getattr(self, "variables", {}).get(var)
        if known is not None and not rest:
            return known
        if rest.startswith((":?", "?")):
            return "\x02set"  # ${X:?} aborts when unset: never empty
        if rest.startswith((":-", "-", ":=", "=")):
            return rest[2:] if rest.startswith(":") else rest[1:]
        return ""

    def _inline_code(self, args: list[Word], depth: int, functions: set[str]) -> None:
        """``python -c``/``perl -e`` one-liners: their quoted strings that are shell
        commands (``os.system('rm -rf /')``) and ``rmtree`` of ``/`` or the home.

        Only catastrophes count here: a string in code is not a program the profile
        must allow, and is not recorded as one."""
        if self.enforce_profile:
            return
        for index, word in enumerate(args[:-1]):
            if word.text not in ("-c", "-e", "-E", "-r", "--eval", "-p"):
                continue
            judge_code(self, self._render(args[index + 1]), depth, functions)

    def _find(self, args: list[Word], depth: int, functions: set[str]) -> None:
        texts = [w.text for w in args]
        index = 0
        while index < len(texts) and texts[index] in ("-H", "-L", "-P"):
            index += 1
        starts: list[Word] = []
        while index < len(texts) and not texts[index].startswith(("-", "(", "!")):
            starts.append(args[index])
            index += 1
        expression = args[index:]
        filtered = _find_narrows(expression)
        if not filtered and any(w.text == "-delete" for w in expression):
            for start in starts or [Word(".")]:
                self._disaster_target(start, "delete everything under")
        position = 0
        while position < len(expression):
            if expression[position].text in ("-exec", "-execdir", "-ok", "-okdir"):
                end = position + 1
                while end < len(expression) and expression[end].text not in (";", "+"):
                    end += 1
                inner = expression[position + 1 : end]
                program = program_name(plain(inner[0].text)) if inner else ""
                if not filtered and program in _FILE_DESTROYERS:
                    for start in starts or [Word(".")]:
                        self._disaster_target(start, f"{program} every file under")
                for start in starts or [Word(".")]:
                    found = Word(f"{start.text}/found") if filtered else start
                    filled = [found if w.text == "{}" else w for w in inner]
                    self.simple(filled, depth + 1, functions=functions)
                position = end
            position += 1


def judge_code(rules: CatastropheRules, code: str, depth: int, functions: set[str]) -> None:
    """Interpreter code (a one-liner, a script file, an awk program): ``rmtree`` of / or
    the home, and quoted strings that are catastrophic shell commands
    (``os.system('rm -rf /')``, ``system("rm -rf ~")``). Only catastrophes count: a
    string in code is not a program the profile must allow, and is not recorded as one."""
    if rules.enforce_profile:
        return
    seen = len(rules.programs)
    if _RMTREE_DISASTER.search(code):
        raise refuse("this deletes / or your home directory (rmtree)")
    for literal in _STRING_LITERAL.findall(code[:100_000]):
        text = literal[1:-1]
        try:
            rules.script(text, depth + 1, functions)
        except CommandRefused as exc:
            if exc.reason == "catastrophic":
                raise
            # other refusals (profile, parse errors) do not apply to prose in code
    del rules.programs[seen:]


def _find_narrows(expression: list[Word]) -> bool:
    """Whether ``find``'s tests pick out some files rather than all of them."""
    texts = [plain(w.text) for w in expression]
    if any(t in ("-o", "-or", ",") for t in texts):
        return False
    for index, text in enumerate(texts):
        negated = index > 0 and texts[index - 1] in ("!", "-not")
        if negated or text not in _FIND_FILTERS or text in _FIND_NOT_NARROWING:
            continue
        if text in _FIND_NAME_TESTS:
            pattern = texts[index + 1] if index + 1 < len(texts) else ""
            if not re.sub(r"[*?./\\]|\.\*", "", pattern):
                continue  # "-name '*'" matches every name
        return True
    return False
