"""Logging setup in which every line, crash reports included, passes through one redactor.

A log is the file people paste into bug reports, so a credential that reaches it has
leaked. Instead of trusting every call site, the redaction happens at the last moment, on
the fully formatted text (message, arguments, exception and stack), in the formatter that
every handler installed here uses. A ``[REDACTED:<vendor>]`` marker in a log means the
redactor caught a secret, not that data was lost.

Patterns follow the vendors' public token formats and are deliberately specific: a
redactor that eats git SHAs, UUIDs or ordinary words makes logs useless, so each pattern
demands the vendor prefix and, where the format allows, a minimum length and a digit.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO, Any

LOG_FILE_NAME = "fermix.log"
LOG_MAX_BYTES = 5 * 1024 * 1024
LOG_BACKUPS = 5
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
CRASH_LOGGER = "fermix.crash"

# A token starts where no token character precedes it; this keeps "task-…" from looking like "sk-…".
_START = r"(?<![A-Za-z0-9_-])"
_END = r"(?![A-Za-z0-9_-])"
# The body of an API key: URL-safe base64 characters, at least one digit (random keys of this
# length always have one; hyphenated English words such as "sk-learn-compatible" do not).
_BODY = r"(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]"


def _rx(pattern: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(pattern, flags)


#: Ordered (vendor, pattern) pairs. Order matters: the first pattern to claim a token labels
#: it, so Anthropic's and OpenRouter's ``sk-`` prefixes come before OpenAI's generic one, and
#: bearer headers come last so a recognised vendor token inside one keeps its vendor label.
REDACTIONS: list[tuple[str, re.Pattern[str]]] = [
    ("anthropic", _rx(_START + r"sk-ant-(?:api|oat|admin|ort)?[0-9]{0,2}-?" + _BODY + r"{20,}")),
    ("openrouter", _rx(_START + r"sk-or-v[0-9]+-[0-9a-f]{32,}" + _END)),
    ("openai", _rx(_START + r"sk-(?:proj-|svcacct-|admin-|None-)?" + _BODY + r"{20,}")),
    ("github", _rx(_START + r"gh[pousr]_[A-Za-z0-9]{36,255}" + _END)),
    ("github", _rx(_START + r"github_pat_[A-Za-z0-9_]{40,255}" + _END)),
    ("slack", _rx(_START + r"xox[abpsre]-[0-9]+-[A-Za-z0-9-]{8,}")),
    ("slack", _rx(_START + r"xapp-[0-9]+-[A-Za-z0-9-]{10,}")),
    ("xai", _rx(_START + r"xai-(?=[A-Za-z0-9]*[0-9])[A-Za-z0-9]{40,}" + _END)),
    ("google", _rx(_START + r"AIza[0-9A-Za-z_-]{35}" + _END)),
    ("google", _rx(_START + r"ya29\.[0-9A-Za-z_.-]{20,}")),
    ("google", _rx(_START + r"GOCSPX-[0-9A-Za-z_-]{28}" + _END)),
    ("telegram", _rx(r"(?<![0-9A-Za-z_:-])[0-9]{6,12}:AA[A-Za-z0-9_-]{33}" + _END)),
    ("aws", _rx(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])")),
    ("jwt", _rx(_START + r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}" + _END)),
    (
        "bearer",
        _rx(r"\bbearer\s+(?=[A-Za-z0-9._~+/-]*[0-9])[A-Za-z0-9._~+/-]{16,}=*", re.IGNORECASE),
    ),
]

#: A literal each pattern's match must contain, in REDACTIONS order: a text holding none of
#: them skips the pattern. A substring test costs a fraction of a regex pass, and most
#: text (every trace field, every log line) holds no token at all.
_NEEDLES: tuple[tuple[str, ...], ...] = (
    ("sk-ant-",),
    ("sk-or-v",),
    ("sk-",),
    ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    ("github_pat_",),
    ("xox",),
    ("xapp-",),
    ("xai-",),
    ("AIza",),
    ("ya29.",),
    ("GOCSPX-",),
    (":AA",),
    ("AKIA", "ASIA"),
    ("eyJ",),
    ("bearer",),  # matched case-insensitively: checked against the lowered text
)
#: ``(marker, pattern, needles, case-insensitive)`` per pattern, computed once.
_PLAN = tuple(
    (f"[REDACTED:{vendor}]", pattern, needles, bool(pattern.flags & re.IGNORECASE))
    for (vendor, pattern), needles in zip(REDACTIONS, _NEEDLES, strict=True)
)

# Exact values the secret resolver has handed out. Some providers' keys have no recognisable
# shape (a bare 32-character string); knowing the value is the only way to catch those.
_MIN_KNOWN_SECRET = 8
#: The shortest text any pattern or known value can match (``AKIA`` + 16 is the shortest
#: shaped token); shorter strings — most trace fields — skip the regexes entirely.
_MIN_SHAPED = _MIN_KNOWN_SECRET
_known_lock = threading.Lock()
_known_values: set[str] = set()
_known_pattern: re.Pattern[str] | None = None
#: Bumped (under ``_known_lock``) whenever the known secrets change; see :func:`remember`.
_generation = 0


def add_known_secret(value: str) -> None:
    """Redact this exact value from now on (values shorter than 8 characters are ignored).

    The value's JSON-escaped spelling is learnt too when it differs (a key with a quote or
    a backslash), so a body that quotes the key inside JSON is caught as well.
    """
    global _known_pattern
    value = value.strip()
    if len(value) < _MIN_KNOWN_SECRET:
        return
    spellings = {value, json.dumps(value, ensure_ascii=False)[1:-1]}
    with _known_lock:
        if spellings <= _known_values:
            return
        _known_values.update(spellings)
        ordered = sorted(_known_values, key=len, reverse=True)
        _known_pattern = re.compile("|".join(re.escape(v) for v in ordered))
        _forget_memos()


def forget_known_secrets() -> None:
    global _known_pattern
    with _known_lock:
        _known_values.clear()
        _known_pattern = None
        _forget_memos()


def marker(vendor: str) -> str:
    return f"[REDACTED:{vendor}]"


#: Short texts already redacted (trace fields repeat the same event names, channels and
#: models on every turn). Cleared whenever the known secrets change.
_redacted: dict[str, str] = {}
_REDACTED_MAX_CHARS = 128
_REDACTED_MAX_ENTRIES = 4096
#: Every memo of redacted text (:func:`redaction_memo`): all are emptied together.
_memos: list[dict[str, str]] = [_redacted]


def _forget_memos() -> None:
    # Called with _known_lock held.
    global _generation
    _generation += 1
    for memo in _memos:
        memo.clear()


def redaction_memo() -> dict[str, str]:
    """A new memo for values derived from redacted short texts (fill it with :func:`remember`).

    The redactor empties it whenever the known secrets change, so a value remembered before
    a secret was learnt is never served after: read it with ``memo.get(text)``.
    """
    memo: dict[str, str] = {}
    with _known_lock:
        _memos.append(memo)
    return memo


def remember(memo: dict[str, str], text: str, derive: Callable[[str], str] = str) -> str:
    """``derive(redact(text))``, stored in *memo* (one of :func:`redaction_memo`'s) under *text*.

    Texts over 128 characters are not stored. The value is stored only if the known secrets
    did not change while it was computed — otherwise a redaction made with the old secrets
    could outlive the change.
    """
    if len(text) > _REDACTED_MAX_CHARS:
        return derive(redact(text))
    generation = _generation
    done = derive(redact(text))
    with _known_lock:
        if generation == _generation:
            if len(memo) >= _REDACTED_MAX_ENTRIES:
                memo.clear()
            memo[text] = done
    return done


def redact_short(text: str) -> str:
    """:func:`redact`, remembered for texts of up to 128 characters."""
    done = _redacted.get(text)
    if done is None:
        done = remember(_redacted, text)
    return done


def redact(text: str) -> str:
    """Replace every credential-shaped token in *text* with ``[REDACTED:<vendor>]``.

    Also every exact value :func:`add_known_secret` learnt: the configured secrets, whose
    shape may match no pattern at all.
    """
    if not text or len(text) < _MIN_SHAPED:
        return text
    lowered: str | None = None
    for label, pattern, needles, folded in _PLAN:
        probe = text
        if folded:
            probe = lowered = text.lower() if lowered is None else lowered
        for needle in needles:
            if needle in probe:
                text = pattern.sub(label, text)
                lowered = None
                break
    known = _known_pattern
    if known is not None:
        text = known.sub(marker("secret"), text)
    return text


class RedactingFormatter(logging.Formatter):
    """A formatter whose every output, including tracebacks and stacks, is redacted.

    ``formatException`` is redacted too (not only ``format``) because logging caches its
    result on the record, and another handler reusing that cache must get the clean text.
    When *inner* is given, its formatting is kept and only redaction is added, which is how
    handlers that existed before :func:`setup_logging` are brought under the same rule.
    """

    def __init__(
        self,
        fmt: str | None = LOG_FORMAT,
        datefmt: str | None = None,
        *,
        inner: logging.Formatter | None = None,
    ) -> None:
        super().__init__(fmt, datefmt)
        self.inner = inner

    def format(self, record: logging.LogRecord) -> str:
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        formatted = self.inner.format(record) if self.inner is not None else super().format(record)
        return redact(formatted)

    def formatException(self, ei: Any) -> str:
        return redact(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        return redact(super().formatStack(stack_info))


class PrivateRotatingFileHandler(logging.FileHandler):
    """A size-rotated log file created (rollovers included) with mode 0600.

    It rotates as :class:`logging.handlers.RotatingFileHandler` does — before a record
    that would take a regular file to *maxBytes* or beyond, ``fermix.log`` becomes
    ``fermix.log.1``, ``.1`` becomes ``.2`` and so on up to *backupCount* — but is built on
    :class:`logging.FileHandler`: :mod:`logging.handlers` imports :mod:`pickle` and its
    socket, queue and e-mail handlers' machinery, about half a megabyte in every process
    that only writes a file.
    """

    def __init__(
        self,
        filename: str | os.PathLike[str],
        mode: str = "a",
        maxBytes: int = 0,  # RotatingFileHandler's parameters, in its order
        backupCount: int = 0,
        encoding: str | None = None,
        delay: bool = False,
        errors: str | None = None,
    ) -> None:
        if maxBytes > 0:
            mode = "a"  # as RotatingFileHandler: truncating would lose the rotation's point
        super().__init__(filename, mode, encoding=encoding, delay=delay, errors=errors)
        self.maxBytes = maxBytes
        self.backupCount = backupCount

    def _open(self) -> IO[str]:  # type: ignore[override]
        def opener(path: str, flags: int) -> int:
            return os.open(path, flags, 0o600)

        stream = open(  # noqa: SIM115 - the handler owns and closes the stream
            self.baseFilename, self.mode, encoding=self.encoding, errors=self.errors, opener=opener
        )
        os.chmod(self.baseFilename, 0o600)
        return stream

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if self.shouldRollover(record):
                self.doRollover()
            logging.FileHandler.emit(self, record)
        except Exception:
            self.handleError(record)

    def shouldRollover(self, record: logging.LogRecord) -> bool:
        """Whether *record* would take the file to ``maxBytes``; never for a path that is
        not a regular file (``/dev/null``, a pipe)."""
        if os.path.exists(self.baseFilename) and not os.path.isfile(self.baseFilename):
            return False
        if self.stream is None:
            self.stream = self._open()
        if self.maxBytes > 0:
            message = f"{self.format(record)}\n"
            self.stream.seek(0, 2)
            if self.stream.tell() + len(message) >= self.maxBytes:
                return True
        return False

    def doRollover(self) -> None:
        if self.stream:
            self.stream.close()
            self.stream = None  # type: ignore[assignment]
        if self.backupCount > 0:
            for i in range(self.backupCount - 1, 0, -1):
                source, target = f"{self.baseFilename}.{i}", f"{self.baseFilename}.{i + 1}"
                if os.path.exists(source):
                    if os.path.exists(target):
                        os.remove(target)
                    os.rename(source, target)
            target = f"{self.baseFilename}.1"
            if os.path.exists(target):
                os.remove(target)
            if os.path.exists(self.baseFilename):
                os.rename(self.baseFilename, target)
        if not self.delay:
            self.stream = self._open()


_MARK = "_fermix_handler"
_hooks_lock = threading.Lock()
_original_hooks: dict[str, Any] = {}
_console_stream: IO[str] | None = None


def _logs_dir(home: Any) -> Path:
    logs = getattr(home, "logs", None)
    if logs is not None:
        return Path(logs)
    base = getattr(home, "path", home)
    return Path(base) / "logs"


def setup_logging(
    home: Any,
    *,
    level: int | str = "INFO",
    console: bool = True,
    console_stream: IO[str] | None = None,
    console_level: int | str | None = None,
    file: bool = True,
) -> None:
    """Send logs to ``$FERMIX_HOME/logs/fermix.log`` (and stderr), all redacted.

    *home* is a :class:`~fermix_core.home.FermixHome` or the FERMIX_HOME path. Calling it
    again replaces the handlers it installed before rather than adding more, so a CLI that
    reconfigures (``--verbose``) never prints each line twice. Handlers installed by others
    (a test harness, an embedding app) are kept, but their output is redacted as well.
    """
    global _console_stream
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, _MARK, False):
            root.removeHandler(handler)
            handler.close()

    if file:
        logs_dir = _logs_dir(home)
        logs_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(logs_dir, 0o700)
        file_handler = PrivateRotatingFileHandler(
            logs_dir / LOG_FILE_NAME,
            maxBytes=LOG_MAX_BYTES,
            backupCount=LOG_BACKUPS,
            encoding="utf-8",
            delay=False,
        )
        file_handler.setFormatter(RedactingFormatter())
        setattr(file_handler, _MARK, True)
        root.addHandler(file_handler)

    _console_stream = None
    if console:
        stream = console_stream if console_stream is not None else sys.stderr
        console_handler = logging.StreamHandler(stream)
        console_handler.setFormatter(RedactingFormatter())
        if console_level is not None:
            console_handler.setLevel(
                console_level.upper() if isinstance(console_level, str) else console_level
            )
        setattr(console_handler, _MARK, True)
        root.addHandler(console_handler)
        _console_stream = stream

    for handler in root.handlers:
        if not isinstance(handler.formatter, RedactingFormatter):
            handler.setFormatter(RedactingFormatter(inner=handler.formatter or logging.Formatter()))

    root.setLevel(level.upper() if isinstance(level, str) else level)
    install_crash_hooks()


def teardown_logging() -> None:
    """Remove the handlers and hooks :func:`setup_logging` installed (embedding apps, tests)."""
    global _console_stream
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, _MARK, False):
            root.removeHandler(handler)
            handler.close()
    _console_stream = None
    with _hooks_lock:
        if "sys" in _original_hooks:
            sys.excepthook = _original_hooks.pop("sys")
        if "threading" in _original_hooks:
            threading.excepthook = _original_hooks.pop("threading")


# --------------------------------------------------------------------------- crash reports


def install_crash_hooks() -> None:
    """Route unhandled exceptions (main thread and others) through the redacting log."""
    with _hooks_lock:
        if "sys" not in _original_hooks:
            _original_hooks["sys"] = sys.excepthook
            sys.excepthook = _sys_hook
        if "threading" not in _original_hooks:
            _original_hooks["threading"] = threading.excepthook
            threading.excepthook = _thread_hook


def _crash(
    title: str,
    exc_type: type[BaseException],
    exc: BaseException | None,
    tb: TracebackType | None,
) -> None:
    logging.getLogger(CRASH_LOGGER).critical(
        "crash report: %s: %s", title, exc_type.__name__, exc_info=(exc_type, exc, tb)
    )
    # The console handler, when it writes to stderr, already showed the traceback.
    if _console_stream is not sys.stderr:
        text = "".join(traceback.format_exception(exc_type, exc, tb))
        try:
            sys.stderr.write(redact(text))
            sys.stderr.flush()
        except (OSError, ValueError, AttributeError):
            pass


def _sys_hook(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    if issubclass(exc_type, KeyboardInterrupt):
        sys.stderr.write("interrupted\n")
        return
    _crash("unhandled exception", exc_type, exc, tb)


def _thread_hook(args: threading.ExceptHookArgs) -> None:
    if issubclass(args.exc_type, SystemExit):
        return
    name = args.thread.name if args.thread is not None else "unknown"
    _crash(
        f"unhandled exception in thread {name}", args.exc_type, args.exc_value, args.exc_traceback
    )
