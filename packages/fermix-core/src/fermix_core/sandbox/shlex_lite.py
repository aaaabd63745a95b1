"""A small POSIX-shell lexer that keeps what a safety check needs and ``shlex`` throws away.

``shlex`` is a fine word splitter, but a check for ``rm -rf /`` must also see *inside*
``$( … )``, backticks, ``<( … )`` and here-documents, must know which words were expanded
at run time (``"$DIR"/`` is ``/`` when ``DIR`` is empty) and must split on ``;``, ``&&``,
``|`` and newlines without being fooled by quotes. This lexer does exactly that and
nothing more: it never executes, globs or expands anything.

Expansions survive in a word's text as markers — ``\\x00<expr>\\x01`` — where ``<expr>``
is a variable expression (``HOME``, ``DIR:?``, ``X:-default``), ``~``/``~name`` for an
unquoted tilde prefix, or ``()`` for a command substitution whose body is kept separately.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["LexError", "Op", "Simple", "Word", "lex", "split_commands"]

MARK_OPEN = "\x00"
MARK_CLOSE = "\x01"
SUBST = f"{MARK_OPEN}(){MARK_CLOSE}"

#: Longest first, so ``&&`` wins over ``&`` and ``<<-`` over ``<<``.
OPERATORS: tuple[str, ...] = (
    ";;&",
    "&>>",
    "<<<",
    "<<-",
    "&&",
    "||",
    ";;",
    ";&",
    "|&",
    "&>",
    ">>",
    ">&",
    ">|",
    "<<",
    "<&",
    "<>",
    "&",
    ";",
    "|",
    "(",
    ")",
    "<",
    ">",
)
REDIRECTS = frozenset({"<", ">", ">>", ">&", ">|", "<<<", "<&", "<>", "&>", "&>>", "<<", "<<-"})
OUTPUT_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>", "<>"})
_NAME_START = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_"
_NAME_CHARS = _NAME_START + "0123456789"
_SPECIAL_PARAMS = "0123456789@*#?$!-"
_WORD_BREAK = " \t\n;&|()<>"


class LexError(ValueError):
    """The text is not a complete shell command (an unterminated quote or substitution)."""


@dataclass
class Word:
    """One shell word after quote removal; expansions are kept as markers."""

    text: str
    substitutions: list[str] = field(default_factory=list)

    @property
    def dynamic(self) -> bool:
        return MARK_OPEN in self.text


@dataclass
class Op:
    text: str
    heredoc: str | None = None


@dataclass
class Simple:
    """One simple command: its words, its redirections, and the command piped into it."""

    words: list[Word] = field(default_factory=list)
    #: ``(operator, target word or None, here-document body or None)``
    redirects: list[tuple[str, Word | None, str | None]] = field(default_factory=list)
    piped_from: Simple | None = None

    def substitutions(self) -> list[str]:
        found = [body for word in self.words for body in word.substitutions]
        for _op, target, _body in self.redirects:
            if target is not None:
                found.extend(target.substitutions)
        return found


class _Lexer:
    def __init__(self, src: str) -> None:
        self.src = src
        self.n = len(src)
        self.tokens: list[Word | Op] = []
        self.chars: list[str] | None = None
        self.subs: list[str] = []
        self.pending: list[tuple[Op, str, bool]] = []

    # -- word building

    def start(self) -> list[str]:
        if self.chars is None:
            self.chars = []
        return self.chars

    def flush(self) -> None:
        if self.chars is not None:
            self.tokens.append(Word("".join(self.chars), self.subs))
            self.chars = None
            self.subs = []

    def mark(self, expr: str) -> None:
        self.start().append(f"{MARK_OPEN}{expr}{MARK_CLOSE}")

    # -- scanning

    def run(self) -> list[Word | Op]:
        src, i = self.src, 0
        while i < self.n:
            c = src[i]
            if c in " \t\r":
                self.flush()
                i += 1
            elif c == "\n":
                self.flush()
                self.tokens.append(Op("\n"))
                i = self.heredocs(i + 1)
            elif c == "#" and self.chars is None:
                end = src.find("\n", i)
                i = self.n if end < 0 else end
            elif c == "\\":
                if i + 1 < self.n and src[i + 1] == "\n":
                    i += 2
                elif i + 1 < self.n:
                    self.start().append(src[i + 1])
                    i += 2
                else:
                    i += 1
            elif c == "'":
                end = src.find("'", i + 1)
                if end < 0:
                    raise LexError("unterminated single quote")
                self.start().append(src[i + 1 : end])
                i = end + 1
            elif c == '"':
                i = self.double(i + 1)
            elif c == "`":
                i = self.backtick(i + 1)
            elif c == "$":
                i = self.dollar(i)
            elif c == "~" and self.chars is None:
                i = self.tilde(i)
            elif c in "<>" and i + 1 < self.n and src[i + 1] == "(":
                body, i = self.paren(i + 2)
                self.subs.append(body)
                self.start().append(SUBST)
            else:
                op = next((o for o in OPERATORS if src.startswith(o, i)), None)
                if op is None:
                    self.start().append(c)
                    i += 1
                    continue
                self.operator(op)
                i += len(op)
                if op in ("<<", "<<-"):
                    i = self.heredoc_delimiter(i, strip_tabs=op == "<<-")
        self.flush()
        if self.pending:
            for op, _delim, _strip in self.pending:
                op.heredoc = ""
        return self.tokens

    def operator(self, op: str) -> None:
        if op in REDIRECTS and self.chars is not None and not self.subs:
            text = "".join(self.chars)
            if text.isdigit() or (text.startswith("{") and text.endswith("}")):
                self.chars = None  # an fd number (2>) or {fd}> — not an argument
        self.flush()
        self.tokens.append(Op(op))

    def double(self, i: int) -> int:
        src = self.src
        chars = self.start()
        while i < self.n:
            c = src[i]
            if c == '"':
                return i + 1
            if c == "\\" and i + 1 < self.n:
                nxt = src[i + 1]
                if nxt == "\n":
                    i += 2
                    continue
                if nxt in '$`"\\':
                    chars.append(nxt)
                    i += 2
                    continue
                chars.append(c)
                i += 1
            elif c == "$":
                i = self.dollar(i)
            elif c == "`":
                i = self.backtick(i + 1)
            else:
                chars.append(c)
                i += 1
        raise LexError("unterminated double quote")

    def backtick(self, i: int) -> int:
        src = self.src
        body: list[str] = []
        while i < self.n:
            c = src[i]
            if c == "\\" and i + 1 < self.n and src[i + 1] in "`\\$":
                body.append(src[i + 1])
                i += 2
                continue
            if c == "`":
                self.subs.append("".join(body))
                self.start().append(SUBST)
                return i + 1
            body.append(c)
            i += 1
        raise LexError("unterminated backtick substitution")

    def dollar(self, i: int) -> int:
        src = self.src
        nxt = src[i + 1] if i + 1 < self.n else ""
        if nxt == "(":
            if src.startswith("((", i + 1):
                body, end = self.paren(i + 3, depth=2)
                self.subs.extend(substitutions_in(body))
                self.mark("(())")
                return end
            body, end = self.paren(i + 2)
            self.subs.append(body)
            self.start().append(SUBST)
            return end
        if nxt == "{":
            depth, j = 1, i + 2
            while j < self.n and depth:
                if src[j] == "{":
                    depth += 1
                elif src[j] == "}":
                    depth -= 1
                j += 1
            if depth:
                raise LexError("unterminated ${...} expansion")
            expr = src[i + 2 : j - 1]
            self.subs.extend(substitutions_in(expr))
            self.mark(expr)
            return j
        if nxt and nxt in _NAME_START:
            j = i + 1
            while j < self.n and src[j] in _NAME_CHARS:
                j += 1
            self.mark(src[i + 1 : j])
            return j
        if nxt and nxt in _SPECIAL_PARAMS:
            self.mark(nxt)
            return i + 2
        if nxt == "'":  # $'...' ANSI-C quoting: taken literally (escapes are not decoded)
            end = src.find("'", i + 2)
            if end < 0:
                raise LexError("unterminated $'...' quote")
            self.start().append(src[i + 2 : end])
            return end + 1
        self.start().append("$")
        return i + 1

    def tilde(self, i: int) -> int:
        src = self.src
        j = i + 1
        while j < self.n and src[j] not in _WORD_BREAK and src[j] not in "/'\"\\$`":
            j += 1
        if j < self.n and src[j] in "'\"\\$`":
            self.start().append("~")  # a quoted or expanded user name: not a tilde prefix
            return i + 1
        self.mark(src[i:j])
        return j

    def paren(self, i: int, depth: int = 1) -> tuple[str, int]:
        """The body of ``$(``/``<(`` up to its matching ``)`` (quote-aware)."""
        src, start = self.src, i
        while i < self.n:
            c = src[i]
            if c == "\\":
                i += 2
                continue
            if c == "'":
                end = src.find("'", i + 1)
                if end < 0:
                    raise LexError("unterminated single quote")
                i = end + 1
                continue
            if c == '"':
                i += 1
                while i < self.n and src[i] != '"':
                    i += 2 if src[i] == "\\" else 1
                i += 1
                continue
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    return src[start:i], i + 1
            i += 1
        raise LexError("unterminated $( ... ) substitution")

    def heredoc_delimiter(self, i: int, *, strip_tabs: bool) -> int:
        src = self.src
        while i < self.n and src[i] in " \t":
            i += 1
        chars: list[str] = []
        while i < self.n and src[i] not in _WORD_BREAK:
            c = src[i]
            if c in "'\"":
                end = src.find(c, i + 1)
                if end < 0:
                    raise LexError("unterminated quote in a here-document delimiter")
                chars.append(src[i + 1 : end])
                i = end + 1
                continue
            if c == "\\" and i + 1 < self.n:
                chars.append(src[i + 1])
                i += 2
                continue
            chars.append(c)
            i += 1
        op = self.tokens[-1]
        assert isinstance(op, Op)
        self.pending.append((op, "".join(chars), strip_tabs))
        return i

    def heredocs(self, i: int) -> int:
        src = self.src
        for op, delimiter, strip_tabs in self.pending:
            body: list[str] = []
            while i < self.n:
                end = src.find("\n", i)
                end = self.n if end < 0 else end
                line = src[i:end]
                i = end + 1
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    break
                body.append(line)
            op.heredoc = "\n".join(body)
        self.pending = []
        return min(i, self.n)


def lex(src: str) -> list[Word | Op]:
    """Tokens of *src*; raises :class:`LexError` for unterminated quotes or substitutions."""
    return _Lexer(src).run()


def substitutions_in(text: str) -> list[str]:
    """Command-substitution bodies inside *text* (used for ``${X:-$(cmd)}`` and ``$((…))``)."""
    try:
        tokens = lex(text)
    except LexError:
        return []
    return [body for tok in tokens if isinstance(tok, Word) for body in tok.substitutions]


_SEPARATORS = frozenset({"\n", ";", "&", "&&", "||", "|", "|&", ";;", ";&", ";;&", "(", ")"})


def split_commands(tokens: list[Word | Op]) -> tuple[list[Simple], set[str]]:
    """Simple commands in order, and the names of shell functions the text defines.

    ``case`` patterns (``a)``) and function headers (``f()``) are recognised and dropped,
    so they are not mistaken for programs.
    """
    commands: list[Simple] = []
    functions: set[str] = set()
    current = Simple()
    expect_target = False
    case_depth = 0
    in_pattern = False
    paren_depth = 0
    index = 0

    def finish(piped: bool) -> None:
        nonlocal current
        done = current
        if done.words or done.redirects:
            commands.append(done)
        current = Simple(piped_from=done if piped and (done.words or done.redirects) else None)

    while index < len(tokens):
        tok = tokens[index]
        index += 1
        if in_pattern:  # "a|b)" of a case clause: patterns, not commands
            if isinstance(tok, Word) and tok.text == "esac":
                case_depth -= 1
                in_pattern = False
            elif isinstance(tok, Op) and tok.text == ")":
                in_pattern = False
            continue
        if isinstance(tok, Word):
            if expect_target:
                op, _target, body = current.redirects[-1]
                current.redirects[-1] = (op, tok, body)
                expect_target = False
                continue
            current.words.append(tok)
            first = current.words[0].text
            if first == "case" and tok.text == "in" and len(current.words) >= 3:
                case_depth += 1
                in_pattern = True
                finish(piped=False)
            elif first == "esac" and len(current.words) == 1 and case_depth:
                case_depth -= 1
            continue
        op = tok.text
        if op in REDIRECTS:
            current.redirects.append((op, None, tok.heredoc))
            expect_target = op not in ("<<", "<<-")
            continue
        expect_target = False
        if op == "(":
            nxt = tokens[index] if index < len(tokens) else None
            if len(current.words) == 1 and isinstance(nxt, Op) and nxt.text == ")":
                functions.add(current.words[0].text)  # f() { ... }
                current = Simple()
                index += 1
                continue
            paren_depth += 1
            finish(piped=False)
            continue
        if op == ")":
            paren_depth = max(0, paren_depth - 1)
            finish(piped=False)
            continue
        finish(piped=op in ("|", "|&"))
        if case_depth and op in (";;", ";&", ";;&"):
            in_pattern = True
    finish(piped=False)
    return commands, functions
